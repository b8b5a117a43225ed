"""v2's pages over every store: keyset order for each sort and filter, an index behind every
step of every query, no OFFSET anywhere, and a walk that sees each unchanged order exactly
once and no order twice while cancels, ships and imports run beside it (D18)."""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.core import orders, paging
from app.core.errors import InvalidParameter, StoreUnavailable
from app.core.storage import Store
from app.core.storage.records import OrderQuery
from tests.core.storage.conftest import Place

STATUSES = ("pending", "shipped", "cancelled")
SORTS = ("id", "-id", "shipDate", "-shipDate")
QUERIES = [
    {},
    {"status": ["pending"]},
    {"status": ["shipped", "cancelled"]},
    {"pet_id": 3},
    {"complete": True},
    {"ship_date_from": "2026-11-12T00:00:00Z", "ship_date_to": "2026-11-15T00:00:00Z"},
    {"status": ["pending"], "pet_id": 2, "complete": False},
]


def _rows(count: int, first: int = 1) -> list[dict[str, Any]]:
    return [{"id": i, "petId": i % 7, "quantity": 1 + i % 3, "status": STATUSES[i % 3],
             "complete": i % 5 == 0,
             **({} if i % 4 == 0 else {"shipDate": f"2026-11-{10 + i % 9:02d}T0{i % 10}:00:00Z"})}
            for i in range(first, first + count)]


def _walk(store: Store, query: OrderQuery, limit: int,
          between: Callable[[int], None] | None = None) -> list[dict[str, Any]]:
    """Every page of the query, following next; between(pages read so far) runs before
    each next page: a client reading the page, while the writers go on."""
    seen: list[dict[str, Any]] = []
    cursor = None
    for read in range(1, 10_001):
        page = paging.page(store, query, limit, cursor)
        seen += [orjson.loads(text) for text in page.orders]
        if page.next is None:
            return seen
        cursor = page.next
        if between is not None:
            between(read)
    raise AssertionError("the walk did not end")


def _expected(rows: list[dict[str, Any]], query: OrderQuery) -> list[int]:
    def selected(o: dict[str, Any]) -> bool:
        return ((not query.statuses or o["status"] in query.statuses)
                and (query.pet_id is None or o["petId"] == query.pet_id)
                and (query.complete is None or o["complete"] == query.complete)
                and (query.ship_from is None or o.get("shipDate", "") >= query.ship_from)
                and (query.ship_to is None or ("shipDate" in o and o["shipDate"] < query.ship_to)))

    chosen = [o for o in rows if selected(o)]
    descending = query.sort.startswith("-")
    if query.sort in ("id", "-id"):
        return [o["id"] for o in sorted(chosen, key=lambda o: o["id"], reverse=descending)]
    dated = sorted((o for o in chosen if "shipDate" in o),
                   key=lambda o: (o["shipDate"], o["id"]), reverse=descending)
    undated = sorted((o for o in chosen if "shipDate" not in o), key=lambda o: o["id"],
                     reverse=descending)
    return [o["id"] for o in dated + undated]


@pytest.mark.parametrize("sort", SORTS)
def test_every_query_walks_in_its_sort_each_order_once(store: Store, sort: str) -> None:
    rows = _rows(120)
    store.import_orders(rows)
    stored = {o["id"]: o for o in store.list_orders()}
    for filters in QUERIES:
        query = paging.order_query(**filters, sort=sort)
        for limit in (1, 7, 1000):
            seen = _walk(store, query, limit)
            assert [o["id"] for o in seen] == _expected(list(stored.values()), query), filters
            assert all(o == stored[o["id"]] for o in seen)  # the same JSON as v1's list


def test_a_cursor_is_bound_to_its_query_and_refused_when_edited(store: Store) -> None:
    store.import_orders(_rows(10))
    query = paging.order_query(status=["pending", "shipped"], sort="-shipDate")
    cursor = paging.page(store, query, 2).next
    assert cursor is not None and re.fullmatch(r"[A-Za-z0-9_-]+", cursor)
    # The same filters in another order are the same query.
    same = paging.order_query(status=["shipped", "pending"], sort="-shipDate")
    assert paging.page(store, same, 2, cursor).orders
    for other in (paging.order_query(status=["pending"], sort="-shipDate"),
                  paging.order_query(status=["pending", "shipped"], sort="shipDate")):
        with pytest.raises(InvalidParameter, match="other filters") as refused:
            paging.page(store, other, 2, cursor)
        assert refused.value.name == "cursor"
    for edited in (cursor[:-1], cursor[1:], cursor.upper(), "A" + cursor, ""):
        if edited:
            with pytest.raises(InvalidParameter, match="not one this service gave out"):
                paging.page(store, query, 2, edited)


class Recorder:
    """The SQL a store runs, recorded by wrapping its one read primitive."""

    def __init__(self, store: Any) -> None:
        self.statements: list[tuple[str, tuple[Any, ...]]] = []
        read = store._rows

        def recording(sql: str, params: tuple[Any, ...] = ()) -> Any:
            self.statements.append((sql, params))
            return read(sql, params)

        store._rows = recording


def _plan(place: Place, sql: str, params: tuple[Any, ...]) -> str:
    """The database's plan for a statement, as text."""
    if place.kind == "sqlite":
        import sqlite3

        with sqlite3.connect(place.database) as conn:
            return "\n".join(row[3] for row in
                             conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
    import psycopg

    with psycopg.connect(place.database) as conn:
        # The table is small: forbid what the planner would pick only for that reason, so
        # the plan shows whether an index can serve the statement at all.
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_sort = off")
        return "\n".join(row[0] for row in conn.execute(f"EXPLAIN {sql}", params))  # type: ignore[arg-type]


SINGLE = [{}, {"status": ["pending"]}, {"pet_id": 3}, {"complete": True},
          {"ship_date_from": "2026-11-12T00:00:00Z"}, {"ship_date_to": "2026-11-15T00:00:00Z"}]


@pytest.mark.parametrize("sort", SORTS)
def test_every_filter_and_sort_is_an_index_range_with_no_sort_step(
        place: Place, store: Store, sort: str) -> None:
    store.import_orders(_rows(300))
    recorder = Recorder(store)
    for filters in SINGLE:
        # One B-tree gives one order: status, petId and complete are ranges in id order,
        # the shipDate bounds in shipDate order. (A filter with the other kind of sort is
        # one index or the other, and the database picks.)
        by_date = bool(filters) and next(iter(filters)).startswith("ship_date")
        if filters and by_date != sort.endswith("shipDate"):
            continue
        query = paging.order_query(**filters, sort=sort)
        cursor = paging.page(store, query, 5).next
        paging.page(store, query, 5, cursor)
    assert recorder.statements
    for sql, params in recorder.statements:
        plan = _plan(place, sql, params)
        if place.kind == "sqlite":
            assert "USE TEMP B-TREE" not in plan, (sql, plan)
            # With no WHERE, the table itself is the id's b-tree: a scan in its order.
            if " WHERE " in sql:
                assert re.search(r"USING (INDEX|INTEGER PRIMARY KEY|COVERING INDEX)", plan), (
                    sql, plan)
        else:
            assert "Sort" not in plan and "Seq Scan" not in plan, (sql, plan)


def test_no_sql_of_the_service_uses_offset() -> None:
    app = Path(__file__).resolve().parents[3] / "app"
    offenders = [str(path) for path in app.rglob("*.py")
                 if re.search(r"\bOFFSET\s+(\?|%s|\{|\d)", path.read_text(), re.IGNORECASE)]
    assert not offenders


WRITES = 120  # changes each writer makes, 2 ms apart: they span the walk, which then ends
CHANGED_AT_LEAST = 50  # orders the writers change while a walk goes on
RETRY_FOR = 30.0  # seconds a writer sends a write again while the store is unavailable


def _paced_by(changed: set[int], lock: threading.Lock, pages: int) -> Callable[[int], None]:
    """The pause between a walk's pages: until the writers have changed their share of
    CHANGED_AT_LEAST orders so far (all of them before the last page), so that on any
    machine, however loaded, the walk spans that many changes. Pacing by a clock instead
    let a slow machine's writers fall short (42 of 50 once, under load)."""
    def pause(read: int) -> None:
        share = CHANGED_AT_LEAST * min(1.0, read / max(1, pages - 1))
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with lock:
                if len(changed) >= share:
                    return
            time.sleep(0.001)
    return pause


def _retrying(write: Callable[..., object], *args: object) -> None:
    """The write, sent again while the store answers StoreUnavailable, as a client sends a
    request again after a 503: SQLite's one writer makes another wait its busy timeout
    (1 s), which a loaded machine (or mutmut's tracing) can pass, and the write was then
    not made. Within RETRY_FOR seconds; past that, the error is the test's."""
    deadline = time.monotonic() + RETRY_FOR
    while True:
        try:
            write(*args)
            return
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)  # a client's pause before it sends again


def _mutate(place: Place, pending: list[int], first_new: int, ships: bool,
            stop: threading.Event, changed: set[int], lock: threading.Lock) -> None:
    """Cancel and (with ships) ship pending orders, and import new ones, WRITES times or
    until told to stop; every id touched is added to changed before it is touched."""
    store = place.open()
    chance = random.Random(first_new)
    next_id = first_new
    try:
        for _ in range(WRITES):
            if stop.is_set():
                return
            time.sleep(0.002)
            action = chance.choice(("cancel", "ship", "import") if ships else ("cancel", "import"))
            if action == "import":
                batch = _rows(5, next_id)
                with lock:
                    changed.update(o["id"] for o in batch)
                _retrying(store.import_orders, batch)
                next_id += 5
                continue
            with lock:
                if not pending:
                    continue
                order_id = pending.pop(chance.randrange(len(pending)))
                changed.add(order_id)
            if action == "cancel":
                _retrying(orders.cancel, store, order_id, None)
            else:
                _retrying(orders.ship, store, order_id,
                          f"2026-12-{1 + order_id % 28:02d}T12:00:00Z")
    finally:
        store.dispose()


@pytest.mark.parametrize(("sort", "filters", "ships"), [
    ("id", {}, True),
    ("-id", {}, True),
    ("id", {"status": ["pending", "shipped"]}, True),
    ("shipDate", {}, False),
    ("-shipDate", {"pet_id": 3}, False),
])
def test_a_walk_beside_writers_sees_each_unchanged_order_once_and_none_twice(
        place: Place, store: Store, sort: str, filters: dict[str, Any], ships: bool) -> None:
    count = 2000
    rows = _rows(count)
    store.import_orders(rows)
    before = {o["id"]: o for o in store.list_orders()}
    pending = [i for i, o in before.items() if o["status"] == "pending"]
    changed: set[int] = set()
    lock = threading.Lock()
    stop = threading.Event()
    writers = [threading.Thread(target=_mutate, args=(place, pending, count + 1 + n * 100_000,
                                                      ships, stop, changed, lock))
               for n in range(2)]
    for writer in writers:
        writer.start()
    try:
        query = paging.order_query(**filters, sort=sort)
        pages = -(-len(_expected(list(before.values()), query)) // 25)
        seen = _walk(store, query, 25, between=_paced_by(changed, lock, pages))
    finally:
        stop.set()
        for writer in writers:
            writer.join()
    assert len(changed) >= CHANGED_AT_LEAST, f"only {len(changed)} orders changed during the walk"
    ids = [o["id"] for o in seen]
    assert len(ids) == len(set(ids)), "an order was seen twice"
    unchanged = set(_expected([o for i, o in before.items() if i not in changed], query))
    missing = unchanged - set(ids)
    assert not missing, f"{len(missing)} unchanged orders were not seen"
