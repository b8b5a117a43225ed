"""Console sessions (D35), kept in the database so that every worker and host sees a
sign-out at once (a signed cookie would outlive it: maxcountryman/flask-login#480).

A session's id is 256 random bits, given to the browser once, in its cookie; the store
keeps only its SHA-256 digest, so a copy of the database opens no session. Each session
has a synchronizer token that every form of the console carries back, and a stage: what is
still owed before the console opens (STAGES). Each step of signing in gives a new id and
ends the one before (session fixation), and a session ends when it has been idle
for the idle timeout, when it is older than the absolute one, when its user signs out, is
disabled or changes the password.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

from app.core.storage import Store
from app.core.storage.console_statements import ConsoleSession, ConsoleUser

# What a session still owes before the console opens: the code of the user's
# authenticator (CODE), a new password in place of a one-time one (CHANGE), enrolling a
# second factor where PETSTORE_CONSOLE_REQUIRE_TOTP asks for one (ENROL), or, where it
# does not, an answer to the offer of one made once the one-time password is changed
# (OFFER: set it up, or skip it); OPEN owes nothing.
CODE, CHANGE, ENROL, OFFER, OPEN = "code", "change", "enrol", "offer", "open"
STAGES = (CODE, CHANGE, ENROL, OFFER, OPEN)
# A session's last sight is written at most once a minute, not on every page: the idle
# timeout is then exact to the minute.
TOUCH_EVERY = 60.0


def digest(session_id: str) -> str:
    """What the store keeps of a session id."""
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass(frozen=True)
class Opened:
    """A new session: the id for the cookie (never stored), and the session as stored."""

    session_id: str
    session: ConsoleSession


def stage_for(user: ConsoleUser, require_totp: bool, code_given: bool = False,
              offer_totp: bool = False) -> str:
    """What a user who has just given the password (and the code, when code_given) still
    owes; with offer_totp (the one-time password has just been changed), a user without a
    second factor is offered one, where it is not required."""
    if user.totp_secret is not None and not code_given:
        return CODE
    if user.must_change_password:
        return CHANGE
    if user.totp_secret is None and require_totp:
        return ENROL
    if user.totp_secret is None and offer_totp:
        return OFFER
    return OPEN


def open_session(store: Store, user: ConsoleUser, stage: str, now: float,
                 replacing: ConsoleSession | None = None) -> Opened:
    """A new session of the user at that stage, ending the one it replaces."""
    session_id = secrets.token_urlsafe(32)
    session = ConsoleSession(digest(session_id), user.id, secrets.token_urlsafe(32), stage,
                             replacing.created_at if replacing is not None else now, now)
    store.create_console_session(session, replacing.digest if replacing else None)
    return Opened(session_id, session)


def find(store: Store, session_id: str, now: float, idle: float,
         absolute: float) -> tuple[ConsoleSession, ConsoleUser] | None:
    """The live session of this id and its user: None for an unknown id, and for one
    idle too long, too old or of a disabled user, which ends then."""
    found = store.console_session(digest(session_id))
    if found is None:
        return None
    session, user = found
    if (now - session.seen_at > idle or now - session.created_at > absolute
            or not user.active):
        store.end_console_sessions(digest=session.digest)
        return None
    if now - session.seen_at >= TOUCH_EVERY:
        store.touch_console_session(session.digest, now)
    return session, user


def token_matches(session: ConsoleSession, token: str | None) -> bool:
    """Whether a form's token is the session's synchronizer token (compared in constant
    time)."""
    return token is not None and hmac.compare_digest(session.token.encode(), token.encode())
