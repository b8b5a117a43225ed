"""The order rules, as plain functions over a store.

pending --cancel--> cancelled (204; again 204 when already cancelled, DESIGN.md D3)
shipped --cancel--> refused, unchanged (409)
pending --ship----> shipped (the CLI's `orders ship`); a cancelled order cannot ship.

Nothing here knows HTTP: it raises the domain's exceptions from app.core.errors.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from app.core.errors import OrderAlreadyShipped, OrderNotFound
from app.core.storage import Store
from app.core.storage.records import ORDER_STATUSES

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
ORDER_FIELDS = ("id", "petId", "quantity", "shipDate", "complete", "status")


def utc_now() -> str:
    """The current time as an ISO 8601 UTC timestamp, the form every stored time takes."""
    return format_time(dt.datetime.now(dt.UTC))


def format_time(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def get(store: Store, order_id: int) -> dict[str, Any]:
    """The order with this id; raises OrderNotFound."""
    order = store.get_order(order_id)
    if order is None:
        raise OrderNotFound(order_id)
    return order


def cancel(store: Store, order_id: int, key_id: int | None) -> None:
    """Cancel a pending order; an already-cancelled one is left as it is.

    Raises OrderNotFound for an unknown id and OrderAlreadyShipped for a shipped order.
    """
    result = store.cancel_order(order_id, key_id, utc_now())
    if result.status is None:
        raise OrderNotFound(order_id)
    if result.status == "shipped":
        raise OrderAlreadyShipped(order_id)


@dataclass(frozen=True)
class ShipResult:
    """What `orders ship` did to one order: shipped, or refused with a reason."""

    order_id: int
    shipped: bool
    message: str


def ship(store: Store, order_id: int, ship_date: str) -> ShipResult:
    """Mark a pending order shipped on ship_date; refuse a cancelled or unknown one."""
    result = store.ship_order(order_id, ship_date)
    if result.status is None:
        return ShipResult(order_id, False, f"order {order_id}: no such order")
    if result.status == "cancelled":
        return ShipResult(order_id, False, f"order {order_id}: cancelled, so it cannot ship")
    if not result.changed:
        return ShipResult(order_id, True, f"order {order_id}: already shipped, left as it was")
    return ShipResult(order_id, True, f"order {order_id}: shipped on {ship_date}")


class InvalidOrder(ValueError):
    """A row to import is not a valid order; the message says which field and why."""


def parse_time(text: Any, field: str = "shipDate") -> str:
    """An ISO 8601 date-time with a time-zone offset, normalised to UTC."""
    if not isinstance(text, str):
        raise InvalidOrder(f"{field} must be a date-time string, got {text!r}")
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidOrder(
            f"{field} must be an ISO 8601 date-time such as 2026-05-01T10:00:00Z, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        raise InvalidOrder(f"{field} needs a time-zone offset (Z or +01:00), got {text!r}")
    try:
        return format_time(moment)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before the year 1 in UTC
        raise InvalidOrder(f"{field} must fall between the years 1 and 9999 in UTC, "
                           f"got {text!r}") from None


def _integer(row: dict[str, Any], field: str, low: int, high: int) -> int | None:
    value = row.get(field)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidOrder(f"{field} must be a whole number, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not text.lstrip("-").isascii() or not text.lstrip("-").isdigit():
            raise InvalidOrder(f"{field} must be a whole number, got {value!r}")
        value = int(text)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise InvalidOrder(f"{field} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise InvalidOrder(f"{field} must be between {low} and {high}, got {value}")
    return value


def _boolean(value: Any) -> bool:
    if value is None or value == "":
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false", "1", "0"}:
        return value.strip().lower() in {"true", "1"}
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidOrder(f"complete must be true or false, got {value!r}")


def order_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """Validate one row to import (API field names) and return it as an order to store.

    id is optional (the store assigns one); status defaults to pending; shipDate needs a
    time-zone offset. Unknown fields are refused, so that a misspelt column is not lost.
    """
    if not isinstance(row, dict):
        raise InvalidOrder(f"each order must be an object, got {type(row).__name__}")
    unknown = sorted(set(row) - set(ORDER_FIELDS))
    if unknown:
        raise InvalidOrder(
            f"unknown field(s) {', '.join(unknown)}; the fields are {', '.join(ORDER_FIELDS)}"
        )
    order: dict[str, Any] = {}
    order_id = _integer(row, "id", 1, INT64_MAX)
    if order_id is not None:
        order["id"] = order_id
    pet_id = _integer(row, "petId", INT64_MIN, INT64_MAX)
    if pet_id is not None:
        order["petId"] = pet_id
    quantity = _integer(row, "quantity", 1, INT32_MAX)
    if quantity is not None:
        order["quantity"] = quantity
    if row.get("shipDate") not in (None, ""):
        order["shipDate"] = parse_time(row["shipDate"])
    order["complete"] = _boolean(row.get("complete"))
    status = row.get("status") or "pending"
    if status not in ORDER_STATUSES:
        raise InvalidOrder(f"status must be one of {', '.join(ORDER_STATUSES)}, got {status!r}")
    order["status"] = status
    return order
