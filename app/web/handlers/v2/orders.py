"""Handlers of the v2 operations tagged `orders`: the list by page, one order, and the
moves of the state machine (place, cancel, ship, complete)."""

from __future__ import annotations

from typing import Any

import orjson
from connexion.lifecycle import ConnexionResponse

from app.core import orders, paging
from app.core.storage.records import Transition
from app.web.conditional import Tagged, if_match_version, kept, order_etag, tagged_json
from app.web.handlers import (
    header,
    json_response,
    next_link,
    no_content,
    request_json,
    request_path,
    services,
)


@kept
def list_orders(limit: int = paging.LIMIT_DEFAULT, cursor: str | None = None,
                status: list[str] | None = None, petId: int | None = None,
                complete: bool | None = None, shipDateFrom: str | None = None,
                shipDateTo: str | None = None, sort: str = "id") -> Tagged:
    """GET /store/orders: one page of the orders the filters select, in the sort asked."""
    query = paging.order_query(status=status, pet_id=petId, complete=complete,
                               ship_date_from=shipDateFrom, ship_date_to=shipDateTo, sort=sort)
    page = paging.page(services().store, query, limit, cursor)
    body = b'{"orders":[%s],"next":%s}' % (",".join(page.orders).encode(),
                                           orjson.dumps(page.next))
    return tagged_json(body, {"Link": next_link(page.next)} if page.next else None)


@kept
def get_order(orderId: int) -> Tagged:
    """GET /store/orders/{orderId}: one order, with the strong ETag of its version."""
    order, version = orders.get_versioned(services().store, orderId)
    return tagged_json(orjson.dumps(order), tag=order_etag(version))


def place_order(body: Any, token_info: dict[str, Any]) -> ConnexionResponse:
    """POST /store/orders: place an order under its Idempotency-Key, or replay the first
    answer to that key (D22, D23)."""
    key = orders.idempotency_key(header("Idempotency-Key"))
    current = services()
    placed = current.placing.place(current.store, request_json(body), token_info["key_id"],
                                   key)
    headers = {"Location": f"{request_path()}/{placed.order['id']}",
               "ETag": order_etag(placed.version)}
    if placed.replayed:
        headers["Idempotent-Replayed"] = "true"
    return json_response(201, orjson.dumps(placed.order), headers)


def cancel_order(orderId: int, token_info: dict[str, Any]) -> ConnexionResponse:
    """DELETE /store/orders/{orderId}: cancel a pending order, as v1 does, and only at the
    version If-Match names (D25)."""
    orders.cancel(services().store, orderId, token_info["key_id"], _if_match(orderId))
    return no_content()


def ship_order(orderId: int, body: Any = None) -> ConnexionResponse:
    """POST /store/orders/{orderId}/ship: pending becomes shipped (D24)."""
    given = request_json(body)
    when = given.get("shipDate") if isinstance(given, dict) else None
    moved = orders.ship(services().store, orderId,
                        orders.body_time(when) if when else None, _if_match(orderId))
    return _current(orderId, moved)


def complete_order(orderId: int) -> ConnexionResponse:
    """POST /store/orders/{orderId}/complete: shipped becomes complete (D24)."""
    moved = orders.complete(services().store, orderId, _if_match(orderId))
    return _current(orderId, moved)


def _if_match(order_id: int) -> int | None:
    """The version the request's If-Match allows the change at (conditional.if_match_version)."""
    return if_match_version(header("If-Match"),
                            lambda: services().store.order_version(order_id))


def _current(order_id: int, moved: Transition) -> ConnexionResponse:
    """200 with the order as the move left it (read again when the store did not give it)
    and its ETag."""
    if moved.order is not None and moved.version is not None:
        order, version = moved.order, moved.version
    else:
        order, version = orders.get_versioned(services().store, order_id)
    return json_response(200, orjson.dumps(order), {"ETag": order_etag(version)})
