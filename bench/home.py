"""The console's home page with its picture of the shop over
1,000,000 orders, against a board page of 100 in the same run: its figures are read from
what the store keeps (the days' rows, the revision's counts, the catalogue's pets), so it
must be no slower than the board (target: at least 1.0x the board's requests a second).

The catalogue holds 1,000 tracked pets, some running out, so that the low-stock list has
rows to show. One gunicorn worker pinned to one core, wrk on the other, SQLite; about
two minutes with the defaults (most of it the import).

    python -m bench.home [--runs 3] [--seconds 3] [--orders 1000000]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
from pathlib import Path

from app.core.config import Settings
from app.core.storage import open_store
from bench.console import BOARD, _session
from bench.harness import Load, free_port, median_load, say, server, table, wrk
from bench.quotas import GUNICORN, PETSTORE
from bench.v2 import _rows

HOME = "/console/"
TARGET = 1.0  # the home page's requests a second, at least this many board pages'
PETS = 1_000
# Two connections: a page of HTML over a million orders takes milliseconds, and on a busy
# machine ten queued on one worker passed wrk's 2 s timeout, leaving no answer to count.
CONNECTIONS = 2


def _catalogue(database: str, orders: int) -> None:
    """1,000 tracked pets (ids 0-999, as the orders name): each has what its pending
    orders hold (bench.v2's rows: every hundredth order, of pet id % 1000, one unit) and
    0 to 19 more available, a quarter of them at or below the default threshold of 5."""
    held = dict.fromkeys(range(PETS), 0)
    for order_id in range(100, orders + 1, 100):
        held[order_id % PETS] += 1
    store = open_store(Settings(database=database))
    store.import_pets([{"id": pet_id, "name": f"Pet {pet_id}",
                        "stock": held[pet_id] + pet_id % 20} for pet_id in range(PETS)])
    store.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--orders", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="petstore-bench-home-") as folder:
        database = str(Path(folder) / "home.db")
        env = {**os.environ, "PETSTORE_DATABASE": database, "PETSTORE_KEY_LAST_USED": "false"}
        subprocess.run([*PETSTORE, "init"], env=env, check=True, capture_output=True)
        say(f"importing {args.orders:,} orders and {PETS:,} pets...")
        subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                       input=_rows(args.orders), env=env, check=True, capture_output=True,
                       text=True)
        _catalogue(database, args.orders)
        cookie = {"Cookie": f"petstore-console={_session(database)}"}
        port = free_port()
        argv = [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"]
        base = f"http://127.0.0.1:{port}"
        loads: dict[str, list[Load]] = {"home page": [], "board, first page": []}
        with server(argv, {**env, "PETSTORE_PAGE_CACHE_BYTES": "0"}, port, HOME,
                    cookie) as process:
            for _ in range(args.runs):  # interleaved, so that both see the same machine
                loads["home page"].append(wrk(f"{base}{HOME}", cookie, args.seconds,
                                              CONNECTIONS, process=process))
                loads["board, first page"].append(wrk(f"{base}{BOARD}", cookie, args.seconds,
                                                      CONNECTIONS, process=process))
        home, board = (median_load(loads[name]) for name in ("home page", "board, first page"))
        if not board.rps or not home.rps:
            raise SystemExit("a page answered nothing within wrk's timeout: the machine is "
                             "too busy for this benchmark")
        ratio = home.rps / board.rps
        say(table([("home page", home, f"{ratio:.2f}x board, first page (at least {TARGET})"),
                   ("board, first page", board, "")]))
        say(f"home page / board page of 100: {ratio:.2f}x the requests a second, "
            f"{home.cpu_us / board.cpu_us:.2f}x the worker's CPU a request "
            f"({'meets' if ratio >= TARGET else 'misses'} the target of {TARGET}x)")


if __name__ == "__main__":
    main()
