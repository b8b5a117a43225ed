"""Console passwords (D35): argon2id hashes, the rules a new password must pass, and the
one-time passwords `petstore users add` and `users reset-password` print.

A password is normalised to Unicode's NFKC form before it is checked or hashed (NIST SP
800-63B 5.1.1.2), so the same password typed on two keyboards is the same password. Its
length is counted in characters after that: 12 to 128, any Unicode. The bundled list of
common passwords is Django's (django/contrib/auth/common-passwords.txt.gz, BSD licence:
the 20,000 most common of Royce Williams' list; its licence is beside it, in
common-passwords.LICENSE), compared as Django compares it: lower case, spaces trimmed.

And a password must be hard to guess (D36, ASVS 2.1.7): not built of the user's name or
the shop's alone (its letters and digits one name's words over and again), and rated at
least STRONG_ENOUGH by zxcvbn (Dropbox's estimator, of how many guesses an attacker who
knows the common passwords, words, names, keyboard runs, repeats and dates would need),
given the user's name and the shop's as words the attacker knows too. Its refusal says why,
in zxcvbn's words where it has some.
"""

from __future__ import annotations

import functools
import gzip
import re
import secrets
import unicodedata
from importlib import resources

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from zxcvbn import zxcvbn

from app.core.errors import PasswordRefused

MIN_LENGTH = 12
MAX_LENGTH = 128
COMMON_PASSWORDS = "common-passwords.txt.gz"
# What the shop calls itself (there is no setting for a shop's name): the console's title
# and the issuer an authenticator app shows, and the command's name.
SHOP_NAME = "Pet Store Orders"
SHOP_WORDS = (SHOP_NAME, "petstore")
# zxcvbn's scores: 0 (too guessable) to 4; 3 is "safely unguessable: moderate protection
# from offline slow-hash scenario" (some 10**10 guesses), which argon2id's cost makes
# protection from any online one (D36).
STRONG_ENOUGH = 3
ESTIMATED_MAX = 72  # zxcvbn estimates at most this many characters (a longer one: its start)

# argon2-cffi's defaults are RFC 9106's second recommended option (argon2id, 3 passes over
# 64 MiB, 4 lanes): a hash costs tens of milliseconds, and a verification as much.
HASHER = PasswordHasher()


def normalised(password: str) -> str:
    """The password as it is checked and hashed: NFKC."""
    return unicodedata.normalize("NFKC", password)


@functools.cache
def common_passwords() -> frozenset[str]:
    """The bundled list, read once a process."""
    packed = resources.files(__package__).joinpath(COMMON_PASSWORDS).read_bytes()
    return frozenset(line.strip() for line in gzip.decompress(packed).decode().splitlines()
                     if line.strip())


def check_new(password: str, name: str) -> str:
    """The new password, normalised, if D35's rules take it; else PasswordRefused saying
    which rule it breaks."""
    password = normalised(password)
    if len(password) < MIN_LENGTH:
        raise PasswordRefused(f"A password needs at least {MIN_LENGTH} characters; a phrase "
                              "of a few words is easy to remember.")
    if len(password) > MAX_LENGTH:
        raise PasswordRefused(f"A password has at most {MAX_LENGTH} characters.")
    if built_of_names(password, name):
        raise PasswordRefused("A password must not be built of your name or the shop's "
                              "alone: they are the first words an attacker tries.")
    if password.strip().lower() in common_passwords():
        raise PasswordRefused("That password is on the list of common passwords, which "
                              "are the first that attackers try; choose another.")
    rated = zxcvbn(password[:ESTIMATED_MAX], user_inputs=[name, *SHOP_WORDS])
    if rated["score"] < STRONG_ENOUGH:
        warning = rated["feedback"]["warning"] or "It is made of parts attackers try early."
        raise PasswordRefused(f"That password is too easy to guess. {_sentence(warning)} "
                              "A phrase of a few uncommon words is strong and easy to "
                              "remember.")
    return password


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else f"{text}."


def built_of_names(password: str, name: str) -> bool:
    """Whether a password's letters and digits, without case (casefolded: "STRASSE" is
    "straße"), are the words of the user's name or the shop's (SHOP_WORDS) one after
    another, as often as you like: "owner owner owner", "PetStore-Orders", "ordersowner"."""
    words = {word for text in (name, *SHOP_WORDS) for word in _words(text)}
    words |= {"".join(_words(text)) for text in (name, *SHOP_WORDS)}
    letters = "".join(_words(password))
    if not letters or not words:
        return False
    # Whether letters[:end] is made of words, for each end (a word break).
    made = [True] + [False] * len(letters)
    for end in range(1, len(letters) + 1):
        made[end] = any(made[end - len(word)] and letters.endswith(word, 0, end)
                        for word in words if len(word) <= end)
    return made[-1]


def _words(text: str) -> list[str]:
    return [word for word in re.split(r"[\W_]+", text.casefold()) if word]


def hash_password(password: str) -> str:
    """The argon2id hash to store of a password already checked."""
    return HASHER.hash(normalised(password))


def verify(password_hash: str, password: str) -> bool:
    """Whether the password is the one hashed."""
    try:
        return HASHER.verify(password_hash, normalised(password))
    except (VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    """Whether a hash was made with other parameters than HASHER's (then it is made again
    at the next sign-in, while the password is at hand)."""
    return HASHER.check_needs_rehash(password_hash)


@functools.cache
def _decoy() -> str:
    return HASHER.hash(secrets.token_urlsafe(16))


def verify_nobody(password: str) -> bool:
    """Spend on a sign-in for no user (unknown or disabled) the time a verification takes,
    so that the answer's time does not tell who exists (D35). Always False."""
    verify(_decoy(), password)
    return False


def one_time_password() -> str:
    """A random password to be changed at first sign-in: 20 characters of the URL-safe
    alphabet (120 bits), which no list holds."""
    return secrets.token_urlsafe(15)
