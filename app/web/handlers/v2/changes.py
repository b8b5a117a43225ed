"""Handlers of the v2 operations tagged `changes`: the feed of changed orders (D26)."""

from __future__ import annotations

import orjson
from connexion.lifecycle import ConnexionResponse

from app.core import feed
from app.web.handlers import json_response, request_exchange, services


def list_order_changes(after: str | None = None, limit: int = feed.LIMIT_DEFAULT,
                       wait: int = 0) -> ConnexionResponse:
    """GET /store/order-changes: the orders changed after the cursor. An empty page of a
    request that asked to wait is held by the long polls layer until a change."""
    page = feed.changes(services().store, after, limit)
    body = b'{"orders":[%s],"next":%s}' % (",".join(page.orders).encode(),
                                           orjson.dumps(page.next))
    if wait and not page.orders:
        request_exchange().wait = (page.revision, float(wait))
    return json_response(200, body)
