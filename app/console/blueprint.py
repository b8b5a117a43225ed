"""The console's blueprint (D35), what the running console holds, and how its pages are
rendered."""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import quote

import flask
from werkzeug.exceptions import HTTPException
from werkzeug.wrappers import Response as Page  # a page or a redirect: what views answer

from app.core.orders import IDEMPOTENCY_KEY_MAX, INT64_MAX, INT64_MIN
from app.core.quotas.plans import Plan
from app.core.services import Services
from app.core.storage import Store
from app.core.storage.console_statements import ConsoleSession, ConsoleUser
from app.core.users import accounts, sessions
from app.core.users.throttle import SignInThrottle

console = flask.Blueprint("console", __name__, url_prefix="/console",
                          template_folder="templates", static_folder="static",
                          static_url_path="/static")

STATE = "petstore.console"  # the key of the running console's Console in Flask's extensions
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Console:
    """What the console's pages share: the service's services, the sign-in throttle and
    the plans of x-plans (D11), whose numbers the keys page shows."""

    services: Services
    throttle: SignInThrottle
    plans: dict[str, Plan]


def state() -> Console:
    """The running console."""
    found: Console = flask.current_app.extensions[STATE]
    return found


def store() -> Store:
    """The store of the running service."""
    return state().services.store


# Who may open a page, and at which stages of a session (D38): each route of the console
# declares it once, with needs(), and guard.py reads it before the page runs (a test walks
# the URL map: no route is left without one):
#   @needs(PUBLIC)   anyone from an allowed address, without a session (signing in);
#   @needs(STAFF)    every signed-in user: staff, and owners, who may do all staff do (the
#                    orders, the pets and their stock, one's own account);
#   @needs(OWNER)    owners only (the API keys, webhooks, users, the audit log): staff get
#                    a 403 page, and the menu does not offer it to them.
# Stages after the role say which stages of app.core.users.sessions the page opens at
# (@needs(STAFF, sessions.CHANGE, sessions.OPEN)); none: an open session only. A route
# that declares nothing opens to owners only, at an open session (the guard fails closed).
PUBLIC = "public"
OWNER, STAFF = accounts.OWNER, accounts.STAFF
WHO = (PUBLIC, STAFF, OWNER)


@dataclass(frozen=True)
class Access:
    """A route's declaration: who may open it (WHO), at which stages of a session."""

    who: str
    stages: tuple[str, ...]

    def allows(self, user: ConsoleUser | None) -> bool:
        """Whether the role of user (None: no session) may open the page."""
        return self.who in (PUBLIC, STAFF) or (user is not None and user.role == OWNER)


UNDECLARED = Access(OWNER, (sessions.OPEN,))


def needs(who: str, *stages: str) -> Callable[[F], F]:
    """Declare who may open a page (PUBLIC, STAFF or OWNER), and at which stages of a
    session (none: an open one), as the comment above says."""
    if who not in WHO or not set(stages) <= set(sessions.STAGES):
        raise ValueError(f"needs({who!r}, ...): who is one of {WHO}, stages of {sessions.STAGES}")

    def mark(view: F) -> F:
        view.console_access = Access(who, stages or (sessions.OPEN,))  # type: ignore[attr-defined]
        return view

    return mark


def access_of(view: Callable[..., Any] | None) -> Access | None:
    """A view's declaration, or None where it declares nothing."""
    found = getattr(view, "console_access", None)
    return found if isinstance(found, Access) else None


def stages_of(view: Callable[..., Any] | None) -> tuple[str, ...]:
    """The stages at which a view opens ((PUBLIC,): without a session)."""
    access = access_of(view) or UNDECLARED
    return (PUBLIC,) if access.who == PUBLIC else access.stages


def may(endpoint: str) -> bool:
    """Whether the visitor may open the page of this endpoint (by its declaration): what
    the menu and the pages' links offer."""
    view = flask.current_app.view_functions.get(endpoint)
    return (access_of(view) or UNDECLARED).allows(visitor()[1])


def visitor() -> tuple[ConsoleSession | None, ConsoleUser | None]:
    """The session of this request and its user (guard.py finds them), or None."""
    return flask.g.get("console_session"), flask.g.get("console_user")


def address() -> str | None:
    """The client's address as the service took it: from X-Forwarded-For only when a proxy
    that PETSTORE_FORWARDED_ALLOW_IPS trusts sent it."""
    return flask.request.remote_addr


# A page of the console, as the guard carries it to the sign-in page and back
# (docs/console.md, "The first sign-in"): /console/ and then names of letters, digits and
# -._~ joined by single slashes, no "." or ".." among them, and a query of printable ASCII.
# No scheme, no //, no backslash, no space or line break: a link to another site
# (//evil.example, /\evil, https://evil) or out of the console (/console/../x) is no such
# path, and the user goes Home instead.
NEXT = re.compile(r"/console/(?:[A-Za-z0-9._~-]+/?)*(?:\?[\x21-\x5b\x5d-\x7e]*)?\Z")
NEXT_MAX = 2000


def next_path(text: str) -> str | None:
    """text when it is a path of the console to go on to after signing in, else None."""
    if len(text) > NEXT_MAX or not NEXT.match(text) or "//" in text:
        return None
    if {".", ".."} & set(text.split("?", 1)[0].split("/")):
        return None
    return text


def asked() -> str | None:
    """The page the visitor asked for before signing in, as the sign-in's pages carry it
    (next in the URL, then in each step's form); None for none or for any other text."""
    found = flask.request.values.get("next", "")
    return next_path(found) if found else None


def carrying(url: str, wanted: str | None) -> str:
    """url, carrying the page asked for (if any) in its query."""
    return f"{url}?next={quote(wanted, safe='/')}" if wanted else url


def render(template: str, status: int = 200, headers: dict[str, str] | None = None,
           **context: Any) -> Page:
    """A page of the console: its template with the visitor, the form token, and form_key
    for the forms applied once (once)."""
    session, user = visitor()
    token = session.token if session is not None else flask.g.get("console_form_token")
    body = flask.render_template(f"console/{template}", user=user, session=session,
                                 token=token, form_key=form_key, next_page=asked(),
                                 may=may, **context)
    return flask.Response(body, status, headers=headers, mimetype="text/html")


# A whole number as a form or a URL of the console may write it: plain ASCII decimal digits
# (str.isdigit() takes "²", which int() refuses, and int() reads "١٢" as 12: neither is one).
DECIMAL = re.compile(r"-?[0-9]{1,19}\Z")
# An id as the console's own links and forms write it (an order's, a pet's, a key's, an
# endpoint's): anything else in a URL is no page of the console.
ID = re.compile(r"[1-9][0-9]{0,18}\Z")


def int64_of(text: str, least: int = INT64_MIN) -> int | None:
    """text as a whole number from least up to int64's largest, the range the store holds
    (D7, the API's own rule: 9223372036854775808 is past it, and SQLite's integers
    overflow), or None for anything else."""
    if not DECIMAL.match(text):
        return None
    number = int(text)
    return number if least <= number <= INT64_MAX else None


def id_of(text: str) -> int | None:
    """An id, written as the console writes one, within the store's range (D7); else
    None. Every id a page reads, in its path, its query or its form, is parsed here."""
    return int64_of(text, 1) if ID.match(text) else None


def path_id(text: str) -> int:
    """An id from a page's path; 404 for anything that is not one, an id past int64
    included (no page can have it)."""
    number = id_of(text)
    if number is None:
        flask.abort(404)
    return number


def query_id(name: str) -> int | None:
    """An id from the URL's query (the one a redirect after an action names), or None."""
    return id_of(flask.request.args.get(name, ""))


def version_of(form: Any, what: str) -> int:
    """The version of the order or pet (what) that the form's page showed (D25); 400 for
    a form without one, or with anything but a whole number within int64 (D7)."""
    version = int64_of(form.get("version", ""), 0)
    if version is None:
        flask.abort(400, description=f"The form lacks the version of the {what} it showed.")
    return version


def notice(done: dict[str, str],
           refused: dict[str, str] | None = None) -> tuple[str, str] | None:
    """What the last action did, or why it was refused, from the word its redirect put in
    the URL (`done=...` or `refused=...`): one of the sentences given, never the URL's own
    text."""
    args = flask.request.args
    if args.get("done") in done:
        return "done", done[args["done"]]
    if refused and args.get("refused") in refused:
        return "refused", refused[args["refused"]]
    return None


def see_other(endpoint: str, **values: Any) -> Page:
    """The answer to a POST that worked: 303 to the page to show (POST-redirect-GET)."""
    return flask.redirect(flask.url_for(endpoint, **values), 303)


# A form's key: made for the form when its page was shown, and carried by it, so that the
# form sent twice (a double click, a reload of its answer) is applied once.
FORM_KEY = re.compile(r"console-[A-Za-z0-9_-]{16,64}\Z")


def form_key() -> str:
    """A fresh key for a form that must be applied once."""
    return f"console-{secrets.token_urlsafe(24)}"


def form_key_of(form: Any) -> str:
    """The key a form carries; 400 when it carries none (a page from before, say)."""
    key = form.get("key", "")
    if not FORM_KEY.match(key) or len(key) > IDEMPOTENCY_KEY_MAX:
        flask.abort(400, description="The form lacks its key; open the page again.")
    return str(key)


FORM_WAIT_SECONDS = 3.0  # the longest a form's later sending waits for its first to end
FORM_WAIT_STEP = 0.1  # how often it looks


class FormInFlight(Exception):
    """A form sent again whose first sending has made nothing yet: it is being applied, or
    it stopped midway. back: the page that shows what it did."""

    def __init__(self, back: str) -> None:
        super().__init__(back)
        self.back = back


class Sending:
    """A sending of a form applied once (once): before, the id of what an earlier sending
    made (None for the first); made, the id of what this one made, once made."""

    def __init__(self, before: int | None) -> None:
        self.before = before
        self.made: int | None = None


def form_slot(path: str, form_key: str) -> str:
    """What the store takes for a form sent to path: a form's key sent to another path (a
    key's form posted to an endpoint's rotation, say) is another form's."""
    return f"{path} {form_key}"


@contextmanager
def once(form: Any, back: str) -> Iterator[Sending]:
    """Apply a form that shows a secret once, once for the key it carries. Its first
    sending takes the key, with the path it was sent to, in the store (console_forms: one
    sending wins on any worker or host) and notes the id of what it made. A later one (a
    reload of the answer, a double click where scripts are off: forms.js sends one) finds
    that id in Sending.before, and the view gives what it names a new secret in place of
    the one the earlier answer showed, and says so: a reload shows the last answer, so it
    is the one whose secret must work, and a rotation sent twice still keeps the clients'
    old secret. A later sending that finds the first still at work (the second click of a
    double click) waits for it, up to FORM_WAIT_SECONDS, then raises FormInFlight (409).
    A first sending that makes nothing (a refusal returned, or an abort inside the block)
    lets the form go, to be sent again corrected; a failure of any other kind leaves it
    taken, as it may have written."""
    key = form_slot(flask.request.path, form_key_of(form))
    taken, before = store().take_console_form(key, time.time())
    give_up = time.monotonic() + FORM_WAIT_SECONDS
    while not taken and before is None and time.monotonic() < give_up:
        time.sleep(FORM_WAIT_STEP)
        taken, before = store().take_console_form(key, time.time())
    if not taken and before is None:
        raise FormInFlight(back)
    sending = Sending(before)
    try:
        yield sending
    except HTTPException:
        _end(key, taken, sending)
        raise
    except BaseException:
        if taken and sending.made is not None:
            store().settle_console_form(key, sending.made)
        raise
    _end(key, taken, sending)


def _end(key: str, taken: bool, sending: Sending) -> None:
    """A first sending's end: what it made noted, or, making nothing, the form let go."""
    if not taken:
        return
    if sending.made is not None:
        store().settle_console_form(key, sending.made)
    else:
        store().release_console_form(key)
