"""Integrators build clients from the documents, from the file in the repository or from the
service's openapi.json. For every document they use (the released ones, never edited, and
the current ones), openapi-python-client generates a client without a warning, and that
client lists, cancels and revalidates against today's service over real HTTP.

A released document keeps its promise (D17): a change to v1 or v2 that would break
a client generated from release 1.0.0 of v1 or 2.0.0 of v2 fails here. A current document
that leaves its file for a reference (which the generator does not follow, and so drops every
response model it needs) fails here too."""

from __future__ import annotations

import importlib
import itertools
import os
import subprocess
import sys
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.support import Server, serving

pytestmark = [pytest.mark.slow, pytest.mark.contract]

ROOT = Path(__file__).resolve().parents[2]
OPENAPI = ROOT / "openapi"
RELEASED_V1 = OPENAPI / "released" / "petstore-v1-1.0.0.yaml"
RELEASED_V2 = OPENAPI / "released" / "petstore-v2-2.0.0.yaml"
RELEASED_CATALOGUE = OPENAPI / "released" / "petstore-v2-2.4.0.yaml"  # D32-D34
RELEASED_PET_FEED = OPENAPI / "released" / "petstore-v2-2.5.0.yaml"  # D39
BIN = Path(sys.executable).parent
PACKAGES = itertools.count()
MODULES = ("client", "models", "api.orders.list_orders", "api.orders.cancel_order")
V2_MODULES = ("api.orders.get_order",)
CATALOGUE_MODULES = ("api.orders.place_order", "api.pets.add_pet", "api.pets.get_pet",
                     "api.pets.get_inventory")
FEED_MODULES = ("api.changes.list_order_changes", "api.changes.list_pet_changes")


@dataclass(frozen=True)
class Source:
    """Where an integrator takes a document from: a file, or the running service."""

    version: str
    file: Path | None = None  # None: the service's /<version>/openapi.json

    def __str__(self) -> str:
        return str(self.file.relative_to(ROOT)) if self.file else f"served /{self.version}"

    @property
    def catalogue(self) -> bool:
        """Whether the document has the catalogue (v2 from 2.4.0 on)."""
        return self.version == "v2" and self.file != RELEASED_V2

    @property
    def pet_feed(self) -> bool:
        """Whether the document has the feed of changed pets (v2 from 2.5.0 on)."""
        return self.catalogue and self.file != RELEASED_CATALOGUE


V1_SOURCES = [Source("v1", RELEASED_V1), Source("v1", OPENAPI / "petstore-v1.yaml"),
              Source("v1")]
V2_SOURCES = [Source("v2", RELEASED_V2), Source("v2", OPENAPI / "petstore-v2.yaml"),
              Source("v2")]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    """A live `petstore serve` over the demo orders (1 to 6; 4 and 6 shipped), and its key."""
    with serving(tmp_path) as server:
        key = server.petstore("init", "--demo").stdout.strip()
        yield server, key


def generate(source: Source, server: Server, folder: Path) -> dict[str, ModuleType]:
    """The client openapi-python-client writes from source, imported; the generator must say
    nothing but what it generates (no warning of a reference it could not follow, nor of a
    response it left out)."""
    package = f"petstore_{source.version}_client_{next(PACKAGES)}"
    where = (["--path", str(source.file)] if source.file else
             ["--url", f"http://127.0.0.1:{server.port}/{source.version}/openapi.json"])
    result = subprocess.run(
        [str(BIN / "openapi-python-client"), "generate", *where,
         "--meta", "none", "--output-path", str(folder / package)],
        capture_output=True, text=True, timeout=120,
        # ruff on the PATH: without it the generator warns that it skipped formatting.
        env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"},
    )
    said = result.stdout + result.stderr
    assert result.returncode == 0, said
    assert "warning" not in said.lower(), said
    sys.path.insert(0, str(folder))
    try:
        wanted = [*MODULES, *(V2_MODULES if source.version == "v2" else ()),
                  *(CATALOGUE_MODULES if source.catalogue else ()),
                  *(FEED_MODULES if source.pet_feed else ())]
        return {name: importlib.import_module(f"{package}.{name}") for name in wanted}
    finally:
        sys.path.remove(str(folder))


@pytest.fixture
def client_of(service: tuple[Server, str], tmp_path: Path) -> Iterator[Any]:
    """client_of(source): a generated client, with its modules, against the live service."""
    server, key = service
    made: list[Any] = []

    def make(source: Source) -> dict[str, Any]:
        modules = generate(source, server, tmp_path / "clients")
        client = modules["client"].AuthenticatedClient(
            base_url=f"http://127.0.0.1:{server.port}/{source.version}", token=key,
            raise_on_unexpected_status=True)
        made.append(client)
        return {**modules, "session": client}

    yield make
    for client in made:
        client.get_httpx_client().close()
    for name in [n for n in sys.modules if n.startswith("petstore_v")]:
        del sys.modules[name]


def generated(value: Any, made: dict[str, Any]) -> bool:
    """Whether value is one of the client's own models: what a response the generator could
    not read would lack. (From a served document, whose references are resolved inline, the
    models are named after their operations, ListOrdersResponse200 for OrderPage.)"""
    return type(value).__module__.startswith(made["models"].__name__)


def test_the_released_documents_are_release_1_0_0_of_v1_and_2_0_0_of_v2() -> None:
    v1, v2 = RELEASED_V1.read_text(), RELEASED_V2.read_text()
    assert "\n  version: 1.0.0\n" in v1 and "\n  - url: /v1\n" in v1
    assert "\n  version: 2.0.0\n" in v2 and "\n  - url: /v2\n" in v2


@pytest.mark.parametrize("source", V1_SOURCES, ids=str)
def test_a_v1_client_lists_cancels_and_revalidates(source: Source, client_of: Any) -> None:
    made = client_of(source)
    client = made["session"]
    list_orders, cancel_order = made["api.orders.list_orders"], made["api.orders.cancel_order"]
    listed = list_orders.sync_detailed(client=client)
    assert listed.status_code == 200
    orders = listed.parsed
    assert [order.id for order in orders] == [1, 2, 3, 4, 5, 6]
    assert all(generated(order, made) for order in orders)
    assert orders[3].status.value == "shipped"
    assert orders[3].ship_date.isoformat() == "2026-11-20T10:00:00+00:00"

    assert cancel_order.sync_detailed(1, client=client).status_code == 204
    assert cancel_order.sync_detailed(1, client=client).status_code == 204
    shipped = cancel_order.sync_detailed(4, client=client)
    assert shipped.status_code == 409
    assert generated(shipped.parsed, made)
    assert shipped.parsed.code == "order_already_shipped"
    unknown = cancel_order.sync_detailed(999, client=client)
    assert unknown.status_code == 404 and generated(unknown.parsed, made)
    assert unknown.parsed.code == "order_not_found"

    after = list_orders.sync_detailed(client=client).parsed
    assert after[0].status.value == "cancelled"

    # The 304 of the list, as the released document describes it.
    tag = listed.headers["etag"]
    fresh = list_orders.sync_detailed(client=client, if_none_match=tag)
    assert fresh.status_code == 200  # order 1 changed since
    again = list_orders.sync_detailed(client=client, if_none_match=fresh.headers["etag"])
    assert again.status_code == 304


@pytest.mark.parametrize("source", V2_SOURCES, ids=str)
def test_a_v2_client_walks_pages_gets_cancels_and_revalidates(source: Source,
                                                              client_of: Any) -> None:
    made = client_of(source)
    client = made["session"]
    list_orders, get_order = made["api.orders.list_orders"], made["api.orders.get_order"]
    cancel_order = made["api.orders.cancel_order"]

    pages, cursor = [], None
    while True:
        kwargs = {"cursor": cursor} if cursor else {}
        page = list_orders.sync_detailed(client=client, limit=2, **kwargs)
        assert page.status_code == 200 and generated(page.parsed, made)
        pages.append([order.id for order in page.parsed.orders])
        cursor = page.parsed.next_
        if cursor is None:
            break
    assert pages == [[1, 2], [3, 4], [5, 6]]

    one = get_order.sync_detailed(4, client=client)
    assert one.status_code == 200 and generated(one.parsed, made)
    assert (one.parsed.id, one.parsed.status.value) == (4, "shipped")
    assert one.parsed.ship_date.isoformat() == "2026-11-20T10:00:00+00:00"
    assert get_order.sync_detailed(4, client=client,
                                   if_none_match=one.headers["etag"]).status_code == 304

    assert cancel_order.sync_detailed(1, client=client).status_code == 204
    assert cancel_order.sync_detailed(1, client=client).status_code == 204
    shipped = cancel_order.sync_detailed(4, client=client)
    assert shipped.status_code == 409 and generated(shipped.parsed, made)
    assert shipped.parsed.code == "order_already_shipped"
    unknown = cancel_order.sync_detailed(999, client=client)
    assert unknown.status_code == 404 and generated(unknown.parsed, made)
    assert unknown.parsed.code == "order_not_found"
    missing = get_order.sync_detailed(999, client=client)
    assert missing.status_code == 404 and generated(missing.parsed, made)
    assert missing.parsed.code == "order_not_found"

    first = list_orders.sync_detailed(client=client, limit=2)
    assert first.parsed.orders[0].status.value == "cancelled"
    again = list_orders.sync_detailed(client=client, limit=2,
                                      if_none_match=first.headers["etag"])
    assert again.status_code == 304


CATALOGUE_SOURCES = [Source("v2", RELEASED_CATALOGUE), Source("v2", OPENAPI / "petstore-v2.yaml"),
                     Source("v2")]


def _body(operation: ModuleType, fields: dict[str, Any]) -> Any:
    """The generated model of an operation's request body, made from plain fields."""
    model = typing.get_type_hints(operation._get_kwargs)["body"]
    return model.from_dict(fields)


@pytest.mark.parametrize("source", CATALOGUE_SOURCES, ids=str)
def test_a_v2_client_adds_a_pet_orders_it_out_of_stock_and_reads_the_inventory(
        source: Source, client_of: Any) -> None:
    made = client_of(source)
    client = made["session"]
    add_pet, get_pet = made["api.pets.add_pet"], made["api.pets.get_pet"]
    place_order, get_inventory = made["api.orders.place_order"], made["api.pets.get_inventory"]
    before = get_inventory.sync_detailed(client=client)
    assert before.status_code == 200 and generated(before.parsed, made)

    added = add_pet.sync_detailed(client=client, idempotency_key="pet-1",
                                  body=_body(add_pet, {"name": "Rex", "tags": ["puppy"],
                                                       "stock": 2}))
    assert added.status_code == 201 and generated(added.parsed, made)
    pet_id = added.parsed.id
    assert (added.parsed.stock, added.parsed.available, added.parsed.status.value) == (
        2, 2, "available")

    refused = place_order.sync_detailed(
        client=client, idempotency_key="order-1",
        body=_body(place_order, {"petId": pet_id, "quantity": 3}))
    assert refused.status_code == 422 and generated(refused.parsed, made)
    assert (refused.parsed.code, refused.parsed.param) == ("out_of_stock", "quantity")
    placed = place_order.sync_detailed(
        client=client, idempotency_key="order-1",
        body=_body(place_order, {"petId": pet_id, "quantity": 2}))
    assert placed.status_code == 201

    sold_out = get_pet.sync_detailed(pet_id, client=client).parsed
    assert (sold_out.reserved, sold_out.available, sold_out.status.value) == (2, 0, "pending")
    after = get_inventory.sync_detailed(client=client).parsed
    assert after.orders.pending == before.parsed.orders.pending + 2
    assert (after.stock.on_hand, after.stock.reserved, after.stock.available) == (
        before.parsed.stock.on_hand + 2, before.parsed.stock.reserved + 2,
        before.parsed.stock.available)


PET_FEED_SOURCES = [Source("v2", RELEASED_PET_FEED), Source("v2", OPENAPI / "petstore-v2.yaml"),
                    Source("v2")]


@pytest.mark.parametrize("source", PET_FEED_SOURCES, ids=str)
def test_a_v2_client_follows_both_feeds(source: Source, client_of: Any) -> None:
    """A storefront's client (D39): it follows the orders' feed and the pets' feed, and
    sees a pet sold out by an order through the generated models."""
    made = client_of(source)
    client = made["session"]
    order_changes = made["api.changes.list_order_changes"]
    pet_changes = made["api.changes.list_pet_changes"]
    add_pet, place_order = made["api.pets.add_pet"], made["api.orders.place_order"]

    orders_first = order_changes.sync_detailed(client=client, limit=1000)
    assert orders_first.status_code == 200 and generated(orders_first.parsed, made)
    assert [o.id for o in orders_first.parsed.orders] == [1, 2, 3, 4, 5, 6]
    pets_first = pet_changes.sync_detailed(client=client, limit=1000)
    assert pets_first.status_code == 200 and generated(pets_first.parsed, made)

    added = add_pet.sync_detailed(client=client, idempotency_key="pet-1",
                                  body=_body(add_pet, {"name": "Rex", "stock": 1}))
    pet_id = added.parsed.id
    placed = place_order.sync_detailed(
        client=client, idempotency_key="order-1",
        body=_body(place_order, {"petId": pet_id, "quantity": 1}))
    assert placed.status_code == 201

    pets_then = pet_changes.sync_detailed(client=client, after=pets_first.parsed.next_,
                                          wait=5)
    assert pets_then.status_code == 200 and generated(pets_then.parsed, made)
    assert [(p.id, p.available, p.status.value) for p in pets_then.parsed.pets] == [
        (pet_id, 0, "pending")]
    orders_then = order_changes.sync_detailed(client=client,
                                              after=orders_first.parsed.next_)
    assert [o.id for o in orders_then.parsed.orders] == [placed.parsed.id]
    stale = pet_changes.sync_detailed(client=client, after=orders_first.parsed.next_)
    assert stale.status_code == 400 and generated(stale.parsed, made)
    assert stale.parsed.code == "invalid_request"
