"""What every request of the console passes before its page (D35, D36), in this order:

1. the Host: only a name of PETSTORE_CONSOLE_HOSTS (loopback's by default, any port), else
   a plain 400 page and no cookie (D36): a page of another site whose name the attacker
   points at 127.0.0.1 (DNS rebinding) is of the same origin as the console to the
   browser, so that neither the origin check nor SameSite would stop it;
2. the address: only PETSTORE_CONSOLE_ALLOW (loopback by default), else 403;
3. the session: the cookie's id looked up in the database (sessions.find: timeouts, a
   disabled user, a sign-out seen by every worker and host at once);
4. every POST: it comes from the console's own origin (Sec-Fetch-Site, else Origin), and
   carries the session's synchronizer token (before a session, the sign-in form's token,
   which must equal its cookie's); else 403, and nothing changes;
5. the stage: a page opens only at the stages it names (blueprint.needs); a visitor
   without a session goes to the sign-in page (carrying the page asked for, which opens
   once the sign-in is done: blueprint.next_path), one who still owes a new password, a code
   or a second factor (required, or offered and not yet set up or skipped) goes to
   that page;
6. the role: a page declared for owners (blueprint.needs(OWNER), or declaring nothing)
   refuses staff with a 403 page that says why, in the audit log, and nothing changes
   (D38).

The token is the session's own, kept with it in the database, rather than Flask-WTF's
CSRFProtect: that keeps its token in Flask's signed-cookie session, which the console does
not use (a signed cookie outlives its sign-out), and is checked app-wide unless told not
to, beside Connexion's handlers; the check here is the blueprint's alone.

Cookies: HttpOnly and SameSite=Strict; over HTTPS (directly, or through a proxy the
settings trust, which is how the request's scheme is taken) Secure, with the __Host-
prefix, so that no other site or subdomain can set them.
"""

from __future__ import annotations

import hmac
import secrets
import time

import flask
from werkzeug.exceptions import BadRequest, Forbidden

from app.console.blueprint import (
    PUBLIC,
    UNDECLARED,
    Page,
    access_of,
    carrying,
    console,
    next_path,
    state,
)
from app.core import metrics
from app.core.setting_values import split_host
from app.core.users import accounts, sessions

SESSION_COOKIE = "petstore-console"
FORM_COOKIE = "petstore-console-form"  # the sign-in form's token, before any session


class CrossSite(Forbidden):
    """A POST from another site, or without the form's token: nothing changes."""

    description = ("This form did not come from this console's own pages, or it has "
                   "expired. Open the page again and send it from there.")


class AddressRefused(Forbidden):
    description = ("The console does not answer this address. Its operator lists the "
                   "addresses it answers in PETSTORE_CONSOLE_ALLOW.")


class RoleRefused(Forbidden):
    description = ("This page is for the shop's owners; your account is staff's, which "
                   "works the orders and the stock. Ask an owner if you need it.")


class HostRefused(BadRequest):
    description = ("The console does not answer at this name. Its operator lists the "
                   "names it answers at in PETSTORE_CONSOLE_HOSTS.")


def host_allowed(host: str, hosts: str) -> bool:
    """Whether a Host header names one of the hosts (any port), as split_host reads both
    (D36)."""
    found = split_host(host)
    return found is not None and found[0] in {
        named[0] for named in map(split_host, hosts.split(",")) if named is not None}


def _secure() -> bool:
    return flask.request.scheme == "https"


def cookie_name(base: str) -> str:
    """The cookie's name: with the __Host- prefix over HTTPS."""
    return f"__Host-{base}" if _secure() else base


def set_cookie(response: Page, base: str, value: str) -> None:
    """A cookie of the console (D35): HttpOnly, SameSite=Strict, for the whole host (the
    __Host- prefix requires Path=/ and no Domain), Secure over HTTPS; ending with the
    browser's session (the database ends it sooner: the timeouts)."""
    response.set_cookie(cookie_name(base), value, httponly=True, samesite="Strict",
                        secure=_secure(), path="/")


def clear_cookie(response: Page, base: str) -> None:
    response.delete_cookie(cookie_name(base), path="/", httponly=True, samesite="Strict",
                           secure=_secure())


def same_origin(request: flask.Request) -> bool:
    """Whether a request was sent by a page of the console's own origin: the browser's
    Sec-Fetch-Site says so (no page's script can set it), or, from a browser that sends
    none, its Origin is ours, as the request's Host and scheme name it. A POST with
    neither is refused."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None:
        return site == "same-origin"
    origin = request.headers.get("Origin")
    return origin is not None and origin == f"{request.scheme}://{request.host}"


def _form_token_matches(token: str | None) -> bool:
    cookie = flask.request.cookies.get(cookie_name(FORM_COOKIE))
    return (token is not None and cookie is not None
            and hmac.compare_digest(cookie.encode(), token.encode()))


def guard() -> Page | None:
    """The checks above, before every page of the console (registered below by a call,
    not a decorator: mutmut leaves decorated functions unmutated, and make mutation is to
    reach these checks; docs/house/checks.md)."""
    current = state()
    settings = current.services.settings
    if not host_allowed(flask.request.host, settings.console_hosts):
        raise HostRefused()
    if not metrics.allowed(flask.request.remote_addr, settings.console_allow):
        raise AddressRefused()
    if flask.request.endpoint == "console.static":
        return None
    found = None
    session_id = flask.request.cookies.get(cookie_name(SESSION_COOKIE))
    if session_id:
        found = sessions.find(current.services.store, session_id, time.time(),
                              settings.console_idle_timeout, settings.console_absolute_timeout)
    session, user = found if found is not None else (None, None)
    flask.g.console_session, flask.g.console_user = session, user
    # Before a session, the sign-in form carries a token of its own, kept in a cookie.
    flask.g.console_form_token = (flask.request.cookies.get(cookie_name(FORM_COOKIE))
                                  or secrets.token_urlsafe(32))
    if flask.request.method == "POST":
        token = flask.request.form.get("token")
        if not same_origin(flask.request) or not (
                sessions.token_matches(session, token) if session is not None
                else _form_token_matches(token)):
            raise CrossSite()
    view = flask.current_app.view_functions.get(flask.request.endpoint or "")
    access = access_of(view) or UNDECLARED
    if access.who == PUBLIC:
        return None
    if session is None:
        if flask.request.method == "POST":
            raise CrossSite()
        # The page asked for goes with the sign-in, to open once it is done
        # (docs/console.md, "The first sign-in").
        wanted = flask.request.full_path.rstrip("?")
        carried = next_path(wanted) if wanted != flask.url_for("console.home") else None
        return flask.redirect(carrying(flask.url_for("console.sign_in"), carried), 303)
    if session.stage not in access.stages:
        if flask.request.method == "POST":
            raise CrossSite()
        return flask.redirect(flask.url_for(STAGE_PAGES[session.stage]), 303)
    if not access.allows(user):
        assert user is not None
        accounts.record(current.services.store, user.name, flask.request.remote_addr,
                        "page refused", f"{flask.request.method} {flask.request.path[:200]}: "
                                        "owners only")
        raise RoleRefused()
    return None


console.before_request(guard)

# Where a session that still owes something goes.
STAGE_PAGES = {sessions.CODE: "console.code", sessions.CHANGE: "console.password",
               sessions.ENROL: "console.second_factor",
               sessions.OFFER: "console.second_factor", sessions.OPEN: "console.home"}


def keep_form_cookie(response: Page) -> Page:
    """The sign-in form's cookie, set where a page without a session carried its token
    (registered by a call, as guard is)."""
    if (flask.g.get("console_session") is None and flask.g.get("console_form_token")
            and flask.request.cookies.get(cookie_name(FORM_COOKIE)) is None
            and response.mimetype == "text/html"):
        set_cookie(response, FORM_COOKIE, flask.g.console_form_token)
    return response


console.after_request(keep_form_cookie)
