"""The stock an order holds, kept by the database itself on every store (D32-D34): the
state table of a pet's stock under every path that changes an order or a pet (placing,
a replay, cancelling, shipping, completing, withdrawing, restoring, adjusting, a merge patch, an
import, a hand edit in SQL), each checked against the pet as getPet gives it and the
inventory, which must always equal what the orders and pets say when counted anew."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from app.core import feed, pets
from app.core.errors import (
    IdempotencyKeyReused,
    InvalidParameter,
    OutOfStock,
    PetNotFound,
    PetWithdrawn,
    PreconditionFailed,
    StockBelowReserved,
    StockNotTracked,
    StockShortfall,
)
from app.core.storage import Store
from tests.core.storage.conftest import Place

NOW = "2026-11-27T10:00:00Z"


def pet(store: Store, pet_id: int) -> dict[str, Any]:
    found = store.get_versioned_pet(pet_id)
    assert found is not None
    return found[0]


def version(store: Store, pet_id: int) -> int:
    found = store.pet_version(pet_id)
    assert found is not None
    return found


def stock(store: Store, pet_id: int) -> tuple[Any, int, Any, str]:
    """(stock, reserved, available, status) of a pet as getPet gives them."""
    found = pet(store, pet_id)
    return found.get("stock"), found["reserved"], found.get("available"), found["status"]


def order_for(store: Store, pet_id: int, quantity: int, key: str) -> int:
    placed = store.place_order({"petId": pet_id, "quantity": quantity}, 1, key, key, NOW,
                               catalogue_pets_only=True)
    return int(placed.order["id"])


def true(store: Store) -> None:
    """Every reservation equals its pending orders, and the inventory kept equals the one
    counted anew."""
    assert store.reservations_differing() == []
    assert store.inventory() == store.inventory_counted()


@pytest.fixture
def shop(store: Store) -> Store:
    """Pet 1 with 5 units, pet 2 whose stock is not tracked."""
    store.import_pets([{"id": 1, "name": "Rex", "stock": 5, "tags": ["dog"]},
                       {"id": 2, "name": "Tom", "category": "cats"}])
    return store


def test_a_pet_is_given_with_its_members_in_order_and_its_status_derived(shop: Store) -> None:
    assert list(pet(shop, 1)) == ["id", "name", "tags", "photoUrls", "stock", "reserved",
                                  "available", "status"]
    assert pet(shop, 1) == {"id": 1, "name": "Rex", "tags": ["dog"], "photoUrls": [],
                            "stock": 5, "reserved": 0, "available": 5, "status": "available"}
    assert pet(shop, 2) == {"id": 2, "name": "Tom", "category": "cats", "tags": [],
                            "photoUrls": [], "reserved": 0, "status": "available"}
    # v1's pets stay {id, name} (released 1.0.0)
    assert shop.get_pet(1) == {"id": 1, "name": "Rex"}
    assert shop.list_pets() == [{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}]
    true(shop)


def test_placing_holds_units_and_refuses_more_than_are_available(shop: Store) -> None:
    before, revision = version(shop, 1), shop.revision()
    order_for(shop, 1, 3, "a")
    assert stock(shop, 1) == (5, 3, 2, "available")
    assert version(shop, 1) == before + 1 and shop.revision() > revision
    with pytest.raises(OutOfStock) as refused:
        order_for(shop, 1, 3, "b")
    assert (refused.value.available, refused.value.requested, refused.value.param) == (
        2, 3, "quantity")
    assert "Only 2 units of pet 1 are available" in refused.value.message
    assert shop.count_orders() == 1 and stock(shop, 1) == (5, 3, 2, "available")
    # The refusal kept no key: the same key, corrected, places.
    order_for(shop, 1, 2, "b")
    assert stock(shop, 1) == (5, 5, 0, "pending")
    with pytest.raises(OutOfStock) as none_left:
        order_for(shop, 1, 1, "c")
    assert none_left.value.available == 0 and "No units of pet 1" in none_left.value.message
    true(shop)


def test_a_replay_holds_nothing_more(shop: Store) -> None:
    order_for(shop, 1, 2, "a")
    held = version(shop, 1)
    order_for(shop, 1, 2, "a")
    assert stock(shop, 1) == (5, 2, 3, "available") and version(shop, 1) == held
    # Even once the pet is sold out, the key's replay answers as first answered.
    order_for(shop, 1, 3, "b")
    again = shop.place_order({"petId": 1, "quantity": 2}, 1, "a", "a", NOW,
                             catalogue_pets_only=True)
    assert again.replayed and again.order["quantity"] == 2
    true(shop)


def test_an_untracked_pet_keeps_its_reservation_and_never_refuses(shop: Store) -> None:
    for key in "abc":
        order_for(shop, 2, 10_000, key)
    assert stock(shop, 2) == (None, 30_000, None, "available")
    true(shop)


def test_cancelling_releases_shipping_takes_out_completing_changes_nothing(
        shop: Store) -> None:
    first, second = order_for(shop, 1, 2, "a"), order_for(shop, 1, 3, "b")
    assert stock(shop, 1) == (5, 5, 0, "pending")
    assert shop.cancel_order(first, None, NOW).changed
    assert stock(shop, 1) == (5, 3, 2, "available")
    assert not shop.cancel_order(first, None, NOW).changed  # again: nothing
    assert stock(shop, 1) == (5, 3, 2, "available")
    assert shop.ship_order(second, NOW).changed
    assert stock(shop, 1) == (2, 0, 2, "available")
    held = version(shop, 1)
    assert shop.complete_order(second).changed
    assert stock(shop, 1) == (2, 0, 2, "available") and version(shop, 1) == held
    assert shop.inventory() == {"pending_units": 0, "shipped_units": 3, "cancelled_units": 2,
                                "stock_on_hand": 2, "stock_reserved": 0,
                                "stock_available": 2}
    true(shop)


def test_a_sold_out_pet_is_sold_once_nothing_is_held(shop: Store) -> None:
    shop.ship_order(order_for(shop, 1, 5, "a"), NOW)
    assert stock(shop, 1) == (0, 0, 0, "sold")
    true(shop)


def test_a_withdrawn_pet_takes_no_order_and_its_pending_ones_still_move(shop: Store) -> None:
    first, second = order_for(shop, 1, 1, "a"), order_for(shop, 1, 1, "b")
    assert shop.withdraw_pet(1)
    held = version(shop, 1)
    assert shop.withdraw_pet(1) and version(shop, 1) == held  # again: nothing
    assert not shop.withdraw_pet(99)
    # One figure of availability (D37): none to order, its stock and what is held shown.
    assert stock(shop, 1) == (5, 2, 0, "withdrawn")
    assert [orjson.loads(text)["available"] for text, _ in
            shop.page_pets(pets.pet_query(["withdrawn"]), None, 10)] == [0]
    assert shop.withdraw_pet(2)  # not tracked: none to order either, where "any" was
    assert {k: pet(shop, 2).get(k) for k in ("stock", "reserved", "available")} == {
        "stock": None, "reserved": 0, "available": 0}
    with pytest.raises(PetWithdrawn) as refused:
        order_for(shop, 1, 1, "c")
    assert refused.value.param == "petId"
    assert shop.inventory()["stock_available"] == 0  # withdrawn pets are not available
    assert shop.ship_order(first, NOW).changed and shop.cancel_order(second, None, NOW).changed
    assert stock(shop, 1) == (4, 0, 0, "withdrawn")
    # Placing without the catalogue's rule refuses a withdrawn pet too.
    with pytest.raises(PetWithdrawn):
        shop.place_order({"petId": 1, "quantity": 1}, 1, "d", "d", NOW)
    true(shop)


def test_a_restored_pet_takes_orders_with_its_stock_as_it_is_now(shop: Store) -> None:
    first, second = order_for(shop, 1, 1, "a"), order_for(shop, 1, 2, "b")
    assert shop.withdraw_pet(1) and shop.withdraw_pet(2)
    # While withdrawn, its orders move and its stock is received as ever.
    assert shop.ship_order(first, NOW).changed
    shop.adjust_stock(1, 3, 1, "k", "fp", NOW)
    assert stock(shop, 1) == (7, 2, 0, "withdrawn")
    before = (version(shop, 1), shop.revision())
    assert shop.restore_pet(1)
    # Back, what is available follows from the stock and the orders as they are now.
    assert stock(shop, 1) == (7, 2, 5, "available")
    assert version(shop, 1) > before[0] and shop.revision() > before[1]
    assert shop.inventory()["stock_available"] == 5
    true(shop)
    held = version(shop, 1)
    assert not shop.restore_pet(1) and version(shop, 1) == held  # not withdrawn: nothing
    with pytest.raises(PetNotFound):
        shop.restore_pet(99)
    # It takes orders again, up to what is available; the untracked one takes any.
    order_for(shop, 1, 5, "c")
    with pytest.raises(OutOfStock):
        order_for(shop, 1, 1, "d")
    assert stock(shop, 1) == (7, 7, 0, "pending")
    assert shop.restore_pet(2)
    assert {k: pet(shop, 2).get(k) for k in ("stock", "reserved", "available", "status")} == {
        "stock": None, "reserved": 0, "available": None, "status": "available"}
    order_for(shop, 2, 1000, "e")
    assert shop.cancel_order(second, None, NOW).changed
    true(shop)


def test_adjusting_the_stock_is_safe_to_retry_and_never_below_what_is_held(
        shop: Store) -> None:
    order_for(shop, 1, 4, "a")
    received = shop.adjust_stock(1, 3, 1, "k1", "fp1", NOW)
    assert received.pet["stock"] == 8 and not received.replayed
    again = shop.adjust_stock(1, 3, 1, "k1", "fp1", NOW)
    assert again.replayed and again.pet == received.pet and again.version == received.version
    assert stock(shop, 1) == (8, 4, 4, "available")
    with pytest.raises(IdempotencyKeyReused):
        shop.adjust_stock(1, 2, 1, "k1", "other", NOW)
    with pytest.raises(StockBelowReserved) as below:
        shop.adjust_stock(1, -5, 1, "k2", "fp2", NOW)
    assert (below.value.stock, below.value.reserved, below.value.param) == (3, 4, "delta")
    with pytest.raises(StockNotTracked):
        shop.adjust_stock(2, 1, 1, "k2", "fp2", NOW)
    with pytest.raises(PetNotFound):
        shop.adjust_stock(9, 1, 1, "k2", "fp2", NOW)
    with pytest.raises(InvalidParameter) as too_many:
        shop.adjust_stock(1, 1_000_000_000, 1, "k2", "fp2", NOW)
    assert too_many.value.name == "delta"
    # Refusals kept no key: k2 writes off now.
    assert shop.adjust_stock(1, -4, 1, "k2", "fp2", NOW).pet["available"] == 0
    assert stock(shop, 1) == (4, 4, 0, "pending")
    true(shop)


def test_a_key_that_placed_an_order_cannot_write_a_pet(shop: Store) -> None:
    order_for(shop, 1, 1, "same")
    with pytest.raises(IdempotencyKeyReused):
        shop.adjust_stock(1, 1, 1, "same", "adjust fp", NOW)
    with pytest.raises(IdempotencyKeyReused):
        shop.add_pet({"name": "Kit"}, 1, "same", "add fp", NOW)


def test_adding_a_pet_under_a_key_adds_once(store: Store) -> None:
    first = store.add_pet({"name": "Kit", "tags": ["cat", "small"], "stock": 2,
                           "photoUrls": ["https://example.com/kit.jpg"]}, 1, "k", "fp", NOW)
    assert first.pet == {"id": 1, "name": "Kit", "tags": ["cat", "small"],
                         "photoUrls": ["https://example.com/kit.jpg"], "stock": 2,
                         "reserved": 0, "available": 2, "status": "available"}
    again = store.add_pet({"name": "Kit"}, 1, "k", "fp", NOW)
    assert again.replayed and again.pet == first.pet and again.version == first.version
    assert store.add_pet({"name": "Kat"}, 2, "k", "fp", NOW).pet["id"] == 2
    with pytest.raises(IdempotencyKeyReused):
        store.add_pet({"name": "Kot"}, 1, "k", "other", NOW)
    # and a key of a pet write places no order
    with pytest.raises(IdempotencyKeyReused):
        store.place_order({"petId": 1, "quantity": 1}, 1, "k", "order fp", NOW)
    true(store)


def test_a_merge_patch_sets_the_stock_but_never_below_what_is_held(shop: Store) -> None:
    order_for(shop, 1, 3, "a")
    current = version(shop, 1)
    with pytest.raises(StockBelowReserved) as below:
        shop.update_pet(1, {"stock": 2})
    assert (below.value.stock, below.value.reserved, below.value.param) == (2, 3, "stock")
    assert version(shop, 1) == current
    with pytest.raises(PreconditionFailed) as stale:
        shop.update_pet(1, {"stock": 9}, version=current - 1)
    assert stale.value.version == current
    written = shop.update_pet(1, {"stock": 3, "category": "dogs"}, version=current)
    assert written.version == current + 1 and written.pet["status"] == "pending"
    # Not tracked any more: the units stay held, and nothing is refused for stock.
    untracked = shop.update_pet(1, {"stock": None, "category": None, "tags": []})
    assert untracked.pet == {"id": 1, "name": "Rex", "tags": [], "photoUrls": [],
                             "reserved": 3, "status": "available"}
    order_for(shop, 1, 100, "b")
    with pytest.raises(StockBelowReserved):
        shop.update_pet(1, {"stock": 50})
    assert shop.update_pet(1, {"stock": 103}).pet["status"] == "pending"
    with pytest.raises(PetNotFound):
        shop.update_pet(9, {"name": "Nobody"})
    true(shop)


def test_every_change_raises_the_pets_version_and_the_revision(shop: Store,
                                                                place: Place) -> None:
    seen = [(version(shop, 1), shop.revision())]

    def moved() -> None:
        now = (version(shop, 1), shop.revision())
        assert now[0] > seen[-1][0] and now[1] > seen[-1][1]
        seen.append(now)

    shop.update_pet(1, {"name": "Rex II"})
    moved()
    shop.adjust_stock(1, 1, 1, "k", "fp", NOW)
    moved()
    order_id = order_for(shop, 1, 1, "a")
    moved()
    shop.cancel_order(order_id, None, NOW)
    moved()
    shop.withdraw_pet(1)
    moved()
    shop.restore_pet(1)
    moved()
    shop.withdraw_pet(1)
    moved()
    place.sql("UPDATE pets SET name = 'Rex III' WHERE id = 1")  # a hand edit
    moved()
    shop.import_pets([{"id": 1, "name": "Rex IV", "stock": 9}], upsert=True)
    moved()
    assert pet(shop, 1)["status"] == "withdrawn"  # an upsert leaves the withdrawal be
    true(shop)


def test_imported_orders_hold_and_an_import_that_oversells_fails_whole(shop: Store) -> None:
    shop.import_orders([{"id": 1, "petId": 1, "quantity": 2},
                        {"id": 2, "petId": 1, "quantity": 1, "status": "shipped"},
                        {"id": 3, "petId": 1, "quantity": 1, "status": "cancelled"},
                        {"id": 4, "petId": 2, "quantity": 7}])
    assert stock(shop, 1) == (5, 2, 3, "available") and stock(shop, 2)[1] == 7
    with pytest.raises(StockShortfall) as short:
        shop.import_orders([{"id": 5, "petId": 2, "quantity": 1},
                            {"id": 6, "petId": 1, "quantity": 2},
                            {"id": 7, "petId": 1, "quantity": 3}])
    assert (short.value.pet_id, short.value.shortfall) == (1, 2)
    assert "2 units of pet 1" in short.value.message
    assert shop.count_orders() == 4 and stock(shop, 1) == (5, 2, 3, "available")
    # An upsert that replaces a pending order releases what it held first.
    shop.import_orders([{"id": 1, "petId": 1, "quantity": 5}], upsert=True)
    assert stock(shop, 1) == (5, 5, 0, "pending")
    shop.import_orders([{"id": 1, "petId": 1, "quantity": 5, "status": "shipped"}],
                       upsert=True)
    assert stock(shop, 1) == (0, 0, 0, "sold")
    # An upsert judged as a whole: the order that releases comes after the one that holds.
    shop.update_pet(1, {"stock": 3})
    shop.import_orders([{"id": 8, "petId": 1, "quantity": 3}])
    shop.import_orders([{"id": 9, "petId": 1, "quantity": 3},
                        {"id": 8, "petId": 1, "quantity": 3, "status": "cancelled"}],
                       upsert=True)
    assert stock(shop, 1) == (3, 3, 0, "pending")
    true(shop)


def test_many_pending_orders_of_one_pet_import_in_one_statement(store: Store) -> None:
    store.import_pets([{"id": 1, "name": "Rex", "stock": 20_000}])
    store.import_orders({"petId": 1, "quantity": 1} for _ in range(20_000))
    assert stock(store, 1) == (20_000, 20_000, 0, "pending")
    true(store)


def test_pets_imported_after_their_orders_hold_them_and_a_stock_below_fails(
        store: Store) -> None:
    store.import_orders([{"id": 1, "petId": 3, "quantity": 4},
                         {"id": 2, "petId": 3, "quantity": 2, "status": "cancelled"}])
    with pytest.raises(StockBelowReserved) as below:
        store.import_pets([{"id": 4, "name": "Ok"}, {"id": 3, "name": "Rex", "stock": 3}])
    assert (below.value.pet_id, below.value.stock, below.value.reserved) == (3, 3, 4)
    assert store.list_pets() == []
    store.import_pets([{"id": 3, "name": "Rex", "stock": 4}])
    assert stock(store, 3) == (4, 4, 0, "pending")
    true(store)


def test_a_hand_edit_of_an_order_keeps_the_reservation_true(shop: Store, place: Place) -> None:
    first, second = place_two(shop)
    place.sql(f"UPDATE orders SET status = 'cancelled' WHERE id = {first}")
    assert stock(shop, 1) == (5, 1, 4, "available")
    place.sql(f"UPDATE orders SET quantity = 4 WHERE id = {second}")
    assert stock(shop, 1) == (5, 4, 1, "available")
    place.sql(f"UPDATE orders SET pet_id = 2 WHERE id = {second}")
    assert stock(shop, 1) == (5, 0, 5, "available") and stock(shop, 2)[1] == 4
    place.sql(f"DELETE FROM orders WHERE id = {second}")
    assert stock(shop, 2)[1] == 0
    place.sql(f"UPDATE orders SET status = 'pending' WHERE id = {first}")
    assert stock(shop, 1) == (5, 2, 3, "available")
    place.sql(f"UPDATE orders SET status = 'shipped' WHERE id = {first}")
    assert stock(shop, 1) == (3, 0, 3, "available")
    place.sql(f"UPDATE orders SET status = 'pending' WHERE id = {first}")  # put back
    assert stock(shop, 1) == (5, 2, 3, "available")
    # and a hand edit that would oversell is refused by the database
    with pytest.raises(Exception, match="pets_stock_covers_reserved"):
        place.sql("INSERT INTO orders (id, pet_id, quantity) VALUES (99, 1, 4)")
    assert shop.get_order(99) is None
    true(shop)


def place_two(shop: Store) -> tuple[int, int]:
    return order_for(shop, 1, 2, "a"), order_for(shop, 1, 1, "b")


def test_a_hand_edit_of_a_reservation_is_found_by_the_check(shop: Store,
                                                            place: Place) -> None:
    order_for(shop, 1, 2, "a")
    place.sql("UPDATE pets SET reserved = 1 WHERE id = 1")
    assert shop.reservations_differing() == [(1, 1, 2)]
    checked = pets.check(shop)
    assert not checked.true and checked.reservations == [(1, 1, 2)]
    assert ("stock", "reserved", 1, 2) in checked.figures


def test_the_inventory_is_one_moment_s_figures(shop: Store) -> None:
    assert pets.inventory(shop) == {"orders": {"pending": 0, "shipped": 0, "cancelled": 0},
                                    "stock": {"onHand": 5, "reserved": 0, "available": 5}}
    order_for(shop, 1, 2, "a")
    order_for(shop, 2, 4, "b")
    shop.ship_order(order_for(shop, 1, 1, "c"), NOW)
    shop.cancel_order(order_for(shop, 2, 3, "d"), None, NOW)
    assert pets.inventory(shop) == {"orders": {"pending": 6, "shipped": 1, "cancelled": 3},
                                    "stock": {"onHand": 4, "reserved": 2, "available": 2}}
    true(shop)


def test_the_migration_counts_what_orders_already_held(place: Place) -> None:
    place.at_schema(9, "INSERT INTO pets VALUES (1, 'Rex')",
                    "INSERT INTO orders (id, pet_id, quantity, status) VALUES "
                    "(1, 1, 2, 'pending'), (2, 1, 3, 'pending'), (3, 1, 4, 'shipped')")
    store = place.open()
    try:
        assert stock(store, 1) == (None, 5, None, "available")
        assert pets.inventory(store)["orders"] == {"pending": 5, "shipped": 4,
                                                   "cancelled": 0}
        true(store)
    finally:
        store.dispose()


def test_a_pet_s_change_puts_nothing_in_the_feed_of_orders(shop: Store) -> None:
    """A pet's change raises the revision (answers kept about pets refresh) but changes no
    order: the feed and the webhooks' reads find nothing new, and the cursor stays good."""
    first = feed.changes(shop)
    shop.update_pet(1, {"name": "Rex II"})
    shop.adjust_stock(1, 2, 1, "k", "fp", NOW)
    shop.withdraw_pet(2)
    shop.import_pets([{"id": 3, "name": "Kit", "stock": 1}])
    later = feed.changes(shop, first.next)
    assert later.items == [] and later.next == first.next
    assert later.revision > first.revision
    assert [change.of for change in shop.changes_after((-1, "order", 0), 10)] == ["pet"] * 3
    order_id = order_for(shop, 3, 1, "a")  # an order's change is there, once
    changed = feed.changes(shop, first.next)
    assert [orjson.loads(text)["id"] for text in changed.items] == [order_id]


def test_the_list_filters_on_every_store(store: Store) -> None:
    store.import_pets([
        {"id": 1, "name": "Rex", "category": "dogs", "tags": ["big", "brown"], "stock": 1},
        {"id": 2, "name": "Tom", "category": "cats", "tags": ["small"]},
        {"id": 3, "name": "Kit", "category": "cats", "tags": ["small", "brown"], "stock": 0},
        {"id": 4, "name": "Old", "tags": ["big"]},
    ])
    store.withdraw_pet(4)

    def listed(after: int | None = None, limit: int = 10, **given: Any) -> list[int]:
        return [pet_id for _, pet_id in store.page_pets(pets.pet_query(**given), after, limit)]

    assert listed() == [1, 2, 3]
    assert listed(after=1, limit=1) == [2]
    assert listed(status=["withdrawn", "sold"]) == [3, 4]
    assert listed(tag=["brown"]) == [1, 3]
    assert listed(tag=["big", "small"]) == [1, 2, 3]
    assert listed(tag=["big"], status=["withdrawn"]) == [4]
    assert listed(category="cats", tag=["brown"]) == [3]
    order_for(store, 1, 1, "a")
    assert listed(status=["pending"]) == [1]
    assert [orjson.loads(text) for text, _ in store.page_pets(
        pets.pet_query(category="dogs"), None, 10)] == [pet(store, 1)]


def test_statements_of_many_orders_keep_every_reservation(shop: Store, place: Place) -> None:
    first, *_ = [order_for(shop, 1, 1, key) for key in "abc"]
    for key in "de":
        order_for(shop, 2, 2, key)
    place.sql(f"UPDATE orders SET status = 'shipped' WHERE pet_id = 1 AND id <> {first}")
    assert stock(shop, 1) == (3, 1, 2, "available")
    place.sql("UPDATE orders SET status = 'cancelled' WHERE status = 'pending'")
    assert stock(shop, 1) == (3, 0, 3, "available") and stock(shop, 2)[1] == 0
    place.sql("UPDATE orders SET status = 'pending' WHERE status = 'cancelled'")
    assert stock(shop, 1) == (3, 1, 2, "available") and stock(shop, 2)[1] == 4
    # Pet 1 would hold pet 2's 4 units, more than its 3: the whole statement is refused.
    with pytest.raises(Exception, match="pets_stock_covers_reserved"):
        place.sql("UPDATE orders SET pet_id = CASE pet_id WHEN 1 THEN 2 ELSE 1 END "
                  "WHERE status = 'pending'")
    assert stock(shop, 1) == (3, 1, 2, "available") and stock(shop, 2)[1] == 4
    place.sql("UPDATE orders SET quantity = quantity + 1 WHERE status = 'pending'")
    assert stock(shop, 1) == (3, 2, 1, "available") and stock(shop, 2)[1] == 6
    place.sql("DELETE FROM orders WHERE status = 'pending'")
    assert stock(shop, 1) == (3, 0, 3, "available") and stock(shop, 2)[1] == 0
    true(shop)
