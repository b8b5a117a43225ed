"""Handlers of the v2 operations tagged `changes`: the feeds of changed orders (D26) and of
changed pets (D39)."""

from __future__ import annotations

import time

import orjson
from connexion.context import receive as current_receive
from connexion.lifecycle import ConnexionResponse
from starlette.concurrency import run_in_threadpool

from app.core import feed
from app.web.handlers import json_response, request_exchange, services


async def _follow(kind: str, member: bytes, after: str | None, limit: int,
                  wait: int) -> ConnexionResponse:
    """A page of one feed, as `{member: [...], "next": ...}`: an empty page of a request
    that asked to wait is held on the event loop until a change (app/web/longpoll.py),
    without a thread; the store is read in the thread pool, as every handler reads it."""
    store = services().store
    waits = request_exchange().waits
    deadline = time.monotonic() + wait
    while True:
        page = await run_in_threadpool(feed.changes, store, after, limit, kind)
        left = deadline - time.monotonic()
        if page.items or waits is None or left <= 0:
            break
        # False: no change in time, or no place to wait; None: the client left.
        if not await waits.changed(page.revision, left, current_receive):
            break
    body = b'{"%s":[%s],"next":%s}' % (member, ",".join(page.items).encode(),
                                       orjson.dumps(page.next))
    return json_response(200, body)


async def list_order_changes(after: str | None = None, limit: int = feed.LIMIT_DEFAULT,
                             wait: int = 0) -> ConnexionResponse:
    """GET /store/order-changes: the orders changed after the cursor. With listPetChanges,
    the `async def` handlers (D26, D42): a long poll waits without a thread."""
    return await _follow(feed.ORDERS, b"orders", after, limit, wait)


async def list_pet_changes(after: str | None = None, limit: int = feed.LIMIT_DEFAULT,
                           wait: int = 0) -> ConnexionResponse:
    """GET /pet-changes: the pets changed after the cursor (D39), as the orders' feed."""
    return await _follow(feed.PETS, b"pets", after, limit, wait)
