"""Handlers of the operations tagged `orders`."""

from __future__ import annotations

import flask

from app.core import orders
from app.web.conditional import kept, list_etag
from app.web.direct import NO_CONTENT, Answer, Call, direct
from app.web.handlers import services


@kept(revision_tag=list_etag)
def list_orders() -> flask.Response:
    """GET /store/orders: every order in the store, with the list's ETag. (A matching
    If-None-Match is answered 304 before the request gets here: conditional.AnswerCache.)"""
    found = services()
    revision, body = found.lists.current(found.store)
    return flask.Response(body, 200, mimetype="application/json",
                          headers={"ETag": list_etag(revision)})


@direct
def cancel_order(call: Call) -> Answer:
    """DELETE /store/orders/{orderId}: cancel a pending order (answered without Flask,
    app/web/direct.py)."""
    orders.cancel(call.services.store, call.order_id(), key_id=call.token_info["key_id"])
    return NO_CONTENT
