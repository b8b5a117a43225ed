"""Handlers of the operations tagged `orders`."""

from __future__ import annotations

from typing import Any

from connexion.lifecycle import ConnexionResponse

from app.core import orders
from app.web.conditional import Tagged, kept, list_etag, tagged_json
from app.web.handlers import no_content, services


@kept
def list_orders() -> Tagged:
    """GET /store/orders: every order in the store, with the list's ETag, or 304 when
    If-None-Match matches it."""
    found = services()
    revision, body = found.lists.current(found.store)
    return tagged_json(body, tag=list_etag(revision))


def cancel_order(orderId: int, token_info: dict[str, Any]) -> ConnexionResponse:
    """DELETE /store/orders/{orderId}: cancel a pending order."""
    orders.cancel(services().store, orderId, key_id=token_info["key_id"])
    return no_content()
