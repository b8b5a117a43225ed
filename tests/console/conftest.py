"""The console's pages through the service's own test client (the whole chain, so the
access layer's branch, the guard and the blueprint, over a real SQLite file): a person's browser,
short of running scripts. tests/e2e/test_console_browser.py is the real browser's."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.console.blueprint import STATE
from app.core.config import Settings
from app.core.storage import Store
from app.core.users import accounts
from app.web import PetstoreApp, create_app

HOST = "testserver"  # the test client's own host
ORIGIN = f"http://{HOST}"  # and origin
GOOD = "correct horse battery staple 42"
TOKEN = re.compile(r'name="token" value="([^"]+)"')
ORDERS = [
    {"id": 1, "petId": 10, "quantity": 2, "complete": False, "status": "pending"},
    {"id": 2, "petId": 20, "quantity": 1, "shipDate": "2026-11-20T10:00:00Z",
     "complete": False, "status": "shipped"},
    {"id": 3, "petId": 10, "quantity": 5, "complete": False, "status": "cancelled"},
    {"id": 4, "petId": 30, "quantity": 3, "complete": False, "status": "pending"},
]


def form_key(page: str, action: str) -> str:
    """The key that the page's form posting to action carries (a form applied once)."""
    form = re.search(rf'<form[^>]*action="{re.escape(action)}"[^>]*>(.*?)</form>', page, re.S)
    assert form, f"the page has no form to {action}"
    found = re.search(r'name="key" value="(console-[^"]+)"', form.group(1))
    assert found, f"the form to {action} carries no key"
    return found.group(1)


class Visitor:
    """A test client as a person's browser uses the console: it keeps cookies, sends the
    forms of the page it last read (their token included), from the console's own origin
    unless told otherwise, and follows no redirect by itself."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.page = ""

    def get(self, path: str, **kwargs: Any) -> Any:
        response = self.client.get(path, follow_redirects=False, **kwargs)
        self._read(response)
        return response

    def _read(self, response: Any) -> None:
        """A page a browser shows (not a redirect's) becomes the page it is on."""
        if (not 300 <= response.status_code < 400
                and response.headers.get("content-type", "").startswith("text/html")):
            self.page = response.text

    def token(self) -> str:
        found = TOKEN.search(self.page)
        assert found, "the page has no form"
        return found.group(1)

    def post(self, path: str, data: dict[str, Any] | None = None, *, token: str | None = None,
             headers: dict[str, str] | None = None) -> Any:
        form = {"token": self.token() if token is None else token, **(data or {})}
        sent = {"Origin": ORIGIN, "Sec-Fetch-Site": "same-origin", **(headers or {})}
        response = self.client.post(path, data=form, headers=sent, follow_redirects=False)
        self._read(response)
        return response

    def follow(self, response: Any) -> Any:
        """The page a 303 sends the browser to."""
        assert response.status_code == 303, (response.status_code, response.text[:300])
        return self.get(response.headers["location"])

    def sign_in(self, name: str, password: str) -> Any:
        self.get("/console/sign-in")
        return self.post("/console/sign-in", {"name": name, "password": password})


def walk_pages(visitor: Visitor, path: str, ids: Callable[[str], list[int]]) -> list[int]:
    """The ids of the rows of every page from path on, following each page's "next page"
    link as a person would."""
    seen: list[int] = []
    while True:
        visitor.get(path)
        seen += ids(visitor.page)
        found = re.search(r'id="next-page" href="([^"]+)"', visitor.page)
        if found is None:
            return seen
        path = found.group(1).replace("&amp;", "&")


def row(page: str, element_id: str) -> str:
    """The table row of this id on the page."""
    return page.split(f'<tr id="{element_id}"', 1)[1].split("</tr>", 1)[0]


def cell(found_row: str, name: str) -> str:
    """The text of a row's cell of this class."""
    found = re.search(rf'<td class="{name}">(.*?)</td>', found_row, re.S)
    assert found, f"the row has no {name}"
    return found.group(1)


@pytest.fixture
def console_settings(settings: Settings, request: pytest.FixtureRequest) -> Settings:
    """The test client's address is "testclient", no IP address: the console answers any
    address here, except in the test of PETSTORE_CONSOLE_ALLOW; and its host is
    "testserver", which PETSTORE_CONSOLE_HOSTS names (D36) beside loopback's. A test may
    change more settings by parametrizing this fixture (indirect) with a dict of them."""
    changes = {"console_allow": "*", "console_hosts": f"{HOST},localhost",
               **getattr(request, "param", {})}
    return settings.replace(**changes)


@pytest.fixture
def app(console_settings: Settings, store: Store) -> PetstoreApp:
    store.import_orders(ORDERS)
    return create_app(console_settings)


@pytest.fixture
def visitor(app: PetstoreApp) -> Iterator[Visitor]:
    with app.test_client() as client:
        yield Visitor(client)


@pytest.fixture
def owner(store: Store) -> str:
    """A user "owner" with the password GOOD, changed from the one-time one."""
    user, one_time = accounts.add(store, "owner")
    accounts.change_password(store, user, one_time, GOOD, None)
    return "owner"


@pytest.fixture
def signed_in(visitor: Visitor, owner: str) -> Visitor:
    """The visitor, signed in as the owner, on the home page."""
    visitor.follow(visitor.sign_in(owner, GOOD))
    assert "Pending orders" in visitor.page
    return visitor


def console_store(app: PetstoreApp, wrap: Callable[[Any], Any]) -> Any:
    """Give the app's console the store wrap makes of its own (a store that fails, or
    that lets another request in at a chosen call); that store."""
    console = app.console.extensions[STATE]
    wrapped = wrap(console.services.store)
    app.console.extensions[STATE] = dataclasses.replace(
        console, services=dataclasses.replace(console.services, store=wrapped))
    return wrapped
