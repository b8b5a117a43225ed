"""Recovery codes (D38, after GitHub's): ten single-use codes that stand in for the code of
a user's authenticator when it is lost, so that an owner without the phone is not locked
out for good. They are made when a second factor is first set up, and again whenever the
user asks (after the password), each new set replacing the one before; each is shown
once, when made, and kept only as a digest; each is spent when used, at the sign-in's code
step or wherever the current code is asked again (changing or removing the second factor).
They go with the second factor: removing it (in the console, or on the server with
`petstore users reset-password NAME --second-factor`) forgets them.

Why SHA-256 and not argon2id, as passwords are: a recovery code is 120 random bits from
the operating system's generator (secrets), not a word a person chose, so no list of likely
codes shortens a search, and 2^120 digests are out of reach of anyone holding a copy of the
database, however fast each is. A slow, salted hash earns its cost only where a secret is
guessable; NIST SP 800-63B section 5.1.2.2 asks it of look-up secrets under 112 bits and
lets those of 112 or more be kept with an approved one-way function, as API keys are (D12).
A plain digest is also looked up by an index, and spent by one conditional write (of two
sign-ins with one code, one passes), where ten argon2id checks a try (one for each unspent
code) would cost a second of the server's time for every guess.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets

from app.core.errors import WrongRecoveryCode
from app.core.orders import utc_now
from app.core.storage import Store
from app.core.storage.console_statements import ConsoleUser
from app.core.users import accounts

COUNT = 10  # codes in a set
CODE_BYTES = 15  # 120 bits: 24 characters of base32, written in six groups of four
GROUP = 4
CODE = re.compile(r"[a-z2-7]{24}\Z")  # a code as typed, once spaces and dashes are gone
TOTP_CODE = re.compile(r"[0-9]+\Z")  # an authenticator's code is digits: not a recovery code
APART = re.compile(r"[\s-]+")


def _plain(text: str) -> str:
    """A code as a person may type it (any case, with the dashes or without, spaced)
    reduced to its characters."""
    return APART.sub("", text).lower()


def _new_code() -> str:
    """A new code: 120 random bits in base32's lower-case letters and 2 to 7 (no 0, 1, 8 or
    9 to mistake for O, l, B or g), in groups of four."""
    text = base64.b32encode(secrets.token_bytes(CODE_BYTES)).decode().lower()
    return "-".join(text[start:start + GROUP] for start in range(0, len(text), GROUP))


def digest(code: str) -> str | None:
    """What the store keeps of a code (SHA-256 of its characters); None for text that is
    no code's shape."""
    plain = _plain(code)
    return hashlib.sha256(plain.encode()).hexdigest() if CODE.match(plain) else None


def is_recovery_code(text: str) -> bool:
    """Whether text offered for the second factor is meant as a recovery code: anything
    but digits (an authenticator's code)."""
    plain = _plain(text)
    return bool(plain) and not TOTP_CODE.match(plain)


def replace(store: Store, found: ConsoleUser, address: str | None, why: str) -> list[str]:
    """A new set of COUNT codes for the user, in place of any before (which no longer
    work): the codes, to be shown once and never again. In the audit log, with why."""
    codes = [_new_code() for _ in range(COUNT)]
    store.replace_recovery_codes(found.id, [digest(code) or "" for code in codes], utc_now())
    accounts.record(store, found.name, address, "recovery codes made", why)
    return codes


def left(store: Store, found: ConsoleUser) -> int:
    """How many of the user's recovery codes are not spent."""
    return store.recovery_codes_left(found.id)


def check(store: Store, found: ConsoleUser, text: str, address: str | None,
          purpose: str | None = None) -> int | None:
    """The second factor of a user who has one: text is the current code of the
    authenticator, or one of the recovery codes, which is spent. At the sign-in (purpose
    None) as accounts.check_code, else asked again before an action as
    accounts.confirm_code (purpose: what for). None for the authenticator's code; for a
    recovery code, how many are left. Else WrongCode (WrongRecoveryCode for a recovery
    code spent or wrong), which the caller counts as a failed check; each outcome is in
    the audit log."""
    if not is_recovery_code(text):
        if purpose is None:
            accounts.check_code(store, found, text, address)
        else:
            accounts.confirm_code(store, found, text, address, purpose)
        return None
    code = digest(text)
    used = (store.use_recovery_code(found.id, code, utc_now())
            if code is not None and found.totp_secret is not None else None)
    if used is None or not used.spent:
        why = ("spent recovery code" if used is not None and used.spent_before
               else "wrong recovery code")
        if purpose is None:
            accounts.record(store, found.name, address, "sign-in failed", why)
        else:
            accounts.record(store, found.name, address, "code confirmation failed",
                            f"{purpose}: {why}")
        raise WrongRecoveryCode()
    if purpose is None:
        accounts.record(store, found.name, address, "signed in (recovery code)",
                        f"{used.left} left")
    else:
        accounts.record(store, found.name, address, "recovery code used",
                        f"{purpose}: {used.left} left")
    return used.left
