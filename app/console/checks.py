"""Every check of a password or a code in the console, throttled alike (D36): the sign-in's
password and code (or recovery code, D38), the password page's current password, and the
password (and current code, or a recovery code in its place) asked again before a key is
made or rotated or a second factor or its recovery codes change. Each asks the throttle
first, and a refusal there is a 429 with Retry-After, whatever the password; each failure
is counted against the name from this address, and the name alone
(app.core.users.throttle), under the user's throttle epoch, which `petstore users unlock`
renews."""

from __future__ import annotations

from dataclasses import dataclass, field

import flask

from app.console.blueprint import address, state, store
from app.core.errors import SignInFailed, WrongCode, WrongRecoveryCode
from app.core.storage.console_statements import ConsoleUser
from app.core.users import accounts, recovery


@dataclass(frozen=True)
class Refusal:
    """Why a check refused, as its page says it, with the page's status and headers."""

    status: int
    message: str
    headers: dict[str, str] = field(default_factory=dict)


def wait(name: str, epoch: str | None) -> int:
    """Seconds before this name's next check from this address: 0 when it may go."""
    return state().throttle.wait(name, address(), epoch)


def failed(name: str, epoch: str | None) -> None:
    """Count a failed check of this name from this address."""
    state().throttle.failed(name, address(), epoch)


def too_many(seconds: int, words: str) -> Refusal:
    """The throttle's 429 (words: what failed too often)."""
    return Refusal(429, f"Too many {words} for this name from this address; try again in "
                        f"{seconds} seconds.", {"Retry-After": str(seconds)})


def reauthenticate(user: ConsoleUser, purpose: str, with_code: bool = False) -> Refusal | None:
    """None when the form carries the user's password (field "password") and, with
    with_code and a second factor enrolled, its current code (field "current_code")
    (ASVS 3.7.1); else why not. Each failure is counted and in the audit log, with what
    it was for."""
    seconds = wait(user.name, user.throttle_epoch)
    if seconds:
        accounts.record(store(), user.name, address(), "password confirmation refused",
                        f"{purpose}: throttled")
        return too_many(seconds, "wrong passwords")
    form = flask.request.form
    try:
        accounts.confirm_password(store(), user, form.get("password", ""), address(),
                                  purpose)
        if with_code and user.totp_secret is not None:  # a recovery code stands in (D38)
            recovery.check(store(), user, form.get("current_code", ""), address(), purpose)
    except SignInFailed:
        failed(user.name, user.throttle_epoch)
        return Refusal(403, "That is not your password; nothing was done.")
    except WrongCode as exc:
        failed(user.name, user.throttle_epoch)
        return Refusal(403, "That is not one of your recovery codes, or it was used "
                            "already; nothing was done." if isinstance(exc, WrongRecoveryCode)
                       else "That is not the current code of your authenticator; nothing "
                            "was done.")
    return None
