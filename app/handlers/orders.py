"""Handlers of the operations tagged `orders`."""

from __future__ import annotations

from typing import Any

import flask

from app import __version__, listing, orders
from app.handlers import no_content, services


def list_orders() -> flask.Response:
    """GET /store/orders: every order in the store, or 304 when the client's copy, named
    by If-None-Match, is current."""
    found = services()
    if_none_match = flask.request.headers.get("If-None-Match")
    if if_none_match:
        tag = listing.etag(__version__, found.store.revision())
        if listing.matches(if_none_match, tag):
            response = flask.Response(status=304, headers={"ETag": tag})
            del response.headers["Content-Type"]
            return response
    revision, body = found.lists.current(found.store)
    return flask.Response(body, 200, mimetype="application/json",
                          headers={"ETag": listing.etag(__version__, revision)})


def cancel_order(orderId: int, token_info: dict[str, Any]) -> flask.Response:
    """DELETE /store/orders/{orderId}: cancel a pending order."""
    orders.cancel(services().store, orderId, key_id=token_info["key_id"])
    return no_content()
