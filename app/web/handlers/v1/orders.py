"""Handlers of the operations tagged `orders`."""

from __future__ import annotations

from typing import Any

import flask

from app.core import orders
from app.web.conditional import list_etag
from app.web.handlers import no_content, services


def list_orders() -> flask.Response:
    """GET /store/orders: every order in the store, with the list's ETag. (A matching
    If-None-Match is answered 304 before the request gets here: conditional.py.)"""
    found = services()
    revision, body = found.lists.current(found.store)
    return flask.Response(body, 200, mimetype="application/json",
                          headers={"ETag": list_etag(revision)})


def cancel_order(orderId: int, token_info: dict[str, Any]) -> flask.Response:
    """DELETE /store/orders/{orderId}: cancel a pending order."""
    orders.cancel(services().store, orderId, key_id=token_info["key_id"])
    return no_content()
