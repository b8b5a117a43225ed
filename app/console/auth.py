"""Signing in and out of the console (D35): the password, then the authenticator's code
(for a user with a second factor; one of its recovery codes stands in for it, D38), then a
new password in place of a one-time one, then a second factor where
PETSTORE_CONSOLE_REQUIRE_TOTP asks for one, or, where it does not, the offer of one, which
the user may skip. Each step gives the session a new id; signing out ends it in the
database, so its cookie opens nothing afterwards, on any worker or host.

Setting up a first second factor shows its ten recovery codes, once; a new set, replacing
the old, is made on demand after the password (docs/console.md, "A second factor").

Every password and code checked here is throttled alike (app.console.checks, D36). A second
factor is enrolled, replaced or removed only with the password, and the current code where
one is enrolled; its secret is the one the server offered, kept with the session (D36)."""

from __future__ import annotations

import time
from typing import Any

import flask
import segno

from app.console import checks
from app.console.blueprint import (
    PUBLIC,
    STAFF,
    Page,
    address,
    asked,
    carrying,
    console,
    needs,
    render,
    state,
    store,
    visitor,
)
from app.console.guard import SESSION_COOKIE, STAGE_PAGES, clear_cookie, set_cookie
from app.core.errors import PasswordRefused, SignInFailed, WrongCode
from app.core.storage.console_statements import ConsoleSession, ConsoleUser
from app.core.users import accounts, recovery, sessions


def _throttled(template: str, who: str, epoch: str | None, known: bool,
               action: str = "sign-in refused", words: str = "failed sign-ins",
               **context: object) -> Page | None:
    """The 429 page when the name `who` failed too often from this address, or anywhere
    (D36), saying what failed (words); in the audit log as action, under the name when it
    is a user's."""
    wait = checks.wait(who, epoch)
    if not wait:
        return None
    accounts.record(store(), who if known else None, address(), action,
                    "throttled" if known else f"throttled: {who[:64]}")
    refused = checks.too_many(wait, words)
    return render(template, refused.status, refused.headers, error=refused.message,
                  **context)


def _opened(user: ConsoleUser, stage: str,
            replacing: ConsoleSession | None) -> tuple[sessions.Opened, str]:
    """A new session at the stage (ending the one it replaces), and where it goes on to:
    the next step's page, carrying the page asked for before the sign-in, or, the session
    open, that page (only a path of the console: blueprint.next_path) or Home."""
    opened = sessions.open_session(store(), user, stage, time.time(), replacing)
    wanted = asked()
    if stage == sessions.OPEN and wanted is not None:
        return opened, wanted
    return opened, carrying(flask.url_for(STAGE_PAGES[stage]), wanted)


def _step(user: ConsoleUser, stage: str,
          replacing: ConsoleSession | None) -> Page:
    """A new session at the stage (ending the one it replaces), and a redirect to where it
    goes on to (_opened)."""
    opened, onward = _opened(user, stage, replacing)
    response = flask.redirect(onward, 303)
    set_cookie(response, SESSION_COOKIE, opened.session_id)
    return response


def _step_showing(user: ConsoleUser, stage: str, replacing: ConsoleSession | None,
                  template: str, **context: Any) -> Page:
    """A new session at the stage, as _step, answered with a page to read first (recovery
    codes shown once, how many are left), whose link goes on where _step would have gone.
    The page is the new session's: its forms carry the new session's token."""
    opened, onward = _opened(user, stage, replacing)
    flask.g.console_session, flask.g.console_user = opened.session, user
    response = render(template, onward=onward, **context)
    set_cookie(response, SESSION_COOKIE, opened.session_id)
    return response


def _forget_old() -> None:
    """At each sign-in, the sessions that timed out and the audit lines past their days go
    (two deletes by index: a shop's console signs in a few times a day)."""
    settings = state().services.settings
    now = time.time()
    store().purge_console_sessions(now - settings.console_idle_timeout,
                                   now - settings.console_absolute_timeout)
    accounts.forget_old_audit(store(), settings.console_audit_days)


@console.route("/sign-in", methods=["GET"])
@needs(PUBLIC)
def sign_in() -> Page:
    """The sign-in form."""
    session, _ = visitor()
    if session is not None:
        return flask.redirect(flask.url_for(STAGE_PAGES[session.stage]), 303)
    return render("sign_in.html", signed_out="out" in flask.request.args)


@console.route("/sign-in", methods=["POST"])
@needs(PUBLIC)
def sign_in_post() -> Page:
    """Check the name and password; go on to what the user still owes."""
    name = flask.request.form.get("name", "")
    password = flask.request.form.get("password", "")
    known = store().console_user(name) if accounts.NAME.match(name) else None
    epoch = known.throttle_epoch if known is not None else None
    refused = _throttled("sign_in.html", name, epoch, known is not None, name=name)
    if refused is not None:
        return refused
    try:
        user = accounts.sign_in(store(), name, password, address())
    except SignInFailed as exc:
        checks.failed(name, epoch)
        return render("sign_in.html", name=name, error=exc.message)
    _forget_old()
    session, _ = visitor()
    stage = sessions.stage_for(user, state().services.settings.console_require_totp)
    return _step(user, stage, session)


@console.route("/sign-in/code", methods=["GET", "POST"])
@needs(STAFF, sessions.CODE)
def code() -> Page:
    """The code of the user's authenticator (TOTP), the second step of signing in; or one
    of the user's recovery codes in its place (D38), spent, after which a page says how
    many are left."""
    session, user = visitor()
    assert session is not None and user is not None
    if flask.request.method == "GET":
        return render("code.html")
    refused = _throttled("code.html", user.name, user.throttle_epoch, True)
    if refused is not None:
        return refused
    try:
        left = recovery.check(store(), user, flask.request.form.get("code", ""), address())
    except WrongCode as exc:
        checks.failed(user.name, user.throttle_epoch)
        return render("code.html", error=exc.message)
    require = state().services.settings.console_require_totp
    stage = sessions.stage_for(user, require, code_given=True)
    if left is None:
        return _step(user, stage, session)
    return _step_showing(user, stage, session, "recovery_used.html", left=left)


@console.route("/account/password", methods=["GET", "POST"])
@needs(STAFF, sessions.CHANGE, sessions.OPEN)
def password() -> Page:
    """Change the password: the one-time password at the first sign-in, or any time."""
    session, user = visitor()
    assert session is not None and user is not None
    if flask.request.method == "GET":
        return render("password.html", first=session.stage == sessions.CHANGE)
    first = session.stage == sessions.CHANGE
    refused = _throttled("password.html", user.name, user.throttle_epoch, True,
                         "password change refused", "wrong passwords", first=first)
    if refused is not None:
        return refused
    form = flask.request.form
    new = form.get("new", "")
    error = None
    if new != form.get("repeat", ""):
        error = "The two new passwords differ; type the same one twice."
        accounts.record(store(), user.name, address(), "new password refused",
                        "the two new passwords differ")
    else:
        try:
            changed = accounts.change_password(store(), user, form.get("current", ""), new,
                                               address())
        except SignInFailed:
            checks.failed(user.name, user.throttle_epoch)
            error = "The current password is not right."
        except PasswordRefused as exc:
            error = exc.message
    if error is not None:
        return render("password.html", first=first, error=error)
    # Every session of the user ended with the change (this one too): a new one. A
    # one-time password just changed is a new user's first sign-in (or one whose password
    # the server reset): the console offers a second factor, unless it requires one.
    require = state().services.settings.console_require_totp
    return _step(changed, sessions.stage_for(changed, require, code_given=True,
                                             offer_totp=first), None)


def _offered(session: ConsoleSession) -> str:
    """The TOTP secret the second factor page offers this session: made by the server the
    first time the page is shown, and kept with the session (D36), so that the code typed
    proves the user's authenticator holds that one, whatever a form says."""
    if session.pending_totp_secret is not None:
        return session.pending_totp_secret
    made = accounts.new_totp_secret()
    # A session ended since the guard found it keeps none; its next form opens nothing.
    return store().offer_totp_secret(session.digest, made) or made


def _second_factor_page(session: ConsoleSession, user: ConsoleUser, status: int = 200,
                        error: str | None = None,
                        headers: dict[str, str] | None = None) -> Page:
    secret = _offered(session)
    uri = accounts.totp_uri(secret, user.name)
    return render("second_factor.html", status, headers, secret=secret, uri=uri, error=error,
                  qr=segno.make(uri, error="m").svg_inline(scale=4, dark="#111"),
                  required=session.stage == sessions.ENROL,
                  offered=session.stage == sessions.OFFER,
                  codes_left=recovery.left(store(), user) if user.totp_secret else None,
                  removable=not state().services.settings.console_require_totp)


@console.route("/account/second-factor", methods=["GET", "POST"])
@needs(STAFF, sessions.ENROL, sessions.OFFER, sessions.OPEN)
def second_factor() -> Page:
    """Enrol an authenticator (TOTP), or replace the one enrolled: the server's secret as
    a QR code and as text, then the password (and the current code, where one is
    enrolled) and one of the new authenticator's codes, to prove that it holds the
    secret. A first one is answered with its ten recovery codes, shown this once (D38); a
    replacement keeps the codes there are."""
    session, user = visitor()
    assert session is not None and user is not None
    if flask.request.method == "GET":
        return _second_factor_page(session, user)
    refused = checks.reauthenticate(user, "second factor", with_code=True)
    if refused is not None:
        return _second_factor_page(session, user, refused.status, refused.message,
                                   refused.headers)
    try:
        enrolled = accounts.enrol_totp(store(), user, _offered(session),
                                       flask.request.form.get("code", ""), address())
    except WrongCode as exc:
        return _second_factor_page(session, user, error=exc.message)
    if user.totp_secret is not None:
        return _step(enrolled, sessions.OPEN, session)
    codes = recovery.replace(store(), enrolled, address(), "second factor enrolled")
    return _step_showing(enrolled, sessions.OPEN, session, "recovery_codes.html",
                         codes=codes, replaced=False)


@console.route("/account/second-factor/skip", methods=["POST"])
@needs(STAFF, sessions.OFFER)
def skip_second_factor() -> Page:
    """Decline the second factor offered after the first password change: the console
    opens with the password alone (Second factor in the menu sets one up later)."""
    session, user = visitor()
    assert session is not None and user is not None
    accounts.record(store(), user.name, address(), "second factor skipped", "")
    return _step(user, sessions.OPEN, session)


@console.route("/account/recovery-codes", methods=["POST"])
@needs(STAFF)
def new_recovery_codes() -> Page:
    """Ten new recovery codes in place of the user's old ones (D38), after the password,
    shown this once; only for a user with a second factor, whose codes they are."""
    session, user = visitor()
    assert session is not None and user is not None
    if user.totp_secret is None:
        accounts.record(store(), user.name, address(), "recovery codes refused",
                        "no second factor")
        return _second_factor_page(session, user, 409, "Recovery codes stand in for an "
                                   "authenticator's code: set up a second factor first, and "
                                   "its codes are shown then.")
    refused = checks.reauthenticate(user, "new recovery codes")
    if refused is not None:
        return _second_factor_page(session, user, refused.status, refused.message,
                                   refused.headers)
    codes = recovery.replace(store(), user, address(), "asked for")
    return render("recovery_codes.html", codes=codes, replaced=True,
                  onward=flask.url_for("console.second_factor"))


@console.route("/account/second-factor/remove", methods=["POST"])
@needs(STAFF)
def remove_second_factor() -> Page:
    """Remove the user's second factor, with the password and its current code (D36);
    not where PETSTORE_CONSOLE_REQUIRE_TOTP asks every user for one."""
    session, user = visitor()
    assert session is not None and user is not None
    if state().services.settings.console_require_totp or user.totp_secret is None:
        accounts.record(store(), user.name, address(), "second factor refused",
                        "remove: required" if user.totp_secret else "remove: none enrolled")
        return _second_factor_page(session, user, 403, "This console asks every user for a "
                                   "second factor: replace it rather than remove it."
                                   if user.totp_secret else "No second factor is set up.")
    refused = checks.reauthenticate(user, "remove second factor", with_code=True)
    if refused is not None:
        return _second_factor_page(session, user, refused.status, refused.message,
                                   refused.headers)
    return _step(accounts.remove_totp(store(), user, address()), sessions.OPEN, session)


@console.route("/sign-out", methods=["POST"])
@needs(STAFF, *sessions.STAGES)
def sign_out() -> Page:
    """End the session in the database, at once for every worker and host."""
    session, user = visitor()
    assert session is not None and user is not None
    store().end_console_sessions(digest=session.digest)
    accounts.record(store(), user.name, address(), "signed out", "")
    response = flask.redirect(flask.url_for("console.sign_in", out=1), 303)
    clear_cookie(response, SESSION_COOKIE)
    return response
