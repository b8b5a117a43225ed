"""The feed of changed orders (D26), in one run: a page of 100 of the feed against
a page of 100 of v2's list, at the beginning and near the end of 1,000,000 orders, every
request read from the store (the page cache off: the feed has none, and a page is one index
range in both); then the list of 10 with and without 200 feed requests waiting on the same
worker; and how soon a waiting request is answered after a commit. Over SQLite, then over
PostgreSQL (that of --postgres, a database of the benchmark's own, dropped afterwards;
skipped with a message where none answers).

One gunicorn worker (uvicorn) per server, pinned to one core, wrk on the other; the
scenarios' requests take turns under load, one run each per round; a ratio is the median
of rounds' ratios.

    python -m bench.feed [--runs 3] [--seconds 3] [--orders 1000000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

from app.core import feed, paging
from app.core.config import Settings
from app.core.storage import open_store
from app.core.storage.records import Position
from bench.harness import (
    Load,
    free_port,
    median_load,
    on_both_stores,
    say,
    server,
    store_arguments,
    table,
    wrk,
)
from bench.quotas import GUNICORN, PETSTORE
from bench.service import measure
from bench.v2 import _get, _prepare, _rows

LIST = "/v2/store/orders"
FEED = "/v2/store/order-changes"
PAGE_AT_LEAST = 0.8  # a feed page against a list page, at the same place
WAITING = 200
WAITING_AT_LEAST = 0.9  # the list of 10 with 200 waiting against without


def _late_cursors(database: str, order_id: int) -> tuple[str, str]:
    """A list cursor and a feed cursor that both start right after order_id."""
    store = open_store(Settings(database=database))
    try:
        read = store.order_changes(None, 1)
        if database.startswith("postgresql"):
            import psycopg

            with psycopg.connect(database) as conn:
                row = conn.execute("SELECT position FROM orders WHERE id = %s",
                                   (order_id,)).fetchone()
        else:
            import sqlite3

            with sqlite3.connect(database) as conn:
                row = conn.execute("SELECT position FROM orders WHERE id = ?",
                                   (order_id,)).fetchone()
        assert row is not None
        return (paging.encode_cursor(paging.order_query(), Position(None, order_id)),
                feed.cursor(read, int(row[0]), order_id))
    finally:
        store.dispose()


class Waiting:
    """count feed requests waiting (wait=30) on a worker, each on a connection of its own,
    opened again whenever one is answered, until closed."""

    def __init__(self, port: int, auth: dict[str, str], after: str, count: int) -> None:
        self.request = (f"GET {FEED}?after={after}&wait=30 HTTP/1.1\r\nHost: bench\r\n"
                        f"Authorization: {auth['Authorization']}\r\n\r\n").encode()
        self.port, self.count = port, count
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._hold, daemon=True) for _ in range(count)]
        for thread in self.threads:
            thread.start()

    def _hold(self) -> None:
        while not self.stop.is_set():
            with socket.create_connection(("127.0.0.1", self.port)) as sock:
                sock.settimeout(1)
                sock.sendall(self.request)
                while not self.stop.is_set():
                    try:
                        if sock.recv(65536) == b"":
                            break
                    except TimeoutError:
                        continue
                    break  # answered (a change, or its 30 s): wait again

    def close(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(5)


def _wake_seconds(port: int, auth: dict[str, str], database: str, tries: int = 15) -> list[float]:
    """Seconds from a commit (an import by a store of this process, as the CLI makes) to
    the answer of a request that waited for it."""
    store = open_store(Settings(database=database))
    found: list[float] = []
    try:
        after = orjson.loads(_get(port, f"{FEED}?limit=1000", auth))["next"]
        while True:  # up to date
            page = orjson.loads(_get(port, f"{FEED}?limit=1000&after={after}", auth))
            after = page["next"]
            if not page["orders"]:
                break
        answered: list[float] = []

        def wait(after: str) -> None:
            _get(port, f"{FEED}?after={after}&wait=10", auth)
            answered.append(time.perf_counter())

        for attempt in range(tries):
            answered.clear()
            waiter = threading.Thread(target=wait, args=(after,))
            waiter.start()
            time.sleep(0.3 + attempt * 0.013)  # the commit lands anywhere in a poll period
            committed = time.perf_counter()
            store.import_orders([{"id": 1, "petId": 1, "quantity": 2 + attempt}], upsert=True)
            waiter.join(15)
            found.append(answered[0] - committed)
            after = orjson.loads(_get(port, f"{FEED}?after={after}", auth))["next"]
    finally:
        store.dispose()
    return found


def run(store: str, big_db: str, small_db: str, args: argparse.Namespace,
        folder: Path) -> tuple[list[tuple[str, Load, str]], list[str]]:
    say(f"{store}: preparing {args.orders:,} orders, and 10 for the list of 10...")
    big_env, key = _prepare(big_db, args.orders, folder)
    small_env, small_key = _prepare(small_db, 0, folder)
    subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                   input=_rows(10), env=small_env, check=True, capture_output=True, text=True)
    auth = {"Authorization": f"Bearer {key}"}
    small_auth = {"Authorization": f"Bearer {small_key}"}
    late_list, late_feed = _late_cursors(big_db, args.orders - args.orders // 100)
    lines: list[str] = []
    with ExitStack() as stack:
        big_port, small_port = free_port(), free_port()
        quotas = {"PETSTORE_RATELIMIT_STORAGE": "memory://"}
        big = stack.enter_context(server(
            [*GUNICORN, "--bind", f"127.0.0.1:{big_port}", "wsgi:app"],
            {**big_env, **quotas, "PETSTORE_PAGE_CACHE_BYTES": "0"}, big_port,
            f"{LIST}?limit=100", auth))
        small = stack.enter_context(server(
            [*GUNICORN, "--bind", f"127.0.0.1:{small_port}", "wsgi:app"],
            {**small_env, **quotas}, small_port, f"{LIST}?limit=10", small_auth))

        def at(port: int, path: str, query: str) -> str:
            return f"http://127.0.0.1:{port}{path}?{query}"

        pages: dict[str, dict[str, Any]] = {
            "page of 100 at the beginning": {"targets": {
                "v2 list": (at(big_port, LIST, "limit=100"), auth, None),
                "feed": (at(big_port, FEED, "limit=100"), auth, None)},
                "processes": {"v2 list": big, "feed": big}},
            "page of 100 near the end": {"targets": {
                "v2 list": (at(big_port, LIST, f"limit=100&cursor={late_list}"), auth, None),
                "feed": (at(big_port, FEED, f"limit=100&after={late_feed}"), auth, None)},
                "processes": {"v2 list": big, "feed": big}},
        }
        for plan in pages.values():
            for url, headers, _ in plan["targets"].values():
                wrk(url, headers, 1)  # warm up
        results = measure(pages, args.runs, args.seconds)

        say(f"{store}: the list of 10, alone and with {WAITING} feed requests waiting...")
        up_to_date = orjson.loads(_get(small_port, f"{FEED}?limit=1000", small_auth))["next"]
        list_of_10 = at(small_port, LIST, "limit=10")
        wrk(list_of_10, small_auth, 1)
        alone: list[Load] = []
        beside: list[Load] = []
        for _ in range(args.runs):
            alone.append(wrk(list_of_10, small_auth, args.seconds, process=small))
            waiting = Waiting(small_port, small_auth, up_to_date, WAITING)
            time.sleep(1)
            beside.append(wrk(list_of_10, small_auth, args.seconds, process=small))
            waiting.close()
        results["list of 10"] = {"alone": alone, f"with {WAITING} waiting": beside}

        say(f"{store}: how soon a waiting request is answered after a commit...")
        wakes = _wake_seconds(small_port, small_auth, small_db)
        lines.append(f"{store}: a waiting request answered after a commit: median "
                     f"{statistics.median(wakes) * 1000:.0f} ms, at most "
                     f"{max(wakes) * 1000:.0f} ms over {len(wakes)} commits (D26: within "
                     f"500 ms: {'ok' if max(wakes) <= 0.5 else 'ABOVE TARGET'})")

    rows: list[tuple[str, Load, str]] = []
    for scenario, by_who in results.items():
        baseline_name, at_least = (("alone", WAITING_AT_LEAST) if scenario == "list of 10"
                                   else ("v2 list", PAGE_AT_LEAST))
        baseline = by_who[baseline_name]
        for who, loads in by_who.items():
            comparison = ""
            if who != baseline_name:
                ratio = statistics.median(s.rps / b.rps
                                          for s, b in zip(loads, baseline, strict=True))
                comparison = (f"{ratio:.2f}x {baseline_name} (target >= {at_least}: "
                              f"{'ok' if ratio >= at_least else 'BELOW TARGET'})")
            rows.append((f"{store}: {scenario}, {who}", median_load(loads), comparison))
    return rows, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    rows, lines = on_both_stores(run, parser.parse_args(), "feed")
    print("\nThe feed of changed orders: medians of rounds; ratios are medians of each "
          "round's ratio")
    print(table(rows))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
