"""Handlers of the v2 operations tagged `orders`: the list by page, one order, and the
moves of the state machine (place, cancel, ship, complete). The moves are answered without
Flask (@direct, app/web/direct.py)."""

from __future__ import annotations

import json
from typing import Any

import flask
import orjson

from app.core import orders, paging
from app.core.storage.records import Transition
from app.web.conditional import if_match_version, kept, order_etag, tagged_json
from app.web.direct import NO_CONTENT, Answer, Call, direct, json_answer
from app.web.handlers import next_link, services


@kept()
def list_orders(limit: int = paging.LIMIT_DEFAULT, cursor: str | None = None,
                status: list[str] | None = None, petId: int | None = None,
                complete: bool | None = None, shipDateFrom: str | None = None,
                shipDateTo: str | None = None, sort: str = "id") -> flask.Response:
    """GET /store/orders: one page of the orders the filters select, in the sort asked."""
    query = paging.order_query(status=status, pet_id=petId, complete=complete,
                               ship_date_from=shipDateFrom, ship_date_to=shipDateTo, sort=sort)
    page = paging.page(services().store, query, limit, cursor)
    body = b'{"orders":[%s],"next":%s}' % (",".join(page.orders).encode(),
                                           orjson.dumps(page.next))
    return tagged_json(body, {"Link": next_link(page.next)} if page.next else None)


@kept()
def get_order(orderId: int) -> flask.Response:
    """GET /store/orders/{orderId}: one order, with the strong ETag of its version."""
    order, version = orders.get_versioned(services().store, orderId)
    return tagged_json(orjson.dumps(order), tag=order_etag(version))


@direct
def place_order(call: Call) -> Answer:
    """POST /store/orders: place an order under its Idempotency-Key, or replay the first
    answer to that key (D22, D23)."""
    key = orders.idempotency_key(call.header(b"idempotency-key"))
    placed = call.services.placing.place(call.services.store, _request_json(call),
                                         call.token_info["key_id"], key)
    headers = [("Location", f"{call.path}/{placed.order['id']}"),
               ("ETag", order_etag(placed.version))]
    if placed.replayed:
        headers.append(("Idempotent-Replayed", "true"))
    return json_answer(201, orjson.dumps(placed.order), headers)


@direct
def cancel_order(call: Call) -> Answer:
    """DELETE /store/orders/{orderId}: cancel a pending order, as v1 does, and only at the
    version If-Match names (D25)."""
    order_id = call.order_id()
    orders.cancel(call.services.store, order_id, call.token_info["key_id"],
                  _if_match(call, order_id))
    return NO_CONTENT


@direct
def ship_order(call: Call) -> Answer:
    """POST /store/orders/{orderId}/ship: pending becomes shipped (D24)."""
    order_id = call.order_id()
    body = _request_json(call)
    when = body.get("shipDate") if isinstance(body, dict) else None
    moved = orders.ship(call.services.store, order_id,
                        orders.body_time(when) if when else None, _if_match(call, order_id))
    return _current(call, order_id, moved)


@direct
def complete_order(call: Call) -> Answer:
    """POST /store/orders/{orderId}/complete: shipped becomes complete (D24)."""
    order_id = call.order_id()
    moved = orders.complete(call.services.store, order_id, _if_match(call, order_id))
    return _current(call, order_id, moved)


def _request_json(call: Call) -> Any:
    """The request's body, which validation has found JSON (whatever its Content-Type
    said: without one, Connexion takes the document's application/json), or None."""
    return json.loads(call.body) if call.body.strip() else None


def _if_match(call: Call, order_id: int) -> int | None:
    """The version the request's If-Match allows the change at (conditional.if_match_version)."""
    return if_match_version(call.header(b"if-match"),
                            lambda: call.services.store.order_version(order_id))


def _current(call: Call, order_id: int, moved: Transition) -> Answer:
    """200 with the order as the move left it (read again when the store did not give it)
    and its ETag."""
    if moved.order is not None and moved.version is not None:
        order, version = moved.order, moved.version
    else:
        order, version = orders.get_versioned(call.services.store, order_id)
    return json_answer(200, orjson.dumps(order), [("ETag", order_etag(version))])
