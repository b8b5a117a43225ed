"""The home page's days over each store (day_statements.py): every path
that places or ships an order (the API's placing, alone and many at once, an import, a
move, a hand edit) moves each UTC day's orders placed and units shipped and the count of
pending orders, in its own transaction; a cancel takes nothing back; the migration fills
the days from the orders held; the low-stock threshold and list."""

from __future__ import annotations

import datetime as dt
from concurrent.futures import ThreadPoolExecutor

import pytest

from app.core import figures, orders
from app.core.errors import InvalidParameter, OutOfStock
from app.core.storage import Store
from tests.core.storage.conftest import Place

NOW = "2026-11-24T10:00:00Z"


def _today() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


def _days(store: Store) -> dict[str, tuple[int, int, int]]:
    """day -> (orders placed, orders shipped, units shipped)."""
    return {day: (placed, orders, units)
            for day, placed, orders, units in store.order_days("0001-01-01", "9999-12-31")}


def _pending(store: Store) -> int:
    return store.order_summary("0001", "0002")["pending"]


def test_placing_shipping_and_cancelling_move_the_days(store: Store) -> None:
    placing = orders.Placing()
    first = placing.place(store, {"petId": 1, "quantity": 2}, 0, "k1").order
    second = placing.place(store, {"petId": 1, "quantity": 3}, 0, "k2").order
    third = placing.place(store, {"petId": 2, "quantity": 4}, 0, "k3").order
    placing.place(store, {"petId": 1, "quantity": 2}, 0, "k1")  # a replay places nothing
    assert _days(store) == {_today(): (3, 0, 0)}
    assert _pending(store) == 3
    orders.ship(store, first["id"], "2026-11-20T23:59:59Z")
    orders.ship(store, second["id"], "2026-11-21T23:00:00Z")
    orders.cancel(store, third["id"], None)
    orders.complete(store, first["id"])  # moves nothing the days count
    assert _days(store) == {_today(): (3, 0, 0), "2026-11-20": (0, 1, 2), "2026-11-21": (0, 1, 3)}
    assert _pending(store) == 0
    assert store.order_days("2026-11-21", "2026-11-21") == [("2026-11-21", 0, 1, 3)]


def test_an_import_counts_as_placed_today_and_its_shipped_on_their_day(store: Store) -> None:
    store.import_orders([
        {"id": 1, "petId": 1, "quantity": 2, "status": "pending"},
        {"id": 2, "petId": 1, "quantity": 5, "status": "shipped",
         "shipDate": "2026-10-01T08:00:00Z"},
        {"id": 3, "petId": 1, "quantity": 7, "status": "cancelled"},
        {"id": 4, "petId": 1, "status": "shipped", "shipDate": "2026-10-01T09:00:00Z"},
    ])
    assert _days(store) == {_today(): (4, 0, 0), "2026-10-01": (0, 2, 5)}
    assert _pending(store) == 1
    # An upsert that moves a shipped order's day and quantity moves its units, and one that
    # puts a shipped order back to pending takes them back.
    store.import_orders([
        {"id": 2, "petId": 1, "quantity": 6, "status": "shipped",
         "shipDate": "2026-10-02T08:00:00Z"},
        {"id": 1, "petId": 1, "quantity": 2, "status": "shipped",
         "shipDate": "2026-10-02T09:00:00Z"},
    ], upsert=True)
    assert _days(store) == {_today(): (4, 0, 0), "2026-10-01": (0, 1, 0),
                            "2026-10-02": (0, 2, 8)}
    assert _pending(store) == 0


def test_many_placings_at_once_count_each(store: Store) -> None:
    """PostgreSQL gathers concurrent placings into one statement (group commit): each of
    its orders counts."""
    placing = orders.Placing()

    def place(n: int) -> None:
        placing.place(store, {"petId": 1, "quantity": 1}, 0, f"key-{n}")
        store.close()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(place, range(40)))
    assert _days(store) == {_today(): (40, 0, 0)}
    assert _pending(store) == 40


def test_a_hand_edit_moves_the_days_too(store: Store, place: Place) -> None:
    store.import_orders([{"id": 1, "petId": 1, "quantity": 3, "status": "shipped",
                          "shipDate": "2026-09-09T10:00:00Z"},
                         {"id": 2, "petId": 1, "quantity": 1, "status": "pending"}])
    place.sql("UPDATE orders SET ship_date = '2026-09-10T10:00:00Z' WHERE id = 1")
    place.sql("DELETE FROM orders WHERE id = 2")
    assert _days(store) == {_today(): (2, 0, 0), "2026-09-09": (0, 0, 0),
                            "2026-09-10": (0, 1, 3)}
    assert _pending(store) == 0
    place.sql("DELETE FROM orders WHERE id = 1")
    assert _days(store)["2026-09-10"] == (0, 0, 0)


def test_a_failed_placing_counts_nothing(store: Store) -> None:
    store.import_pets([{"id": 1, "name": "Rex", "stock": 1}])
    placing = orders.Placing()
    with pytest.raises(OutOfStock):
        placing.place(store, {"petId": 1, "quantity": 2}, 0, "k")
    assert _days(store) == {}
    assert _pending(store) == 0


def test_the_migration_fills_the_days_from_the_orders_held(place: Place) -> None:
    today = _today()
    place.at_schema(
        13,
        "INSERT INTO orders (id, pet_id, quantity, ship_date, status) VALUES "
        "(1, 1, 2, NULL, 'pending'), (2, 1, 3, '2026-11-01T10:00:00Z', 'shipped'), "
        "(3, 1, 4, '2026-11-01T23:00:00Z', 'shipped'), (4, 1, 5, NULL, 'cancelled'), "
        "(5, 1, 6, '2026-11-02T01:00:00Z', 'cancelled')",
        # Orders 1 and 2 were placed under idempotency keys still kept; 9 is a pet's key.
        "INSERT INTO idempotency_keys VALUES "
        f"(1, 'a', 'f', 1, '{{\"id\":1,\"complete\":false}}', 1, '{today}T01:00:00Z'), "
        "(1, 'b', 'f', 2, '{\"id\":2,\"complete\":false}', 1, '2026-10-30T01:00:00Z'), "
        f"(1, 'c', 'f', 3, '{{\"id\":3,\"name\":\"Rex\"}}', 1, '{today}T02:00:00Z')")
    store = place.open()
    try:
        assert _days(store) == {today: (1, 0, 0), "2026-10-30": (1, 0, 0),
                                 "2026-11-01": (0, 2, 7)}
        assert _pending(store) == 1
        assert store.low_stock_at() == 5
    finally:
        store.dispose()


def test_the_low_stock_list_follows_the_threshold(store: Store) -> None:
    store.import_pets([{"id": 1, "name": "Rex", "stock": 10}, {"id": 2, "name": "Kit",
                                                               "stock": 3},
                       {"id": 3, "name": "Tom"}, {"id": 4, "name": "Bo", "stock": 0},
                       {"id": 5, "name": "Gone", "stock": 1}])
    store.withdraw_pet(5)
    orders.Placing().place(store, {"petId": 1, "quantity": 6}, 0, "k")  # 4 left
    assert store.low_stock_pets(5, 10) == ([
        figures.LowPet(4, "Bo", 0, 0, 0), figures.LowPet(2, "Kit", 3, 0, 3),
        figures.LowPet(1, "Rex", 10, 6, 4)], 3)
    assert store.low_stock_pets(3, 1) == ([figures.LowPet(4, "Bo", 0, 0, 0)], 2)
    figures.set_low_stock_at(store, " 0 ")
    assert figures.low_stock(store).pets == [figures.LowPet(4, "Bo", 0, 0, 0)]
    for bad in ("", "-1", "1.5", "1e3", "٣", "1000000001", "99999999999"):
        with pytest.raises(InvalidParameter):
            figures.set_low_stock_at(store, bad)
    assert store.low_stock_at() == 0
