"""Handlers of the v2 operations tagged `orders`: the list by page, one order, cancel."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import flask
import orjson

from app.core import orders, paging
from app.web.conditional import tagged_json
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
    """GET /store/orders/{orderId}: one order."""
    return tagged_json(orjson.dumps(orders.get(services().store, orderId)))


def cancel_order(orderId: int, token_info: dict[str, Any]) -> flask.Response:
    """DELETE /store/orders/{orderId}: cancel a pending order, exactly as v1 does."""
    orders.cancel(services().store, orderId, key_id=token_info["key_id"])
    return no_content()
