"""Handlers of the v2 operations tagged `orders`: the list by page, one order, and the
moves of the state machine (place, cancel, ship, complete)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import flask
import orjson

from app.core import orders, paging
from app.web.conditional import if_match_versions, order_etag, tagged_json
from app.web.handlers import no_content, services


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
    return tagged_json(body, {"Link": _next_link(page.next)} if page.next else None)


def _next_link(cursor: str) -> str:
    """The Link header of the next page: this request's query with the next cursor."""
    pairs = [(k, v) for k, v in flask.request.args.items(multi=True) if k != "cursor"]
    target = f"{flask.request.path}?{urlencode([*pairs, ('cursor', cursor)], safe=',')}"
    return f'<{target}>; rel="next"'


def get_order(orderId: int) -> flask.Response:
    """GET /store/orders/{orderId}: one order, with the strong ETag of its version."""
    order, version = orders.get_versioned(services().store, orderId)
    return tagged_json(orjson.dumps(order), tag=order_etag(version))


def place_order(body: dict[str, Any], token_info: dict[str, Any]) -> flask.Response:
    """POST /store/orders: place an order under its Idempotency-Key, or replay the first
    answer to that key (D22, D23)."""
    found = services()
    key = orders.idempotency_key(flask.request.headers.get(orders.IDEMPOTENCY_KEY))
    placed = found.placing.place(found.store, body, token_info["key_id"], key)
    headers = {"Location": f"{flask.request.path}/{placed.order['id']}",
               "ETag": order_etag(placed.version)}
    if placed.replayed:
        headers["Idempotent-Replayed"] = "true"
    return flask.Response(orjson.dumps(placed.order), 201, mimetype="application/json",
                          headers=headers)


def cancel_order(orderId: int, token_info: dict[str, Any]) -> flask.Response:
    """DELETE /store/orders/{orderId}: cancel a pending order, as v1 does, and only at the
    version If-Match names (D25)."""
    orders.cancel(services().store, orderId, token_info["key_id"], _if_match(orderId))
    return no_content()


def ship_order(orderId: int, body: Any = None) -> flask.Response:
    """POST /store/orders/{orderId}/ship: pending becomes shipped (D24)."""
    # Without a JSON Content-Type, Connexion hands over the (validated) body as bytes.
    if isinstance(body, bytes):
        body = orjson.loads(body) if body.strip() else None
    when = body.get("shipDate") if isinstance(body, dict) else None
    orders.ship(services().store, orderId, orders.body_time(when) if when else None,
                _if_match(orderId))
    return _current(orderId)


def complete_order(orderId: int) -> flask.Response:
    """POST /store/orders/{orderId}/complete: shipped becomes complete (D24)."""
    orders.complete(services().store, orderId, _if_match(orderId))
    return _current(orderId)


def _if_match(order_id: int) -> int | None:
    """The version the request's If-Match allows the change at: None for any (no header,
    or *); -1, which no order has, when it names none of the order's current version."""
    versions = if_match_versions(flask.request.headers.get("If-Match"))
    if versions is None:
        return None
    if len(versions) == 1:
        return next(iter(versions))
    current = services().store.order_version(order_id) if versions else None
    return current if current in versions else -1


def _current(order_id: int) -> flask.Response:
    """200 with the order as it is now and its ETag."""
    order, version = orders.get_versioned(services().store, order_id)
    return flask.Response(orjson.dumps(order), 200, mimetype="application/json",
                          headers={"ETag": order_etag(version)})
