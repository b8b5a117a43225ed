"""Handlers of the operations tagged `orders`."""

from __future__ import annotations

import flask

from app.core import orders
from app.web.conditional import kept, list_etag, tagged_json
from app.web.direct import NO_CONTENT, Answer, Call, direct
from app.web.handlers import services


@kept(revision_tag=list_etag)
def list_orders() -> flask.Response:
    """GET /store/orders: every order in the store, with the list's ETag, or 304 when
    If-None-Match matches it (conditional.AnswerCache answers that 304 first, from the
    revision alone)."""
    found = services()
    revision, body = found.lists.current(found.store)
    return tagged_json(body, tag=list_etag(revision))


@direct
def cancel_order(call: Call) -> Answer:
    """DELETE /store/orders/{orderId}: cancel a pending order (answered without Flask,
    app/web/direct.py)."""
    orders.cancel(call.services.store, call.order_id(), key_id=call.token_info["key_id"])
    return NO_CONTENT
