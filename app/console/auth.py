"""Signing in and out of the console (D35): the password, then the authenticator's code
(for a user with a second factor), then a new password in place of a one-time one, then a
second factor where PETSTORE_CONSOLE_REQUIRE_TOTP asks for one. Each step gives the
session a new id; signing out ends it in the database, so its cookie opens nothing
afterwards, on any worker or host."""

from __future__ import annotations

import time

import flask
import segno

from app.console.blueprint import (
    PUBLIC,
    Page,
    address,
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
from app.core.users import accounts, sessions


def _throttled(name: str) -> Page | None:
    """The 429 page when this name or this address failed too often (D35)."""
    wait = state().throttle.wait(name, address())
    if not wait:
        return None
    accounts.record(store(), None, address(), "sign-in refused", f"throttled: {name[:64]}")
    return render("sign_in.html", 429, {"Retry-After": str(wait)}, name=name,
                  error=f"Too many failed sign-ins for this name or from this address; try "
                        f"again in {wait} seconds.")


def _step(user: ConsoleUser, stage: str,
          replacing: ConsoleSession | None) -> Page:
    """A new session at the stage (ending the one it replaces), and its page."""
    opened = sessions.open_session(store(), user, stage, time.time(), replacing)
    response = flask.redirect(flask.url_for(STAGE_PAGES[stage]), 303)
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
    refused = _throttled(name)
    if refused is not None:
        return refused
    try:
        user = accounts.sign_in(store(), name, password, address())
    except SignInFailed as exc:
        state().throttle.failed(name, address())
        return render("sign_in.html", name=name, error=exc.message)
    _forget_old()
    session, _ = visitor()
    stage = sessions.stage_for(user, state().services.settings.console_require_totp)
    return _step(user, stage, session)


@console.route("/sign-in/code", methods=["GET", "POST"])
@needs(sessions.CODE)
def code() -> Page:
    """The code of the user's authenticator (TOTP), the second step of signing in."""
    session, user = visitor()
    assert session is not None and user is not None
    if flask.request.method == "GET":
        return render("code.html")
    refused = _throttled(user.name)
    if refused is not None:
        return refused
    try:
        accounts.check_code(store(), user, flask.request.form.get("code", ""), address())
    except WrongCode as exc:
        state().throttle.failed(user.name, address())
        return render("code.html", error=exc.message)
    require = state().services.settings.console_require_totp
    return _step(user, sessions.stage_for(user, require, code_given=True), session)


@console.route("/account/password", methods=["GET", "POST"])
@needs(sessions.CHANGE, sessions.OPEN)
def password() -> Page:
    """Change the password: the one-time password at the first sign-in, or any time."""
    session, user = visitor()
    assert session is not None and user is not None
    if flask.request.method == "GET":
        return render("password.html", first=session.stage == sessions.CHANGE)
    form = flask.request.form
    new = form.get("new", "")
    error = None
    if new != form.get("repeat", ""):
        error = "The two new passwords differ; type the same one twice."
    else:
        try:
            changed = accounts.change_password(store(), user, form.get("current", ""), new,
                                               address())
        except (SignInFailed, PasswordRefused) as exc:
            error = ("The current password is not right." if isinstance(exc, SignInFailed)
                     else exc.message)
    if error is not None:
        return render("password.html", first=session.stage == sessions.CHANGE, error=error)
    # Every session of the user ended with the change (this one too): a new one.
    require = state().services.settings.console_require_totp
    return _step(changed, sessions.stage_for(changed, require, code_given=True), None)


@console.route("/account/second-factor", methods=["GET", "POST"])
@needs(sessions.ENROL, sessions.OPEN)
def second_factor() -> Page:
    """Enrol an authenticator (TOTP): its secret as a QR code and as text, then one of its
    codes to prove that it holds the secret."""
    session, user = visitor()
    assert session is not None and user is not None
    form = flask.request.form
    secret = form.get("secret", "") if flask.request.method == "POST" else ""
    if not (len(secret) == 32 and secret.isascii() and secret.isalnum()):
        secret = accounts.new_totp_secret()
    error = None
    if flask.request.method == "POST":
        try:
            enrolled = accounts.enrol_totp(store(), user, secret, form.get("code", ""),
                                           address())
        except WrongCode as exc:
            error = exc.message
        else:
            return _step(enrolled, sessions.OPEN, session)
    uri = accounts.totp_uri(secret, user.name)
    return render("second_factor.html", secret=secret, uri=uri, error=error,
                  qr=segno.make(uri, error="m").svg_inline(scale=4, dark="#111"),
                  required=session.stage == sessions.ENROL)


@console.route("/sign-out", methods=["POST"])
@needs(*sessions.STAGES)
def sign_out() -> Page:
    """End the session in the database, at once for every worker and host."""
    session, user = visitor()
    assert session is not None and user is not None
    store().end_console_sessions(digest=session.digest)
    accounts.record(store(), user.name, address(), "signed out", "")
    response = flask.redirect(flask.url_for("console.sign_in", out=1), 303)
    clear_cookie(response, SESSION_COOKIE)
    return response
