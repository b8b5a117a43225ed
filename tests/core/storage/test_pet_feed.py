"""The feed of changed pets over each store (D39): every path of change (the rules of the
API and the console, an order placed, cancelled or shipped, an import, a hand edit of a pet
or of an order) gives the pet a new position and the kind of that change, in commit order;
a page is one range of an index; pets held before the feed come first; a cursor from after
a restored backup is refused."""

from __future__ import annotations

import threading
from typing import Any

import orjson
import pytest

from app.core import feed, orders, pets
from app.core.config import Settings
from app.core.errors import OutOfStock, ResyncRequired, StockBelowReserved
from app.core.services import open_services
from app.core.storage import Store, open_store
from tests.core.storage.conftest import Place
from tests.core.storage.test_feed import _drop, _open_transaction, _restore, assert_one_range
from tests.support import wait_until

NOW = "2026-11-24T10:00:00Z"


def _follow(store: Store, cursor: str | None) -> tuple[list[dict[str, Any]], str]:
    """Every pet the feed gives after the cursor, page by page, and the last cursor."""
    seen: list[dict[str, Any]] = []
    while True:
        page = feed.changes(store, cursor, limit=2, kind=feed.PETS)
        seen += [orjson.loads(text) for text in page.items]
        cursor = page.next
        if len(page.items) < 2:
            return seen, cursor


def _kinds(store: Store, cursor: str) -> tuple[list[tuple[int, str]], str]:
    """The (pet, kind of its last change) of each pet changed after the cursor, in feed
    order, as the webhooks read them, and the cursor after them."""
    _, position, pet_id = feed.resume_point(store, cursor)
    changes = [c for c in store.changes_after((position, "pet", pet_id), 100) if c.of == "pet"]
    _, following = _follow(store, cursor)
    return [(c.item_id, c.kind) for c in changes], following


def _order(store: Store, pet_id: int, quantity: int, key: str) -> int:
    placed = store.place_order({"petId": pet_id, "quantity": quantity}, 1, key, key, NOW,
                               catalogue_pets_only=True)
    return int(placed.order["id"])


@pytest.fixture
def shop(store: Store) -> Store:
    """Pet 1 with 2 units, pet 2 whose stock is not tracked."""
    store.import_pets([{"id": 1, "name": "Rex", "stock": 2},
                       {"id": 2, "name": "Tom", "category": "cats"}])
    return store


def test_every_path_of_change_gives_the_pet_a_position_and_its_kind(
        shop: Store, place: Place) -> None:
    seen, cursor = _follow(shop, None)
    assert [(p["id"], p.get("available")) for p in seen] == [
        (1, 2), (2, None)]
    steps: list[tuple[Any, list[tuple[int, str]]]] = [
        (lambda: pets.update(shop, 2, {"name": "Tom II"}), [(2, "updated")]),
        (lambda: pets.adjust(shop, 1, 1, None, 1, "receive"), [(1, "updated")]),
        (lambda: _order(shop, 1, 1, "a"), [(1, "changed")]),  # 3 units, 1 held
        (lambda: _order(shop, 1, 2, "b"), [(1, "out_of_stock")]),
        (lambda: orders.cancel(shop, 2, None), [(1, "back_in_stock")]),  # order b
        (lambda: orders.ship(shop, 1, NOW), [(1, "changed")]),  # stock and held fall
        (lambda: pets.withdraw(shop, 2), [(2, "withdrawn")]),
        (lambda: pets.restore(shop, 2), [(2, "restored")]),
        (lambda: shop.import_pets([{"id": 3, "name": "Kit", "stock": 0}]), [(3, "created")]),
        (lambda: shop.import_pets([{"id": 3, "name": "Kit", "stock": 4}], upsert=True),
         [(3, "back_in_stock")]),
        (lambda: shop.import_orders([{"id": 50, "petId": 3, "quantity": 1}]),
         [(3, "changed")]),
        (lambda: place.sql("UPDATE pets SET tags = '[\"kitten\"]' WHERE id = 3"),
         [(3, "updated")]),  # a hand edit of a pet
        (lambda: place.sql("UPDATE orders SET quantity = 4 WHERE id = 50"),
         [(3, "out_of_stock")]),  # a hand edit of an order, which holds the pet's units
    ]
    for step, expected in steps:
        step()
        kinds, following = _kinds(shop, cursor)
        assert kinds == expected, (step, kinds)
        changed, cursor = _follow(shop, cursor)
        assert cursor == following
        assert changed == [pets_json(shop, pet_id) for pet_id, _ in expected]
    # An UPDATE that changes nothing a client reads still comes (a hand touch), once.
    place.sql("UPDATE pets SET name = name WHERE id = 1")
    assert _kinds(shop, cursor)[0] == [(1, "changed")]


def pets_json(store: Store, pet_id: int) -> dict[str, Any]:
    found = store.pet_json(pet_id)
    assert found is not None
    return dict(orjson.loads(found[0]))


def test_a_refused_change_gives_no_position(shop: Store) -> None:
    _, cursor = _follow(shop, None)
    with pytest.raises(OutOfStock):
        _order(shop, 1, 3, "too-many")  # 2 units: refused, nothing held
    with pytest.raises(StockBelowReserved):
        pets.adjust(shop, 1, -3, None, 1, "below")
    pets.withdraw(shop, 2)
    _, cursor = _follow(shop, cursor)
    pets.withdraw(shop, 2)  # withdrawn already: no change
    assert _follow(shop, cursor) == ([], cursor)


def test_a_page_is_one_range_of_the_position_index(shop: Store, place: Place) -> None:
    assert_one_range(place, "pets", "idx_pets_position")


def test_positions_follow_commit_order_when_transactions_overlap(
        place: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    """Transaction A changes pet 1 first and commits last, while B changes pet 2 and a
    reader polls in between: B waits for A, so A's change is never behind the reader."""
    store = place.open()
    store.import_pets([{"id": 1, "name": "Rex", "stock": 2}, {"id": 2, "name": "Tom"}])
    _, cursor = _follow(store, None)
    b_done = threading.Event()
    patient = open_store(Settings(database=place.database, busy_timeout_ms=1000))
    with _open_transaction(place) as a:
        a("UPDATE pets SET name = 'Rex A' WHERE id = 1")
        writer = threading.Thread(target=lambda: (pets.update(patient, 2, {"name": "Tom B"}),
                                                  b_done.set()))
        with place.writers_waiting(monkeypatch) as waiting:
            writer.start()
            wait_until(waiting, message="B never began to wait for A's lock")
        polled, cursor = _follow(store, cursor)
        assert polled == []
        assert not b_done.is_set(), "B committed before A, which changed its pet first"
    writer.join(5)
    patient.dispose()
    assert b_done.is_set()
    seen, _ = _follow(store, cursor)
    assert [(p["id"], p["name"]) for p in seen] == [(1, "Rex A"), (2, "Tom B")]
    store.dispose()


def test_pets_held_before_the_feed_come_first_and_move_on_when_changed(place: Place) -> None:
    """A database of schema 17 (before the pets' feed) brought up to date: its pets are
    all at position 0 with the kind "changed", the feed gives them from the beginning, and
    a change moves one on."""
    place.at_schema(17, "INSERT INTO pets (id, name, stock) VALUES (1, 'Rex', 2), "
                    "(2, 'Tom', NULL), (3, 'Kit', 1)")
    store = place.open()
    try:
        seen, cursor = _follow(store, None)
        assert [p["id"] for p in seen] == [1, 2, 3]
        assert {c.kind for c in store.changes_after((-1, "order", 0), 10)} == {"changed"}
        versions = [store.pet_version(i) for i in (1, 2, 3)]
        assert versions == [1, 1, 1], "the migration changed no pet's version"
        _order(store, 3, 1, "k")
        seen, _ = _follow(store, cursor)
        assert [(p["id"], p["available"]) for p in seen] == [(3, 0)]
    finally:
        store.dispose()


def test_a_pet_cursor_from_after_a_restored_backup_needs_a_resync(
        shop: Store, place: Place, tmp_path: Any) -> None:
    _, before = _follow(shop, None)
    backup = str(tmp_path / "backup")
    shop.backup(backup)
    pets.update(shop, 1, {"name": "Lost"})
    _, after = _follow(shop, before)

    restored = _restore(place, backup, tmp_path)
    services = open_services(Settings(database=restored))
    try:
        pets.update(services.store, 2, {"name": "Kept"})
        with pytest.raises(ResyncRequired):
            feed.changes(services.store, after, kind=feed.PETS)
        seen, _ = _follow(services.store, before)
        assert [(p["id"], p["name"]) for p in seen] == [(2, "Kept")]
    finally:
        services.store.dispose()
        if place.kind == "postgresql":
            _drop(restored)
