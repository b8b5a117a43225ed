"""No input to any console route is a 500, signed in or not (issue 55; D7's rule for ids, the
API's own). Generated, not listed: every rule of the console blueprint in the app's URL map
(a new page joins by itself), each of its methods, sent hostile values in every path part,
in every query parameter and form field that the console's own pages send it (found by
reading them as a browser does: their links, their forms and the URLs their scripts
follow), and in every other such name the console uses anywhere, with doubled slashes in
its path; signed in (a session at the open stage, kept open through the run) and signed
out; every POST with the session's token (signed out, the sign-in form's) and from the
console's origin, so that it reaches its view. None answers 5xx, and the run logs no
error, so no traceback: over each store, SQLite and PostgreSQL."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest
from werkzeug.exceptions import HTTPException
from werkzeug.routing import Rule

from app.console.blueprint import PUBLIC, stages_of
from app.console.guard import FORM_COOKIE, SESSION_COOKIE
from app.core import keys, webhook_urls, webhooks
from app.core.config import Settings
from app.core.storage import Store
from app.core.users import sessions
from app.web import PetstoreApp
from tests.console.conftest import HOST, ORIGIN, Visitor

PREFIX = "/console"
INT64_PAST = "9223372036854775808"  # int64's largest, 9223372036854775807, and one
HOSTILE = {
    "int64's largest + 1": INT64_PAST,
    "thirty nines": "9" * 30,
    "10,000 digits": "9" * 10_000,  # very long, and past the 4,300 digits int() reads
    "a superscript two": "²",  # str.isdigit() takes it, int() does not
    "Arabic-Indic digits": "١٢",  # int() takes them, as 12
    "empty": "",
    "the calendar's last day": "9999-12-31",  # it has no next day
    "the year 10000": "10000-01-01",
    "NUL": "\x00",
    "a newline": "\n",
    "a negative": "-1",
}
# The methods Flask adds to a rule itself: OPTIONS is its own answer, and HEAD runs the
# view of the GET, which is sent.
FLASKS_OWN = {"HEAD", "OPTIONS"}
# The names of the links to a next page, which a page shows only past its hundred rows (an
# endpoint's fifty deliveries), more than this test's store holds: sent alone, each value,
# to every GET rule.
PAGING = {"cursor", "before"}
CATALOGUE = [{"id": 10, "name": "Rex", "category": "dog", "tags": ["good"], "stock": 5},
             {"id": 20, "name": "Tom", "category": "cat"}]


@pytest.fixture(params=["sqlite", "postgresql"])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """Over each store: PostgreSQL's text refuses a NUL that SQLite's keeps (a database of
    the test's own on PETSTORE_TEST_POSTGRES_URL's server; skipped where it is not set)."""
    database = (str(tmp_path / "petstore.db") if request.param == "sqlite"
                else request.getfixturevalue("postgres_database"))
    return Settings(database=database, validate_responses=True)


@pytest.fixture
def console_settings(settings: Settings) -> Settings:
    """A webhook's test message goes to loopback (nothing listens on port 9); no deliverer
    runs."""
    return settings.replace(console_allow="*", console_hosts=HOST,
                            webhook_allowed_networks="127.0.0.0/8",
                            webhook_timeout=2.0, webhooks_enabled=False)


@dataclass
class Form:
    """A form as a page holds it: where it goes, how, and its fields as the page fills them
    (a radio's first choice, a select's first option)."""

    action: str
    method: str
    fields: dict[str, str] = field(default_factory=dict)


class Reading(HTMLParser):
    """What a browser could send from a page: its links' URLs (href, and any attribute that
    holds a URL of the console, such as the board's data-changes for its script) and its
    forms."""

    def __init__(self, here: str) -> None:
        super().__init__()
        self.here = here
        self.links: list[str] = []
        self.forms: list[Form] = []
        self.form: Form | None = None
        self.select: str | None = None
        self.textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        self.links += [value for value in found.values() if value.startswith(PREFIX)]
        if tag == "form":
            self.form = Form(found.get("action") or self.here,
                             found.get("method", "get").upper())
            self.forms.append(self.form)
        elif self.form is not None and found.get("name"):
            name = found["name"]
            if tag == "input":
                self.form.fields.setdefault(name, found.get("value", ""))
            elif tag == "select":
                self.select = name
            elif tag == "textarea":
                self.textarea = name
                self.form.fields.setdefault(name, "")
        if tag == "option" and self.form is not None and self.select is not None:
            self.form.fields.setdefault(self.select, found.get("value", ""))

    def handle_data(self, data: str) -> None:
        if self.form is not None and self.textarea is not None:
            self.form.fields[self.textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.form = None
        elif tag == "select":
            self.select = None
        elif tag == "textarea":
            self.textarea = None


@dataclass
class Known:
    """What the console's pages send a rule: its path's values (the first link or form to
    it), the names of its query parameters and form fields, and a form's fields as its page
    fills them."""

    values: dict[str, str] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    form: dict[str, str] = field(default_factory=dict)


def _key(rule: Rule) -> tuple[str, str]:
    """A rule of the map (one path may have a rule for each method, each its endpoint)."""
    return rule.rule, rule.endpoint


class Console:
    """The test client as a browser that holds a session, or none: a session of the owner,
    opened in the store as signing in opens one, and opened again when a request ended it
    (signing out)."""

    def __init__(self, app: PetstoreApp, client: Any, store: Store, owner: str) -> None:
        self.client, self.store = client, store
        self.user = store.console_user(owner)
        self.form_token = "hostile-inputs-form-token"
        self.rules = [rule for rule in app.console.url_map.iter_rules()
                      if rule.endpoint.startswith("console.")]
        self.routing = app.console.url_map.bind("testserver")
        self.session_id, self.token = "", ""
        self.sign_in()

    def sign_in(self) -> None:
        assert self.user is not None
        opened = sessions.open_session(self.store, self.user, sessions.OPEN, time.time())
        self.session_id, self.token = opened.session_id, opened.session.token

    def send(self, method: str, url: str, form: dict[str, str] | None,
             signed_in: bool) -> Any:
        """One request, with the session's cookie (signed in) or none, a POST from the
        console's origin with the token that opens it."""
        cookies = [f"{FORM_COOKIE}={self.form_token}"]
        headers = {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin"}
        if signed_in:
            if self.store.console_session(sessions.digest(self.session_id)) is None:
                self.sign_in()
            cookies.append(f"{SESSION_COOKIE}={self.session_id}")
        if method == "POST":
            form = {"token": self.token if signed_in else self.form_token, **(form or {})}
        headers["Cookie"] = "; ".join(cookies)
        self.client.cookies.clear()
        return self.client.request(method, url, data=form if method == "POST" else None,
                                   headers=headers, follow_redirects=False)

    def matched(self, url: str, method: str) -> tuple[Rule, dict[str, Any]] | None:
        try:
            rule, values = self.routing.match(urlsplit(url).path, method, return_rule=True)
        except HTTPException:  # a URL of no rule for this method (404, 405, a redirect)
            return None
        return rule, values

    def read(self) -> dict[tuple[str, str], Known]:
        """What the console's pages send each rule: every page that their links reach from
        the home page, signed out (the sign-in's) and signed in, and every form on them
        sent once as the page fills it (its answer read too: a redirect's URL names what
        the page it goes to reads)."""
        known = {_key(rule): Known() for rule in self.rules}
        for signed_in in (False, True):
            self._read(known, signed_in)
        return known

    def _read(self, known: dict[tuple[str, str], Known], signed_in: bool) -> None:
        seen: set[tuple[str, str]] = set()
        waiting: list[tuple[str, str, dict[str, str] | None]] = [("GET", f"{PREFIX}/", None)]
        while waiting:
            method, url, fields = waiting.pop()
            found = self.matched(url, method)
            if found is None:
                continue
            rule, values = found
            learnt = known[_key(rule)]
            learnt.values = learnt.values or {k: str(v) for k, v in values.items()}
            learnt.names |= {name for name, _ in parse_qsl(urlsplit(url).query)}
            learnt.names |= set(fields or ()) - {"token"}
            if method == "POST":
                learnt.form = learnt.form or dict(fields or {})
            visit = (method, url if method == "GET" else rule.endpoint)
            if visit in seen or len(seen) > VISITS_MOST:
                continue
            seen.add(visit)
            answer = self.send(method, url, fields, signed_in)
            assert answer.status_code < 500, (method, url, answer.status_code)
            if answer.headers.get("location", "").startswith(PREFIX):
                waiting.append(("GET", answer.headers["location"], None))
            if answer.headers.get("content-type", "").startswith("text/html"):
                reading = Reading(urlsplit(url).path)
                reading.feed(answer.text)
                waiting += [("GET", link, None) for link in reading.links]
                waiting += [(form.method, form.action, form.fields) for form in reading.forms]


VISITS_MOST = 300  # pages read and forms sent, at most, to learn what each rule is sent
URL_MOST = 30_000  # characters of a query, well within the test client's longest URL


def _groups(names: list[str], size: int) -> Iterator[list[str]]:
    """The names in groups whose query, each name holding a value of this size, fits in a
    URL."""
    at = step = max(1, URL_MOST // (size + 20))
    yield names[:step]
    while at < len(names):
        yield names[at:at + step]
        at += step


def _hostile_requests(rule: Rule, method: str, known: Known, every_name: set[str],
                      opens: bool) -> Iterator[tuple[str, dict[str, str] | None]]:
    """The URLs and forms sent to a rule: each hostile value in each path part; in all its
    names and every name of the console at once; where its view opens (opens), in each of
    its names alone, the others as its page fills them; and its path with a slash doubled
    at each of its slashes."""
    sample = {name: known.values.get(name, "1") for name in rule.arguments}
    base = dict(known.form) if method == "POST" else {}
    base.pop("token", None)

    def url(values: dict[str, str], query: dict[str, str] | None = None) -> str:
        built = rule.build(values, append_unknown=False)
        assert built is not None, (rule, values)
        path = built[1]
        return f"{path}?{urlencode(query)}" if query else path

    def request(values: dict[str, str], fields: dict[str, str]) -> tuple[str, Any]:
        if method == "POST":
            return url(values), fields
        return url(values, fields), None

    for value in HOSTILE.values():
        for name in rule.arguments:
            yield request({**sample, name: value}, base)
        for names in _groups(sorted(known.names | every_name), len(value)):
            yield request(sample, {name: value for name in names})
        alone = known.names | (PAGING if method == "GET" else set()) if opens else set()
        for name in sorted(alone):
            yield request(sample, {**base, name: value})
    path = url(sample)
    for at in range(len(PREFIX), len(path)):
        if path[at] == "/":
            yield path[:at] + "/" + path[at:], base if method == "POST" else None


@pytest.mark.fuzz
@pytest.mark.parametrize("signed_in", [True, False], ids=["signed in", "signed out"])
def test_no_hostile_input_to_any_console_route_is_a_5xx_or_a_traceback(
        app: PetstoreApp, store: Store, owner: str, caplog: pytest.LogCaptureFixture,
        signed_in: bool) -> None:
    caplog.set_level(logging.WARNING)
    store.import_pets(CATALOGUE)
    keys.create(store, plan="free", name="warehouse", per_minute=None, per_day=None)
    webhooks.create(store, None, "http://127.0.0.1:9/", None, "shop",
                    webhook_urls.networks("127.0.0.0/8"))
    with app.test_client() as client:
        console = Console(app, client, store, owner)
        known = console.read()
        every_name = PAGING.union(*(learnt.names for learnt in known.values()))
        failures, sent, routes = [], 0, set()
        for rule in console.rules:
            # Signed out, a view that needs a session reads nothing: the guard answers
            # first (the declaration of blueprint.needs), after routing its path.
            opens = signed_in or PUBLIC in stages_of(app.console.view_functions[rule.endpoint])
            for method in sorted(rule.methods - FLASKS_OWN):
                routes.add((rule.rule, method))
                for url, form in _hostile_requests(rule, method, known[_key(rule)],
                                                   every_name, opens):
                    answer = console.send(method, url, form, signed_in)
                    sent += 1
                    if answer.status_code >= 500:
                        failures.append((answer.status_code, method, url[:120],
                                         {k: v[:20] for k, v in (form or {}).items()}))
    errors = [f"{record.name}: {record.getMessage()[:200]}" for record in caplog.records
              if record.levelno >= logging.ERROR]
    print(f"\n{'signed in' if signed_in else 'signed out'}: {len(console.rules)} rules of the "
          f"console, {len(routes)} routes (a rule and a method), {len(HOSTILE)} hostile "
          f"values, {len(every_name)} names: {sent} requests")
    assert not failures, failures[:20]
    assert not errors, errors[:20]
    assert len(routes) >= 40 and sent > 2_000  # the walk found the console's pages


def test_what_the_issue_found_is_each_a_page_that_says_so(app: PetstoreApp, signed_in: Visitor,
                                                          store: Store) -> None:
    """An id past int64 names no page (404: D7's range, the store's), in a path; in a
    filter it is the form's error, as a date past the calendar is; a version that is no
    whole number within int64 is the form's 400, and so is a NUL anywhere; a doubled slash
    is no page, signed in or not."""
    store.import_pets(CATALOGUE)
    for path in (f"/console/pets/{INT64_PAST}", "/console/webhooks/9999999999999999999"):
        page = signed_in.get(path)
        assert page.status_code == 404 and "No such page" in page.text
    signed_in.get("/console/orders")
    for action in (f"orders/{INT64_PAST}/ship", f"keys/{INT64_PAST}/revoke",
                   f"pets/{INT64_PAST}/withdraw"):
        assert signed_in.post(f"/console/{action}", {"version": "1"}).status_code == 404
    board = signed_in.get("/console/orders?petId=9999999999999999999")
    assert board.status_code == 400
    assert ("Pet must be a whole number from -9223372036854775808 to 9223372036854775807."
            in board.text)
    for path in ("/console/orders?to=9999-12-31", "/console/orders.csv?to=9999-12-31"):
        refused = signed_in.get(path)
        assert refused.status_code == 400, path
        assert "Ship date to must be a date-time" in refused.text
    signed_in.get("/console/orders")
    for version in ("9" * 30, "²"):
        for path, what in (("/console/orders/1/cancel", "order"), ("/console/pets/10/edit",
                                                                   "pet")):
            refused = signed_in.post(path, {"version": version, "name": "Rex"})
            assert refused.status_code == 400, (path, version)
            assert f"The form lacks the version of the {what} it showed." in refused.text
    assert store.get_versioned_order(1)[0]["status"] == "pending"  # type: ignore[index]
    assert signed_in.get("/console/audit?before=²").status_code == 400
    for path in ("/console/audit?user=%00", "/console/pets?tag=a%00"):  # PostgreSQL's 500s
        refused = signed_in.get(path)
        assert refused.status_code == 400 and "holds a NUL character" in refused.text, path
    with app.test_client() as stranger:
        for client in (signed_in.client, stranger):
            for path in ("/console//orders", "/console///", "/console//sign-in"):
                page = client.get(path, follow_redirects=False)
                assert page.status_code == 404 and "No such page" in page.text, path
