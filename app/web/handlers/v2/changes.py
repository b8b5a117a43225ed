"""Handlers of the v2 operations tagged `changes`: the feed of changed orders (D26)."""

from __future__ import annotations

import time

import orjson
from connexion.context import receive as current_receive
from connexion.lifecycle import ConnexionResponse
from starlette.concurrency import run_in_threadpool

from app.core import feed
from app.web.handlers import json_response, request_exchange, services


async def list_order_changes(after: str | None = None, limit: int = feed.LIMIT_DEFAULT,
                             wait: int = 0) -> ConnexionResponse:
    """GET /store/order-changes: the orders changed after the cursor. The one `async def`
    handler (D26, D42): an empty page of a request that asked to wait is held on the event
    loop until a change (app/web/longpoll.py), without a thread; the store is read in the
    thread pool, as every handler reads it."""
    store = services().store
    waits = request_exchange().waits
    deadline = time.monotonic() + wait
    while True:
        page = await run_in_threadpool(feed.changes, store, after, limit)
        left = deadline - time.monotonic()
        if page.orders or waits is None or left <= 0:
            break
        # False: no change in time, or no place to wait; None: the client left.
        if not await waits.changed(page.revision, left, current_receive):
            break
    body = b'{"orders":[%s],"next":%s}' % (",".join(page.orders).encode(),
                                           orjson.dumps(page.next))
    return json_response(200, body)
