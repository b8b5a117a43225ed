from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connexion import AsyncApp

from app.core import keys
from app.core.config import Settings
from app.core.storage import Store, open_store
from app.web import PetstoreApp, chain, create_app
from tests.support import ISSUED_SECRETS, make_key

ORDERS = [
    {"id": 1, "petId": 10, "quantity": 1, "complete": False, "status": "pending"},
    {"id": 2, "petId": 20, "quantity": 2, "shipDate": "2026-11-20T10:00:00Z",
     "complete": True, "status": "shipped"},
    {"id": 3, "petId": 30, "quantity": 1, "complete": False, "status": "cancelled"},
    {"id": 4, "complete": False, "status": "pending"},
]


@pytest.fixture
def app(settings: Settings, store: Store) -> PetstoreApp:
    assert settings.validate_responses, "every HTTP test validates its responses"
    store.import_orders(ORDERS)
    return create_app(settings)


@pytest.fixture
def client(app: PetstoreApp) -> Iterator[Any]:
    with app.test_client() as client:
        yield client


@pytest.fixture
def key(store: Store) -> str:
    return make_key(store)


@pytest.fixture
def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(autouse=True)
def every_app_validates_its_responses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every app an HTTP test builds checks each response against the OpenAPI document:
    add_api refuses to build one that would not."""
    add_api = AsyncApp.add_api

    def checked(self: AsyncApp, *args: Any, **kwargs: Any) -> Any:
        assert kwargs.get("validate_responses") is True, (
            "HTTP tests run with validate_responses=True"
        )
        return add_api(self, *args, **kwargs)

    monkeypatch.setattr(AsyncApp, "add_api", checked)


# Of the answers of the served chain and of the long way, every header is compared but these,
# which differ by nature between two answers: the request id, the Date, and the second a
# window resets (X-RateLimit-Reset, and RateLimit's t=, masked by compared_headers).
NOT_COMPARED = frozenset({"x-request-id", "date", "x-ratelimit-reset"})
RESET = re.compile(r";t=\d+")


def compared_headers(response: Any) -> dict[str, str | None]:
    """Every header of the answer a client reads, but NOT_COMPARED (names lower-case, the
    values of a repeated header joined)."""
    headers: dict[str, str | None] = {
        name: ", ".join(response.headers.get_list(name)) for name in response.headers
        if name not in NOT_COMPARED}
    if "ratelimit" in headers:
        headers["ratelimit"] = RESET.sub(";t=(reset)", headers["ratelimit"] or "")
    return headers


def served_and_long_way(settings: Settings, tmp_path: Path, orders: list[dict[str, Any]],
                        pets: list[dict[str, Any]] | None = None,
                        ) -> tuple[Any, Any, dict[str, str]]:
    """The served app and the long way's (the chain without its fast layers,
    chain.LONG_WAY), each over its own store of the same pets, orders and of a write key
    and a read key no quota stops: their two test clients, and the Authorization values
    by name ("write", "read", "unknown")."""
    write, read = keys.generate_key(), keys.generate_key()
    clients = []
    for name, layers in (("served", chain.LAYERS), ("long", chain.LONG_WAY)):
        own = settings.replace(database=str(tmp_path / f"{name}.db"))
        store = open_store(own)
        store.import_pets(pets or [])
        store.import_orders(orders)
        bearer = unmetered_keys(store, write, read)
        store.close()
        clients.append(create_app(own, layers=layers).test_client())
    return clients[0], clients[1], bearer


def unmetered_keys(store: Store, write: keys.NewKey | None = None,
                   read: keys.NewKey | None = None) -> dict[str, str]:
    """A write key and a read key no quota stops, created in store (these, or new ones):
    their Authorization values by name ("write", "read"); "unknown" names no key."""
    write, read = write or keys.generate_key(), read or keys.generate_key()
    ISSUED_SECRETS.update({write.secret, read.secret})
    for new, scope in ((write, "write"), (read, "read")):
        created = store.create_key(digest=new.digest, prefix=new.prefix, name=scope,
                                   plan="free", per_minute=10**6, per_day=10**6,
                                   now="2026-01-01T00:00:00Z")
        store.set_scope(created.id, scope)
    return {"write": f"Bearer {write.secret}", "read": f"Bearer {read.secret}",
            "unknown": "Bearer psk_nope"}

