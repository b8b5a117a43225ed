"""How the feed's positions are given on PostgreSQL (D26), measured: write
throughput of concurrent single-order UPDATEs under four triggers, on a database of the
benchmark's own (10,000 orders), the ways taking turns round by round:

- the revision row, locked by every statement that writes orders (before it touches
  one) until its transaction commits, and raised by the first change (what migration 8
  does: positions in commit order, and the answer caches' revision);
- a transaction id (the xid8 way: no shared lock, but the reader must hold back every
  position at or past pg_snapshot_xmin, and the caches would need another revision);
- no position at all (the version trigger alone: the upper bound);
- main before the feed: the statement trigger of migration 4 that raised the revision for
  the caches, which locked the same row until commit.

    python -m bench.positions [--threads 16] [--runs 3] [--seconds 4] [--postgres URL]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time

from app.core.config import Settings
from app.core.storage import open_store
from bench.harness import say, scratch_postgres

VERSION = "IF TG_OP = 'UPDATE' AND NEW.version = OLD.version THEN " \
          "NEW.version := OLD.version + 1; END IF;"
FUNCTION = ("CREATE OR REPLACE FUNCTION take_order_position() RETURNS trigger "
            "LANGUAGE plpgsql AS $$ BEGIN {body} RETURN NEW; END $$;")
NO_STATEMENT_TRIGGER = ("DROP TRIGGER IF EXISTS orders_update_raises_revision ON orders; "
                        "DROP TRIGGER IF EXISTS orders_lock_revision ON orders;")
LOCK_TRIGGER = ("CREATE TRIGGER orders_lock_revision BEFORE INSERT OR UPDATE ON orders "
                "FOR EACH STATEMENT EXECUTE FUNCTION lock_orders_revision();")
STATEMENT_TRIGGER = ("CREATE OR REPLACE TRIGGER orders_update_raises_revision AFTER UPDATE "
                     "ON orders REFERENCING NEW TABLE AS changed FOR EACH STATEMENT "
                     "EXECUTE FUNCTION raise_orders_revision();")


def commits_per_second(url: str, seconds: float, threads: int) -> float:
    import psycopg

    done = [0] * threads
    stop = time.monotonic() + seconds

    def work(i: int) -> None:
        rnd = random.Random(i)
        with psycopg.connect(url, autocommit=True) as conn:
            while time.monotonic() < stop:
                conn.execute("UPDATE orders SET quantity = quantity + 1 WHERE id = %s",
                             (rnd.randint(1, 10_000),))
                done[i] += 1

    workers = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(done) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=16, help="concurrent writers")
    parser.add_argument("--runs", type=int, default=3, help="rounds")
    parser.add_argument("--seconds", type=float, default=4, help="length of each run")
    parser.add_argument("--postgres", default=os.environ.get(
        "PETSTORE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL where the benchmark may create its database")
    args = parser.parse_args()
    import psycopg

    with scratch_postgres(args.postgres, "positions") as url:
        if url is None:
            return
        store = open_store(Settings(database=url))
        store.import_orders({"id": i, "petId": 1, "quantity": 1} for i in range(1, 10_001))
        store.dispose()
        with psycopg.connect(url) as conn:
            row = conn.execute("SELECT pg_get_functiondef('take_order_position'::regproc)"
                               ).fetchone()
            assert row is not None
        ways = {
            "revision row, until commit (migration 8)": NO_STATEMENT_TRIGGER + row[0] + ";"
            + LOCK_TRIGGER,
            "transaction id (xid8)": NO_STATEMENT_TRIGGER + FUNCTION.format(
                body=VERSION + " NEW.position := pg_current_xact_id()::text::bigint;"),
            "no position (upper bound)": NO_STATEMENT_TRIGGER + FUNCTION.format(body=VERSION),
            "main before the feed (statement trigger)": NO_STATEMENT_TRIGGER
            + FUNCTION.format(body=VERSION) + STATEMENT_TRIGGER,
        }
        found: dict[str, list[float]] = {way: [] for way in ways}
        for run in range(args.runs):
            for way, sql in ways.items() if run % 2 == 0 else reversed(ways.items()):
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(sql)
                found[way].append(commits_per_second(url, args.seconds, args.threads))
                say(f"{way}, run {run + 1}/{args.runs}: {found[way][-1]:.0f} commits/s")
    base = statistics.median(found["main before the feed (statement trigger)"])
    print(f"\nConcurrent single-order UPDATEs on PostgreSQL, {args.threads} writers (medians)")
    for way, values in found.items():
        median = statistics.median(values)
        print(f"{way:<44} {median:>7.0f} commits/s  {median / base:.2f}x main before")


if __name__ == "__main__":
    main()
