"""The two stores side by side: the service over SQLite and over PostgreSQL, the same
orders, the same key, for lists and cancels.

One gunicorn worker (uvicorn) per store, pinned to one core, wrk on the other; the two
servers take turns under load, one run each per round, and a ratio is the median of the
rounds' ratios (PostgreSQL / SQLite). PostgreSQL is the one of --postgres (a database of
the benchmark's own is created there and dropped afterwards); it runs on this same
machine, unpinned, so it competes with both for the two cores, and every request pays a
round trip to it over loopback.

    python -m bench.stores [--runs 5] [--seconds 3] [--postgres postgresql://...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.harness import (
    DistinctIds,
    Load,
    free_port,
    median_load,
    say,
    scratch_postgres,
    server,
    table,
    wrk,
)
from bench.quotas import GUNICORN, LIST, prepare
from bench.service import DELETE_SCRIPT, measure

STORES = ("SQLite", "PostgreSQL")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="rounds per scenario")
    parser.add_argument("--seconds", type=int, default=3, help="length of each run")
    parser.add_argument("--postgres", default=os.environ.get(
        "PETSTORE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL where the benchmark may create its database "
             "(default $PETSTORE_BENCH_POSTGRES_URL or the local server)")
    args = parser.parse_args()

    with scratch_postgres(args.postgres, "stores") as database:
        if database is None:
            return
        rows = run(args, database)
    print("\nThe service over each store: medians of rounds; ratios are medians of each "
          "round's ratio")
    print(table(rows))


def run(args: argparse.Namespace, postgres: str) -> list[tuple[str, Load, str]]:
    results: dict[str, dict[str, list[Load]]] = {}
    with tempfile.TemporaryDirectory(prefix="petstore-bench-") as folder:
        for size in (10, 100_000):
            say(f"preparing {size:,} orders in each store...")
            databases = {"SQLite": str(Path(folder) / f"orders-{size}.db"),
                         "PostgreSQL": postgres}
            if size != 10:
                _empty(postgres)
            prepared = {store: prepare(Path(folder) / f"{store}-{size}", size, database)
                        for store, database in databases.items()}
            with ExitStack() as stack:
                processes, urls, auths = {}, {}, {}
                for store, (env, key) in prepared.items():
                    port = free_port()
                    auths[store] = {"Authorization": f"Bearer {key}"}
                    urls[store] = f"http://127.0.0.1:{port}{LIST}"
                    processes[store] = stack.enter_context(server(
                        [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"],
                        {**env, "PETSTORE_RATELIMIT_STORAGE": "memory://"}, port, LIST,
                        auths[store]))
                    wrk(urls[store], auths[store], 1)  # warm up
                plan: dict[str, Any] = {
                    "targets": {store: (urls[store], auths[store], None) for store in STORES},
                    "processes": processes}
                results.update(measure({f"GET list of {size:,}": plan}, args.runs,
                                       args.seconds))
                if size != 10:
                    deletes = {store: DistinctIds(Path(folder), f"delete-{store}",
                                                  DELETE_SCRIPT.replace("{list}", LIST))
                               for store in STORES}
                    plan = {"targets": {store: (urls[store], auths[store], deletes[store])
                                        for store in STORES},
                            "processes": processes}
                    results.update(measure({"DELETE of pending orders": plan}, args.runs,
                                           args.seconds))
    rows = []
    for scenario, by_store in results.items():
        ratio = statistics.median(p.rps / s.rps for p, s in
                                  zip(by_store["PostgreSQL"], by_store["SQLite"], strict=True))
        for store in STORES:
            comparison = f"{ratio:.2f}x SQLite" if store == "PostgreSQL" else ""
            rows.append((f"{scenario}, {store}", median_load(by_store[store]), comparison))
    return rows


def _empty(url: str) -> None:
    """Drop the benchmark database's tables, so that the next size starts afresh."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public")


if __name__ == "__main__":
    main()
