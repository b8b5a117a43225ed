"""The order rules over a fake store: no database, no HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from app.core import orders
from app.core.errors import OrderAlreadyShipped, OrderNotFound
from app.core.storage.records import Transition


class FakeStore:
    """Just enough of the Store Protocol for the rules: orders in a dict."""

    def __init__(self, *rows: dict[str, Any]) -> None:
        self.orders = {row["id"]: dict(row) for row in rows}

    def list_orders(self, status: str | None = None) -> list[dict[str, Any]]:
        return [o for _, o in sorted(self.orders.items()) if status in (None, o["status"])]

    def _move(self, order_id: int, target: str, **changes: Any) -> Transition:
        order = self.orders.get(order_id)
        if order is None:
            return Transition(None, changed=False)
        if order["status"] != "pending":
            return Transition(order["status"], changed=False)
        order.update(status=target, **changes)
        return Transition(target, changed=True)

    def cancel_order(self, order_id: int, key_id: int | None, now: str) -> Transition:
        return self._move(order_id, "cancelled", cancelled_by=key_id, cancelled_at=now)

    def ship_order(self, order_id: int, ship_date: str) -> Transition:
        return self._move(order_id, "shipped", shipDate=ship_date)


@pytest.fixture
def store() -> FakeStore:
    return FakeStore(
        {"id": 1, "status": "pending"},
        {"id": 2, "status": "shipped", "shipDate": "2026-01-01T00:00:00Z"},
        {"id": 3, "status": "cancelled"},
    )


def test_cancel_turns_a_pending_order_into_a_cancelled_one(store: FakeStore) -> None:
    orders.cancel(store, 1, key_id=7)  # type: ignore[arg-type]
    assert store.orders[1]["status"] == "cancelled"
    assert store.orders[1]["cancelled_by"] == 7


def test_cancel_refuses_a_shipped_order_and_leaves_it_unchanged(store: FakeStore) -> None:
    before = dict(store.orders[2])
    with pytest.raises(OrderAlreadyShipped) as info:
        orders.cancel(store, 2, key_id=7)  # type: ignore[arg-type]
    assert info.value.order_id == 2
    assert store.orders[2] == before


def test_cancel_of_a_cancelled_order_succeeds_and_changes_nothing(store: FakeStore) -> None:
    before = dict(store.orders[3])
    orders.cancel(store, 3, key_id=7)  # type: ignore[arg-type]
    assert store.orders[3] == before


def test_cancel_of_an_unknown_order_raises_not_found(store: FakeStore) -> None:
    with pytest.raises(OrderNotFound):
        orders.cancel(store, 99, key_id=7)  # type: ignore[arg-type]


def test_ship_marks_a_pending_order_shipped_on_the_date(store: FakeStore) -> None:
    result = orders.ship(store, 1, "2026-02-02T00:00:00Z")  # type: ignore[arg-type]
    assert result.shipped
    assert store.orders[1]["status"] == "shipped"
    assert store.orders[1]["shipDate"] == "2026-02-02T00:00:00Z"


def test_ship_refuses_a_cancelled_order(store: FakeStore) -> None:
    result = orders.ship(store, 3, "2026-02-02T00:00:00Z")  # type: ignore[arg-type]
    assert not result.shipped
    assert "cancelled" in result.message
    assert store.orders[3]["status"] == "cancelled"


def test_ship_refuses_an_unknown_order(store: FakeStore) -> None:
    result = orders.ship(store, 99, "2026-02-02T00:00:00Z")  # type: ignore[arg-type]
    assert not result.shipped and "no such order" in result.message


def test_ship_leaves_a_shipped_order_and_its_date_alone(store: FakeStore) -> None:
    result = orders.ship(store, 2, "2026-02-02T00:00:00Z")  # type: ignore[arg-type]
    assert result.shipped and "already shipped" in result.message
    assert store.orders[2]["shipDate"] == "2026-01-01T00:00:00Z"


# rows to import -------------------------------------------------------------------------


def test_a_row_gets_pending_and_not_complete_by_default() -> None:
    assert orders.order_from_row({"petId": "5", "quantity": 2}) == {
        "petId": 5, "quantity": 2, "complete": False, "status": "pending",
    }


def test_ship_date_is_normalised_to_utc() -> None:
    row = {"id": 1, "shipDate": "2026-05-01T12:00:00+02:00"}
    assert orders.order_from_row(row)["shipDate"] == "2026-05-01T10:00:00Z"


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"id": 0}, "id must be between 1"),
        ({"id": "abc"}, "id must be a whole number"),
        ({"id": 2**63}, "id must be between"),
        ({"quantity": 0}, "quantity must be between 1"),
        ({"quantity": 1.5}, "quantity must be a whole number"),
        ({"quantity": True}, "quantity must be a whole number"),
        ({"petId": "\u0665"}, "petId must be a whole number"),
        ({"shipDate": "2026-05-01T12:00:00"}, "needs a time-zone offset"),
        ({"shipDate": "tomorrow"}, "ISO 8601"),
        ({"shipDate": "0001-01-01T00:00:00+01:00"}, "between the years 1 and 9999 in UTC"),
        ({"status": "lost"}, "status must be one of"),
        ({"complete": "maybe"}, "complete must be true or false"),
        ({"colour": "red"}, "unknown field(s) colour"),
        ([1, 2], "must be an object"),
    ],
)
def test_a_bad_row_is_refused_with_the_field_and_reason(row: Any, reason: str) -> None:
    with pytest.raises(orders.InvalidOrder, match=reason.replace("(", r"\(").replace(")", r"\)")):
        orders.order_from_row(row)
