"""Handlers of the operations tagged `orders`."""

from __future__ import annotations

from typing import Any

import flask

from app import orders
from app.handlers import no_content, services


def list_orders() -> tuple[list[dict[str, Any]], int]:
    """GET /store/orders: every order in the store."""
    return orders.list_all(services().store), 200


def cancel_order(orderId: int, token_info: dict[str, Any]) -> flask.Response:
    """DELETE /store/orders/{orderId}: cancel a pending order."""
    orders.cancel(services().store, orderId, key_id=token_info["key_id"])
    return no_content()
