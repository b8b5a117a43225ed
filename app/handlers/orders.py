"""Handlers of the operations tagged `orders`."""

from __future__ import annotations

from typing import Any

import flask

from app import __version__, orders
from app.handlers import no_content, services


def _etag(revision: int) -> str:
    """The list's weak ETag: the service's version (the encoding may change with it) and
    the orders' revision."""
    return f'W/"{__version__}-{revision}"'


def _matches(if_none_match: str, tag: str) -> bool:
    """Whether an If-None-Match value matches tag, by RFC 9110's weak comparison."""
    opaque = tag.removeprefix("W/")
    return any(candidate == "*" or candidate.removeprefix("W/") == opaque
               for candidate in (c.strip() for c in if_none_match.split(",")))


def list_orders() -> flask.Response:
    """GET /store/orders: every order in the store, or 304 when the client's copy, named
    by If-None-Match, is current."""
    found = services()
    if_none_match = flask.request.headers.get("If-None-Match")
    if if_none_match:
        tag = _etag(found.store.revision())
        if _matches(if_none_match, tag):
            return no_content(304, {"ETag": tag})
    revision, body = found.lists.current(found.store)
    return flask.Response(body, 200, mimetype="application/json",
                          headers={"ETag": _etag(revision)})


def cancel_order(orderId: int, token_info: dict[str, Any]) -> flask.Response:
    """DELETE /store/orders/{orderId}: cancel a pending order."""
    orders.cancel(services().store, orderId, key_id=token_info["key_id"])
    return no_content()
