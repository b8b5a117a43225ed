"""Console users and signing in (D35): the rules the CLI's `users` and the console's pages
share.

A user is made by `petstore users add NAME` (or by an owner in the console) with a random
one-time password, which must be changed at the first sign-in; there is no default account.
A user has a role (D38): an owner does everything; staff work the orders and the stock. The
first user is an owner unless told otherwise, the later ones staff; no rule here leaves the
shop without an enabled owner. A disabled user cannot sign in
and its sessions end. Signing in takes the name and the password, then, for a user with a
second factor, the current code of an authenticator (TOTP, RFC 6238, through pyotp). Every
sign-in, failed sign-in and action of the console goes to the audit log (record), kept for
PETSTORE_CONSOLE_AUDIT_DAYS days.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass

import pyotp

from app.core.errors import (
    InvalidRole,
    InvalidUserName,
    PasswordRefused,
    SignInFailed,
    UserNotFound,
    UserRefused,
    WrongCode,
)
from app.core.orders import format_unix_time, purge_periodically, utc_now
from app.core.storage import Store
from app.core.storage.console_statements import ConsoleUser
from app.core.users import passwords, throttle

NAME = re.compile(r"[A-Za-z0-9._@-]{1,64}\Z")
# The roles (D38): an owner does everything; staff work the orders and the stock (the board,
# an order's page, its actions, the pets and their stock), not the keys, webhooks, users or
# the audit log. Which pages each may open, the console's routes declare (app.console).
OWNER, STAFF = "owner", "staff"
ROLES = (OWNER, STAFF)
ISSUER = passwords.SHOP_NAME  # what an authenticator app shows beside the user's name
# The audit log's actions for a failed check that the throttle counts (D36): a wrong
# password or code at the sign-in, a wrong current password on the password page, a wrong
# password or current code asked again before a key or a second factor changes. Each is
# recorded under the user's name (a name that is no user's: under none), which is how
# `petstore users unlock` says what it lifted.
COUNTED_FAILURES = frozenset({"sign-in failed", "password change refused",
                              "password confirmation failed", "code confirmation failed"})


def check_name(name: str) -> str:
    """A user's name, if it is one: 1 to 64 letters, digits, dots, dashes, underscores or
    @ (it appears in the audit log and on pages, so plain)."""
    if not NAME.match(name):
        raise InvalidUserName()
    return name


def user(store: Store, name: str) -> ConsoleUser:
    """The user with this name; raises UserNotFound."""
    found = store.console_user(name)
    if found is None:
        raise UserNotFound(name)
    return found


def check_role(role: str) -> str:
    """A role, if it is one (ROLES); else InvalidRole."""
    if role not in ROLES:
        raise InvalidRole(role)
    return role


def add(store: Store, name: str, role: str | None = None, by: str | None = None,
        address: str | None = None) -> tuple[ConsoleUser, str]:
    """A new user of the role and its one-time password (to be changed at the first
    sign-in); without a role, an owner when the store holds no user yet (the shop's first,
    who must be able to manage the rest), else staff (D38). by: the owner who added it in
    the console (None: the CLI). Raises DuplicateUser, InvalidUserName, InvalidRole."""
    check_name(name)
    chosen = check_role(role) if role is not None else (
        STAFF if store.list_console_users() else OWNER)
    one_time = passwords.one_time_password()
    made = store.create_console_user(name, passwords.hash_password(one_time), utc_now(),
                                     chosen)
    record(store, by, address, "user added", f"{name} ({chosen})")
    return made, one_time


def reset_password(store: Store, name: str, second_factor: bool = False,
                   by: str | None = None, address: str | None = None) -> str:
    """Give the user a new one-time password (to be changed at the next sign-in) and end
    its sessions; with second_factor, also remove its TOTP secret (an authenticator lost)
    and its recovery codes, so that it signs in with the password alone until it sets one
    up again (the console offers it after the new password). by: the owner who does it in
    the console (None: the CLI). The password."""
    found = user(store, name)
    one_time = passwords.one_time_password()
    changes: dict[str, object] = {"password_hash": passwords.hash_password(one_time),
                                  "must_change_password": True}
    if second_factor:
        changes.update(totp_secret=None, totp_last_step=None)
    store.update_console_user(found.id, changes)
    if second_factor:  # its recovery codes go with it (D38)
        store.replace_recovery_codes(found.id, [], utc_now())
    store.end_console_sessions(user_id=found.id)
    record(store, by, address, "password reset" + (" and second factor removed"
                                                   if second_factor else ""), name)
    return one_time


def disable(store: Store, name: str, by: str | None = None,
            address: str | None = None) -> ConsoleUser:
    """Disable the user (once: the first time is kept) and end its sessions at once. by:
    the owner who does it in the console (None: the CLI). Refused (UserRefused, in the
    audit log) for the owner's own account, and for the last enabled owner, which would
    leave no one to manage the console (D38)."""
    found = user(store, name)
    if found.disabled_at is not None:
        return found
    if by is not None and by == found.name:
        record(store, by, address, "disable user refused", f"{name}: oneself")
        raise UserRefused("You cannot disable your own account: another owner can.")
    changed = store.disable_console_user(found.id, utc_now())
    if changed is None:
        record(store, by, address, "disable user refused", f"{name}: the last enabled owner")
        raise UserRefused(f"{name} is the last enabled owner: enable or add another owner "
                          "first, so that someone can still manage the console.")
    store.end_console_sessions(user_id=found.id)
    record(store, by, address, "user disabled", name)
    return changed


def enable(store: Store, name: str, by: str | None = None,
           address: str | None = None) -> ConsoleUser:
    """Let a disabled user sign in again (by: as for disable)."""
    found = user(store, name)
    changed = store.update_console_user(found.id, {"disabled_at": None})
    record(store, by, address, "user enabled", name)
    assert changed is not None
    return changed


def reset_second_factor(store: Store, name: str, by: str, address: str | None) -> ConsoleUser:
    """Remove another user's second factor (an authenticator lost) and its recovery codes
    (D38: else a code kept from before would work again once it enrols anew), as an owner
    does in the console after giving the password again (the caller asks for it); its
    sessions end, and it signs in with the password alone until it sets one up again (at
    once, where PETSTORE_CONSOLE_REQUIRE_TOTP asks). One's own is changed on one's second
    factor page, which asks for its current code too (D36): refused here (UserRefused)."""
    found = user(store, name)
    if found.name == by:
        record(store, by, address, "reset second factor refused", f"{name}: oneself")
        raise UserRefused("Your own second factor is changed on your Second factor page, "
                          "which asks for its current code too.")
    if found.totp_secret is None:
        record(store, by, address, "reset second factor refused", f"{name}: none set up")
        raise UserRefused(f"{name} has no second factor to reset.")
    changed = store.update_console_user(found.id, {"totp_secret": None,
                                                   "totp_last_step": None})
    store.replace_recovery_codes(found.id, [], utc_now())  # they go with it (D38)
    store.end_console_sessions(user_id=found.id)
    record(store, by, address, "second factor reset", name)
    assert changed is not None
    return changed


def sign_in(store: Store, name: str, password: str, address: str | None) -> ConsoleUser:
    """The user whose name and password these are, if it may sign in; else SignInFailed,
    the same for an unknown name, a disabled user and a wrong password, after the same
    time (a verification of a hash each), so that the answer tells nothing of who exists.
    Each outcome goes to the audit log."""
    found = store.console_user(name) if NAME.match(name) else None
    # A known name's failures go under that name (D36), so that the audit log filtered by
    # user shows the guesses at it; a name that is no user's goes under none, as detail.
    if found is None:
        passwords.verify_nobody(password)
        record(store, None, address, "sign-in failed", name[:64])
        raise SignInFailed()
    if not found.active:
        passwords.verify_nobody(password)
        record(store, found.name, address, "sign-in failed", "disabled user")
        raise SignInFailed()
    if not passwords.verify(found.password_hash, password):
        record(store, found.name, address, "sign-in failed", "wrong password")
        raise SignInFailed()
    changes: dict[str, object] = {"last_sign_in_at": utc_now()}
    if passwords.needs_rehash(found.password_hash):
        changes["password_hash"] = passwords.hash_password(password)
    signed = store.update_console_user(found.id, changes)
    record(store, found.name, address, "signed in (password)", "")
    return signed or found


def change_password(store: Store, found: ConsoleUser, current: str, new: str,
                    address: str | None) -> ConsoleUser:
    """Set a new password after checking the current one (SignInFailed) and the new one
    against D35's rules (PasswordRefused); ends every session of the user, this one
    included (the caller opens the next)."""
    if not passwords.verify(found.password_hash, current):
        record(store, found.name, address, "password change refused", "wrong current password")
        raise SignInFailed()
    try:
        checked = passwords.check_new(new, found.name)
        if passwords.verify(found.password_hash, checked):
            raise PasswordRefused("Choose a password other than the current one.")
    except PasswordRefused as exc:  # every refusal is in the audit log (D36)
        record(store, found.name, address, "new password refused", exc.message)
        raise
    changed = store.update_console_user(found.id, {
        "password_hash": passwords.hash_password(checked), "must_change_password": False})
    store.end_console_sessions(user_id=found.id)
    record(store, found.name, address, "password changed", "")
    assert changed is not None
    return changed


def confirm_password(store: Store, found: ConsoleUser, password: str, address: str | None,
                     purpose: str) -> None:
    """Ask a signed-in user for the password again before an action that gives a secret
    away or changes how the user signs in (ASVS 3.7.1: making or rotating an API key,
    changing a second factor); else SignInFailed, recorded with what it was for."""
    if not passwords.verify(found.password_hash, password):
        record(store, found.name, address, "password confirmation failed", purpose)
        raise SignInFailed()


def throttle_epoch(store: Store, name: str) -> str | None:
    """The throttle epoch of the user of this name (D36): None for a name that is no
    user's, and for a user never unlocked."""
    found = store.console_user(name) if NAME.match(name) else None
    return found.throttle_epoch if found is not None else None


@dataclass(frozen=True)
class Unlocked:
    """What `petstore users unlock` lifted: the user's failed checks since `since` (the
    throttle's window; since the last unlock, if later), by the address as counted."""

    user: ConsoleUser
    since: str
    failures: dict[str, int]


def unlock(store: Store, name: str, now: dt.datetime | None = None) -> Unlocked:
    """Lift the throttle's locks of a user (D36): a new throttle epoch, so that the
    counters of its name, from every address and alone, count no longer, on every worker
    and host. What it lifted is read from the audit log, which holds every counted
    failure under the user's name."""
    found = user(store, name)
    # The window counted back in seconds, not on the local clock, which a change to summer
    # time would stretch or shrink by an hour.
    moment = time.time() if now is None else now.timestamp()
    since = format_unix_time(moment - throttle.WINDOW_MINUTES * 60)
    # An epoch begins with the id of the user's last audit line when it was made: what an
    # earlier unlock lifted is not counted again.
    after = int(found.throttle_epoch.split(" ")[0]) if found.throttle_epoch else 0
    failures: Counter[str] = Counter()
    newest, before = after, None
    while True:
        page = store.audit_entries(100, before, user_name=found.name)
        newest = max([newest, *(entry.id for entry in page)])
        for entry in page:
            if entry.at >= since and entry.id > after and entry.action in COUNTED_FAILURES:
                failures[throttle.counted_address(entry.address)] += 1
        if len(page) < 100 or page[-1].at < since or page[-1].id <= after:
            break
        before = page[-1].id
    epoch = f"{newest} {secrets.token_hex(8)}"
    changed = store.update_console_user(found.id, {"throttle_epoch": epoch})
    record(store, None, None, "user unlocked", f"{name}: {sum(failures.values())} failed "
                                               "checks no longer counted")
    assert changed is not None
    return Unlocked(changed, since, dict(failures.most_common()))


# TOTP (RFC 6238): 30-second steps, 6 digits, SHA-1, as every authenticator app reads an
# otpauth URI; the step before and after the current one are accepted for clocks that
# drift, and each step at most once (use_totp_step).
TOTP_WINDOW = 1


def new_totp_secret() -> str:
    """A new TOTP secret (160 bits, base32, as RFC 4226 recommends)."""
    return pyotp.random_base32(32)


def totp_uri(secret: str, name: str) -> str:
    """The otpauth URI an authenticator app reads (from its QR code, or typed)."""
    return pyotp.TOTP(secret).provisioning_uri(name=name, issuer_name=ISSUER)


def _accepted_step(secret: str, code: str, now: float) -> int | None:
    """The time step whose code this is, within TOTP_WINDOW steps of now, or None."""
    totp = pyotp.TOTP(secret)
    code = code.strip().replace(" ", "")
    if not (code.isascii() and code.isdigit() and len(code) == totp.digits):
        return None
    step = int(now // totp.interval)
    for candidate in range(step - TOTP_WINDOW, step + TOTP_WINDOW + 1):
        if totp.verify(code, for_time=candidate * totp.interval):
            return candidate
    return None


def check_code(store: Store, found: ConsoleUser, code: str, address: str | None,
               now: float | None = None) -> None:
    """Accept the current code of the user's authenticator, once; else WrongCode."""
    step = (_accepted_step(found.totp_secret, code, time.time() if now is None else now)
            if found.totp_secret else None)
    if step is None or not store.use_totp_step(found.id, step):
        record(store, found.name, address, "sign-in failed", "wrong code")
        raise WrongCode()
    record(store, found.name, address, "signed in (code)", "")


def confirm_code(store: Store, found: ConsoleUser, code: str, address: str | None,
                 purpose: str, now: float | None = None) -> None:
    """Ask a signed-in user with a second factor for its current code again, before the
    second factor changes (D36); else WrongCode, recorded with what it was for. A code is
    good once, here as at the sign-in."""
    step = (_accepted_step(found.totp_secret, code, time.time() if now is None else now)
            if found.totp_secret else None)
    if step is None or not store.use_totp_step(found.id, step):
        record(store, found.name, address, "code confirmation failed", purpose)
        raise WrongCode()


def enrol_totp(store: Store, found: ConsoleUser, secret: str, code: str,
               address: str | None, now: float | None = None) -> ConsoleUser:
    """Make the secret the user's second factor (in place of any before), once a code of
    it proves that the user's authenticator holds it; else WrongCode. The secret is the
    one the server offered (D36), and the caller has asked for the password and the
    current code first. Either outcome is in the audit log."""
    step = _accepted_step(secret, code, time.time() if now is None else now)
    if step is None:
        record(store, found.name, address, "second factor refused",
               "wrong code of the new authenticator")
        raise WrongCode()
    changed = store.update_console_user(found.id, {"totp_secret": secret,
                                                   "totp_last_step": step})
    record(store, found.name, address, "second factor replaced" if found.totp_secret
           else "second factor enrolled", "")
    assert changed is not None
    return changed


def remove_totp(store: Store, found: ConsoleUser, address: str | None) -> ConsoleUser:
    """Remove the user's second factor and its recovery codes (the caller has asked for the
    password and the current code, and PETSTORE_CONSOLE_REQUIRE_TOTP is off); in the
    audit log."""
    changed = store.update_console_user(found.id, {"totp_secret": None,
                                                   "totp_last_step": None})
    store.replace_recovery_codes(found.id, [], utc_now())
    record(store, found.name, address, "second factor removed", "")
    assert changed is not None
    return changed


def record(store: Store, user_name: str | None, address: str | None, action: str,
           detail: str) -> None:
    """A line of the audit log: who (None before a sign-in names anyone), from where,
    what, about what."""
    store.add_audit_entry(utc_now(), user_name, address, action, detail)


def forget_old_audit(store: Store, days: int) -> int:
    """Forget the audit lines older than so many days (of 86,400 seconds, whatever the
    machine's clock does in summer time); how many went."""
    return store.purge_audit_entries(
        format_unix_time(time.time() - days * 86_400))


AUDIT_PURGE_EVERY = 3600.0  # seconds between two purges of the audit log by a worker


def keep_audit_days(store: Store, days: int, stop: threading.Event,
                    every: float = AUDIT_PURGE_EVERY) -> None:
    """Forget the audit lines older than days, now and every `every` seconds until stop is
    set: the body of a thread each worker runs from its start (app.web), off every
    request's path, so that the log keeps its days whether anyone signs in or not. Every
    worker of every host deleting the same old lines is safe: a line already gone is
    deleted by nobody."""
    purge_periodically(store, lambda: forget_old_audit(store, days), "audit lines", every,
                       stop)
