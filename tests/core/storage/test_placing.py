"""Writing through v2, on every store (D22-D25): each order's version, raised by
every change whoever makes it; moves conditional on a version (If-Match); orders placed
under an idempotency key in the order's own transaction, exactly once however many
callers race; and the keys forgotten after their retention."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.core.errors import IdempotencyKeyReused, PetNotInCatalogue
from app.core.storage import Store
from tests.core.storage.conftest import Place

NOW = "2026-11-24T10:00:00Z"
NEW = {"petId": 7, "quantity": 2, "shipDate": "2026-12-01T10:00:00Z"}


def version(store: Store, order_id: int) -> int:
    found = store.order_version(order_id)
    assert found is not None
    return found


def test_every_change_raises_the_orders_version(store: Store, place: Place) -> None:
    store.import_orders([{"id": 1}, {"id": 2}, {"id": 3, "status": "shipped"}])
    assert [version(store, i) for i in (1, 2, 3)] == [1, 1, 1]
    assert store.ship_order(1, NOW).version == 2
    assert store.complete_order(1).version == 3
    assert store.cancel_order(2, None, NOW).version == 2
    place.sql("UPDATE orders SET quantity = 9 WHERE id = 3")  # a hand edit
    assert version(store, 3) == 2
    store.import_orders([{"id": 3, "quantity": 4}], upsert=True)  # the CLI's upsert
    assert version(store, 3) == 3
    # A move that changes nothing raises nothing.
    assert not store.cancel_order(2, None, NOW).changed
    assert version(store, 2) == 2
    assert store.order_version(99) is None


def test_a_move_named_at_an_old_version_changes_nothing(store: Store) -> None:
    store.import_orders([{"id": 1}])
    stale = store.ship_order(1, NOW, version=5)
    assert (stale.changed, stale.status, stale.version) == (False, "pending", 1)
    shipped = store.ship_order(1, NOW, version=1)
    assert (shipped.changed, shipped.status, shipped.version) == (True, "shipped", 2)
    assert not store.complete_order(1, version=1).changed
    assert store.complete_order(1, version=2).complete


def test_complete_moves_only_a_shipped_order_once(store: Store) -> None:
    store.import_orders([{"id": 1}, {"id": 2, "status": "shipped"}])
    assert not store.complete_order(1).changed
    assert store.complete_order(2).changed
    again = store.complete_order(2)
    assert (again.changed, again.complete) == (False, True)
    assert [o["complete"] for o in store.list_orders()] == [False, True]


def test_placing_under_a_key_places_once_and_replays_the_first_answer(store: Store) -> None:
    store.import_orders([{"id": 5}])
    first = store.place_order(NEW, 1, "key-1", "fp", NOW)
    assert not first.replayed and first.version == 1
    assert first.order == {"id": 6, **NEW, "complete": False, "status": "pending"}
    store.ship_order(6, NOW)  # the order moves on; the first answer stays as it was
    again = store.place_order(NEW, 1, "key-1", "fp", NOW)
    assert again.replayed and again.order == first.order and again.version == 1
    with pytest.raises(IdempotencyKeyReused):
        store.place_order({**NEW, "quantity": 3}, 1, "key-1", "other fp", NOW)
    # The key belongs to an API key: another's same key places another order.
    assert store.place_order(NEW, 2, "key-1", "fp", NOW).order["id"] == 7
    assert store.count_orders() == 3


def test_concurrent_placings_with_one_key_make_one_order(store: Store, place: Place) -> None:
    barrier = threading.Barrier(10)
    others = [place.open() for _ in range(2)]  # as other processes or hosts would

    def placing(index: int) -> int:
        target = (store, *others)[index % 3]
        barrier.wait()
        try:
            return int(target.place_order(NEW, 1, "race", "fp", NOW).order["id"])
        finally:
            target.close()

    try:
        with ThreadPoolExecutor(10) as pool:
            ids = list(pool.map(placing, range(10)))
    finally:
        for other in others:
            other.dispose()
    assert len(set(ids)) == 1
    assert store.count_orders() == 1


def test_keys_past_their_retention_are_forgotten(store: Store) -> None:
    store.place_order(NEW, 1, "old", "fp", "2026-11-20T10:00:00Z")
    store.place_order(NEW, 1, "new", "fp", NOW)
    assert store.purge_idempotency_keys("2026-11-23T10:00:00Z") == 1
    # The old key may place again; the new one still replays.
    assert not store.place_order(NEW, 1, "old", "fp", NOW).replayed
    assert store.place_order(NEW, 1, "new", "fp", NOW).replayed
    assert store.count_orders() == 3


# issue 36: the pets catalogue ----------------------------------------------------------------


def test_without_a_catalogue_an_order_for_any_pet_is_placed(store: Store) -> None:
    placed = store.place_order({"petId": 999999, "quantity": 1}, 1, "k", "fp", NOW,
                               catalogue_pets_only=True)
    assert placed.order["petId"] == 999999 and not placed.replayed


def test_with_a_catalogue_a_pet_outside_it_is_refused_and_the_key_is_kept_for_nothing(
        store: Store) -> None:
    store.import_pets([{"id": 7, "name": "Rex"}])
    with pytest.raises(PetNotInCatalogue) as refused:
        store.place_order({"petId": 8, "quantity": 1}, 1, "k", "fp", NOW,
                          catalogue_pets_only=True)
    assert refused.value.param == "petId" and "8" in refused.value.message
    assert store.count_orders() == 0
    # The same key, corrected, places: the refusal kept no key (D23).
    placed = store.place_order(NEW, 1, "k", "other fp", NOW, catalogue_pets_only=True)
    assert placed.order["petId"] == 7 and not placed.replayed


def test_a_replay_answers_as_first_answered_whatever_the_catalogue_holds_now(
        store: Store) -> None:
    first = store.place_order({"petId": 8, "quantity": 1}, 1, "k", "fp", NOW,
                              catalogue_pets_only=True)
    store.import_pets([{"id": 7, "name": "Rex"}])  # a catalogue without pet 8, since
    again = store.place_order({"petId": 8, "quantity": 1}, 1, "k", "fp", NOW,
                              catalogue_pets_only=True)
    assert again.replayed and again.order == first.order


def test_imports_and_placing_without_the_rule_are_not_held_to_the_catalogue(
        store: Store) -> None:
    store.import_pets([{"id": 7, "name": "Rex"}])
    store.import_orders([{"id": 1, "petId": 12345}])
    assert store.place_order({"petId": 8, "quantity": 1}, 1, "k", "fp", NOW).order["id"] == 2


def test_a_move_gives_the_order_as_it_left_it_as_get_order_would(store: Store) -> None:
    store.import_orders([{"id": 1, "petId": 3, "quantity": 2}, {"id": 2, "status": "cancelled"}])
    shipped = store.ship_order(1, NOW)
    assert shipped.changed and shipped.order == store.get_order(1)
    assert shipped.order is not None and shipped.order["shipDate"] == NOW
    refused = store.ship_order(2, NOW)
    assert not refused.changed and refused.order == store.get_order(2)
    assert store.complete_order(1).order == {**store.get_order(1), "complete": True}
