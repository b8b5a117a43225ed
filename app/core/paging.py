"""The order list of v2: filters, a sort, and pages walked by cursor (D18, D19).

A page is read by keyset, never OFFSET: it starts after the sort key of the last order of
the page before, so page 10,000 costs what page 1 costs. The cursor carries that key, and
a fingerprint of the filters and sort it was made with; it is opaque to clients and
checked (a checksum over its content), so an edited cursor, or one sent with other filters
or another sort, is refused (InvalidParameter, 400 naming `cursor`). The checksum detects
edits; it is not a secret: a forged cursor could only move its holder within a list that
holder may read anyway.

Sorts: `id`, `-id`, `shipDate`, `-shipDate`; ties break by id (in the sort's direction),
and orders without a shipDate come after every dated one in both directions. The sort key
of an order is (shipDate or None, id) for the shipDate sorts, (None, id) for the others.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from app.core.errors import InvalidParameter
from app.core.orders import InvalidOrder, format_time, parse_time
from app.core.storage import Store
from app.core.storage.records import ORDER_STATUSES, OrderQuery, Position

SORTS = ("id", "-id", "shipDate", "-shipDate")
LIMIT_DEFAULT = 100
LIMIT_MAX = 1000
CURSOR_VERSION = 1
_CHECK_KEY = b"petstore-orders-cursor"  # a checksum's key, not a secret (see above)
_CHECK_BYTES = 12


@dataclass(frozen=True)
class Page:
    """One page: its orders (each as its JSON text), the cursor of the next page (None on
    the last), and each order's version (D25), read with it (the console's actions name
    the version a row showed)."""

    orders: list[str]
    next: str | None
    versions: list[int]


def ship_time(text: str, name: str) -> str:
    """A shipDateFrom or shipDateTo value as stored times are written (UTC, whole
    seconds). Stored times have whole seconds, so a bound with a fraction is raised to the
    next second: inclusive `from` and exclusive `to` then select the same orders."""
    try:
        stored = parse_time(text, name)
    except InvalidOrder as exc:
        raise InvalidParameter(name, "date_time_range") from exc
    moment = dt.datetime.fromisoformat(text.strip())
    if moment.microsecond:
        try:
            stored = format_time(moment.replace(microsecond=0) + dt.timedelta(seconds=1))
        except OverflowError:  # past 9999-12-31T23:59:59Z, after every date there can be
            stored = "9999-12-31T23:59:60Z"
    return stored


def order_query(*, status: Iterable[str] | None = None, pet_id: int | None = None,
                complete: bool | None = None, ship_date_from: str | None = None,
                ship_date_to: str | None = None, sort: str = "id") -> OrderQuery:
    """The filters and sort of a request, checked and in one canonical form."""
    statuses = tuple(sorted(set(status or ())))
    unknown = [s for s in statuses if s not in ORDER_STATUSES]
    if unknown:
        raise InvalidParameter("status", "enum", {"enum": ORDER_STATUSES, "item": True})
    if sort not in SORTS:
        raise InvalidParameter("sort", "enum", {"enum": SORTS})
    return OrderQuery(
        statuses=statuses,
        pet_id=pet_id,
        complete=complete,
        ship_from=ship_time(ship_date_from, "shipDateFrom") if ship_date_from else None,
        ship_to=ship_time(ship_date_to, "shipDateTo") if ship_date_to else None,
        sort=sort,
    )


def fingerprint(query: OrderQuery) -> str:
    """A short digest of the filters and sort: what a cursor is bound to."""
    return fingerprint_of([query.statuses, query.pet_id, query.complete, query.ship_from,
                           query.ship_to, query.sort])


def fingerprint_of(values: list[Any]) -> str:
    """A short digest of a list's filters (JSON values), for its cursors to be bound to."""
    return hashlib.blake2b(orjson.dumps(values), digest_size=8).hexdigest()


def _check(payload: bytes) -> bytes:
    return hashlib.blake2b(payload, key=_CHECK_KEY, digest_size=_CHECK_BYTES).digest()


def seal(values: list[Any]) -> str:
    """Values as an opaque, URL-safe cursor that carries a checksum of them."""
    payload = orjson.dumps(values)
    return base64.urlsafe_b64encode(payload + _check(payload)).rstrip(b"=").decode("ascii")


def unseal(cursor: str, edited: Exception) -> list[Any]:
    """The values a cursor made by seal carries; raises edited if it was changed or cut."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    except (binascii.Error, ValueError):
        raise edited from None
    payload, check = raw[:-_CHECK_BYTES], raw[-_CHECK_BYTES:]
    if len(raw) <= _CHECK_BYTES or _check(payload) != check:
        raise edited
    try:
        values = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise edited from None
    if not isinstance(values, list):
        raise edited
    return values


def bound_cursor(made_for: str, *position: Any) -> str:
    """The opaque cursor of a page that starts after a position, bound to the filters
    (made_for: their fingerprint) it was made with. Every list's cursors are these (the
    orders' here, the pets' in app.core.pets)."""
    return seal([CURSOR_VERSION, made_for, *position])


def unbind_cursor(cursor: str, made_for: str, size: int, other_query: str) -> list[Any]:
    """The size values of the position a bound_cursor carries, if it is intact and was
    made for these filters: else InvalidParameter naming cursor, cursor_edited, or the
    rule other_query (which says what the filters of that list are)."""
    edited = InvalidParameter("cursor", "cursor_edited")
    values = unseal(cursor, edited)
    if len(values) != 2 + size or values[0] != CURSOR_VERSION:
        raise edited
    if values[1] != made_for:
        raise InvalidParameter("cursor", other_query)
    return values[2:]


def encode_cursor(query: OrderQuery, after: Position) -> str:
    """The opaque, URL-safe cursor of the page that starts after this position."""
    return bound_cursor(fingerprint(query), after.ship_date, after.id)


def decode_cursor(cursor: str, query: OrderQuery) -> Position:
    """The position a cursor names, if it is intact and was made for this query."""
    ship_date, order_id = unbind_cursor(cursor, fingerprint(query), 2, "cursor_other_query")
    if not isinstance(order_id, int) or isinstance(order_id, bool):
        raise InvalidParameter("cursor", "cursor_edited")
    return Position(ship_date, order_id)


def check_limit(limit: int) -> None:
    """A page's limit: 1 to LIMIT_MAX, else InvalidParameter naming limit."""
    if not 1 <= limit <= LIMIT_MAX:
        raise InvalidParameter("limit", "type",
                               {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX})


def page(store: Store, query: OrderQuery, limit: int = LIMIT_DEFAULT,
         cursor: str | None = None) -> Page:
    """One page of the orders the query selects, in its sort, after the cursor's position."""
    check_limit(limit)
    after = decode_cursor(cursor, query) if cursor else None
    # One more than asked: whether there is a next page, without a second query.
    rows = store.page_orders(query, after, limit + 1)
    if len(rows) <= limit:
        return Page([row[0] for row in rows], None, [int(row[3]) for row in rows])
    _, ship_date, order_id, _ = rows[limit - 1]
    by_date = query.sort in ("shipDate", "-shipDate")
    last = Position(ship_date if by_date else None, order_id)
    return Page([row[0] for row in rows[:limit]], encode_cursor(query, last),
                [int(row[3]) for row in rows[:limit]])


def selects(query: OrderQuery, order: dict[str, Any]) -> bool:
    """Whether the query's filters select this order (as the store's would: D19), for an
    order read on its own, such as one the feed names."""
    ship_date = order.get("shipDate")
    return ((not query.statuses or order["status"] in query.statuses)
            and (query.pet_id is None or order.get("petId") == query.pet_id)
            and (query.complete is None or order["complete"] == query.complete)
            and (query.ship_from is None or (ship_date is not None
                                             and ship_date >= query.ship_from))
            and (query.ship_to is None or (ship_date is not None and ship_date < query.ship_to)))


def walk(store: Store, query: OrderQuery, page_size: int = LIMIT_MAX) -> Iterator[str]:
    """Every order the query selects, in its sort, each as its JSON text, read a page at a
    time (the CLI's list: memory stays flat however many orders there are)."""
    cursor = None
    while True:
        current = page(store, query, page_size, cursor)
        yield from current.orders
        if current.next is None:
            return
        cursor = current.next
