"""The console's pages (D35) under load: a board page of 100 orders (the first, and the
first of a filter) against v2's page of 100 from the same store; an order's page (its
story read from the order's row, its placing's idempotency key and the audit log, each an
index lookup) against the board's page of 100, for an order imported in the middle of the
million and for one placed with a key and cancelled in the console; and the CSV export's
rows a second over every order, with the worker's peak memory before and after it (the
export is streamed: the peak must not grow with the orders).

The signed-in owner's session is made through the core, as the sign-in page makes it, and
sent as its cookie. One gunicorn worker pinned to one core, wrk on the other, SQLite.

    python -m bench.console [--runs 3] [--seconds 3] [--orders 1000000]
"""

from __future__ import annotations

import argparse
import http.client
import os
import subprocess
import tempfile
import time
from pathlib import Path

from app.core import orders
from app.core.config import Settings
from app.core.storage import open_store
from app.core.users import accounts, sessions
from bench.harness import Load, free_port, median_load, say, server, table, wrk
from bench.quotas import GUNICORN, HUGE, PETSTORE
from bench.v2 import _rows

BOARD = "/console/orders"
V2 = "/v2/store/orders?limit=100"
# An order's page is one order's: no slower than the board's page of a hundred.
TARGETS = {"board, first page": ("v2 page of 100", 0.3),  # a page of HTML, not of JSON
           "order's page, imported": ("board, first page", 1.0),
           "order's page, placed, cancelled": ("board, first page", 1.0)}


def _session(database: str) -> tuple[str, int]:
    """A user "bench" signed in, as the sign-in page would leave it: its session's id; and
    an order placed with the first key and cancelled by that user from the console (its
    story's every record: the idempotency key, the row's cancel, the audit line)."""
    store = open_store(Settings(database=database))
    user, _ = accounts.add(store, "bench")
    user = store.update_console_user(user.id, {"must_change_password": False}) or user
    opened = sessions.open_session(store, user, sessions.OPEN, time.time())
    key_id = store.list_keys()[0].id
    placed = store.place_order({"petId": 7, "quantity": 1}, key_id, "bench", "bench",
                               orders.utc_now())
    order_id = int(placed.order["id"])
    orders.cancel(store, order_id, None, user_id=user.id)
    accounts.record(store, user.name, "127.0.0.1", "cancel", f"order {order_id}")
    store.dispose()
    return opened.session_id, order_id


def _export(port: int, cookie: dict[str, str]) -> tuple[int, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    started = time.perf_counter()
    conn.request("GET", "/console/orders.csv", headers=cookie)
    response = conn.getresponse()
    rows = 0
    while chunk := response.read(1 << 16):
        rows += chunk.count(b"\n")
    assert response.status == 200, response.status
    return rows - 1, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--orders", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="petstore-bench-console-") as folder:
        database = str(Path(folder) / "console.db")
        env = {**os.environ, "PETSTORE_DATABASE": database, "PETSTORE_KEY_LAST_USED": "false"}
        subprocess.run([*PETSTORE, "init"], env=env, check=True, capture_output=True)
        say(f"importing {args.orders:,} orders...")
        subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                       input=_rows(args.orders), env=env, check=True, capture_output=True,
                       text=True)
        key = subprocess.run(
            [*PETSTORE, "keys", "create", "--plan", "enterprise", "--name", "bench",
             "--per-minute", HUGE, "--per-day", HUGE],
            env=env, check=True, capture_output=True, text=True).stdout.strip()
        session_id, cancelled = _session(database)
        cookie = {"Cookie": f"petstore-console={session_id}"}
        pages = {"order's page, imported": f"/console/orders/{args.orders // 2}",
                 "order's page, placed, cancelled": f"/console/orders/{cancelled}"}
        auth = {"Authorization": f"Bearer {key}"}
        port = free_port()
        argv = [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"]
        base = f"http://127.0.0.1:{port}"
        loads: dict[str, list[Load]] = {"board, first page": [], "board, status=pending": [],
                                        "v2 page of 100": [],
                                        **{name: [] for name in pages}}
        with server(argv, {**env, "PETSTORE_PAGE_CACHE_BYTES": "0"}, port, BOARD,
                    cookie) as process:
            for _ in range(args.runs):
                loads["board, first page"].append(
                    wrk(f"{base}{BOARD}", cookie, args.seconds, process=process))
                loads["board, status=pending"].append(
                    wrk(f"{base}{BOARD}?status=pending", cookie, args.seconds,
                        process=process))
                loads["v2 page of 100"].append(
                    wrk(f"{base}{V2}", auth, args.seconds, process=process))
                for name, path in pages.items():
                    loads[name].append(wrk(f"{base}{path}", cookie, args.seconds,
                                           process=process))
            before = process.peak_rss_mb()
            rows, seconds = _export(port, cookie)
            after = process.peak_rss_mb()
        medians = {name: median_load(found) for name, found in loads.items()}
        lines = []
        for name, load in medians.items():
            target = TARGETS.get(name)
            comparison = (f"{load.rps / medians[target[0]].rps:.2f}x {target[0]} "
                          f"(at least {target[1]})" if target else "")
            lines.append((name, load, comparison))
        say(table(lines))
        say(f"CSV export: {rows:,} orders in {seconds:.1f} s, {rows / seconds:,.0f} rows a "
            f"second; the worker's peak memory {before:.0f} MB before, {after:.0f} MB after")


if __name__ == "__main__":
    main()
