"""The catalogue in sync (D39), in one run over SQLite and then over PostgreSQL (that of
--postgres, a database of the benchmark's own, dropped afterwards; skipped with a message
where none answers). One gunicorn worker pinned to one core, wrk on the other with the
storefront and the receiver (they stand for the integrators' hosts). Rows:

- a flash sale, 16 connections placing one unit each of one pet, while a storefront follows
  the pets' feed (`wait=30`, from the cursor of the sale's start) and a webhook endpoint
  subscribed to every pet.* type receives on loopback, against the same sale with neither
  (target at least 0.9): what following the catalogue costs a sale. Each run sells a pet of
  its own; the two take turns, one run each per round, every other round in reverse order;
  the ratio is the median of the rounds' ratios. Beside it, what the storefront saw and the
  receiver got during the followed runs;
- a page of 100 of the pets' feed against a page of 100 of listPets (target at least 0.8),
  on a second server over the same database that keeps no answers
  (PETSTORE_PAGE_CACHE_BYTES=0): the feed keeps none, so both pages are read from the store.

    python -m bench.pet_feed [--runs 3] [--seconds 3] [--postgres URL] [--no-sqlite]
"""

from __future__ import annotations

import argparse
import functools
import http.client
import os
import statistics
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlencode

import orjson

from app.core import webhook_urls, webhooks
from app.core.config import Settings
from app.core.storage import open_store
from bench.harness import (
    LOAD_CPU,
    Found,
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
from bench.quotas import GUNICORN
from bench.stock import CONNECTIONS, ORDERS, PETS, SALE_UNITS, Shop, _placing, _prepare
from bench.webhooks import LOOPBACK, Receivers

SALE_AT_LEAST = 0.9  # the sale followed, against the sale alone
PAGE_AT_LEAST = 0.8  # a page of the pets' feed, against a page of listPets
FEED = "/v2/pet-changes"


class Storefront:
    """Follows the pets' feed with long polls from a thread, from a cursor, until
    stopped: how many answers it had and how many pets they held."""

    def __init__(self, port: int, auth: dict[str, str], cursor: str) -> None:
        self.port, self.auth, self.cursor = port, auth, cursor
        self.answers = self.pets = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._follow, daemon=True)
        self.thread.start()

    def _follow(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        while not self.stopping.is_set():
            query = urlencode({"after": self.cursor, "wait": 30, "limit": 100})
            conn.request("GET", f"{FEED}?{query}", headers=self.auth)
            response = conn.getresponse()
            page = orjson.loads(response.read())
            assert response.status == 200, page
            self.answers += 1
            self.pets += len(page["pets"])
            self.cursor = page["next"]
        conn.close()

    def stop(self, wake: Callable[[], object]) -> None:
        """Stop after the answer under way, which wake() (a change) ends at once."""
        self.stopping.set()
        wake()
        self.thread.join(40)


def _versus(loads: list[Load], baseline: list[Load], name: str, at_least: float) -> str:
    """The median of the rounds' ratios of loads to baseline, their spread, and the
    target's verdict."""
    ratios = [a.rps / b.rps for a, b in zip(loads, baseline, strict=True)]
    ratio = statistics.median(ratios)
    return (f"{ratio:.2f}x {name} ({min(ratios):.2f}x to {max(ratios):.2f}x; target >= "
            f"{at_least}: {'ok' if ratio >= at_least else 'BELOW TARGET'})")


def run(store: str, database: str, _other: str, args: argparse.Namespace,
        folder: Path) -> Found:
    say(f"{store}: preparing the catalogue...")
    env, key = _prepare(database, 1000)
    auth = {"Authorization": f"Bearer {key}"}
    lines: list[str] = []
    rows: list[tuple[str, Load, str]] = []
    settings = {"PETSTORE_RATELIMIT_STORAGE": "memory://",
                "PETSTORE_WEBHOOK_ALLOWED_NETWORKS": LOOPBACK, "PETSTORE_LOG_LEVEL": "warning"}
    with ExitStack() as stack:
        port = free_port()
        process = stack.enter_context(server(
            [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"], {**env, **settings}, port,
            f"{ORDERS}/1", auth))
        shop = Shop(port, auth)
        for n in range(100):
            shop.add(f"listed {n}", 10 + n, category="dogs" if n % 2 else "cats")
        own = open_store(Settings(database=database))
        stack.callback(own.dispose)
        receiver = Receivers(1)
        stack.callback(receiver.close)
        url = f"http://127.0.0.1:{port}{ORDERS}"

        alone: list[Load] = []
        followed: list[Load] = []
        seen = got = 0
        for round_ in range(1, args.runs + 1):
            turns = ["alone", "followed"] if round_ % 2 else ["followed", "alone"]
            for turn in turns:
                pet = shop.add(f"sale {round_} {turn}", SALE_UNITS)
                script = _placing(folder, f"{store}-{turn}-{round_}", pet)()
                if turn == "alone":
                    load = wrk(url, auth, args.seconds, connections=CONNECTIONS,
                               script=script, process=process)
                    alone.append(load)
                else:
                    cursor = shop.call("GET", f"{FEED}?limit=1000")["next"]
                    while True:  # past every pet: the storefront then waits for the sale
                        page = shop.call("GET", f"{FEED}?limit=1000&after={cursor}")
                        cursor = page["next"]
                        if not page["pets"]:
                            break
                    endpoint, _ = webhooks.create(own, None, receiver.urls()[0],
                                                  list(webhooks.PET_TYPES), None,
                                                  webhook_urls.networks(LOOPBACK))
                    time.sleep(1.5)  # claimed by the worker's deliverer
                    before = receiver.received()
                    storefront = Storefront(port, auth, cursor)
                    load = wrk(url, auth, args.seconds, connections=CONNECTIONS,
                               script=script, process=process)
                    storefront.stop(functools.partial(
                        shop.call, "POST", f"{PETS}/{pet}/adjust-stock", {"delta": 1}))
                    seen += storefront.pets
                    got += receiver.received() - before
                    own.delete_webhook_endpoint(endpoint.id)
                    followed.append(load)
                say(f"{store}: flash sale, {turn}, run {round_}/{args.runs}: "
                    f"{load.rps:.0f} req/s, p99 {load.p99_ms:.1f} ms")
        rows.append((f"{store}: flash sale, alone", median_load(alone), ""))
        rows.append((f"{store}: flash sale, followed", median_load(followed),
                     _versus(followed, alone, "alone", SALE_AT_LEAST)))
        sold = sum(load.requests - load.non_2xx for load in followed)
        lines.append(f"{store}: during the followed sales ({sold:,} places), the storefront's "
                     f"long polls brought the pet {seen:,} times and the receiver got {got:,} "
                     f"pet.* messages (each the pet as it was when read: a feed and an "
                     f"endpoint that lag get it once)")

        made_port = free_port()
        with server([*GUNICORN, "--bind", f"127.0.0.1:{made_port}", "wsgi:app"],
                    {**env, **settings, "PETSTORE_PAGE_CACHE_BYTES": "0",
                     "PETSTORE_WEBHOOKS_ENABLED": "false"}, made_port, f"{ORDERS}/1",
                    auth) as made:
            base = f"http://127.0.0.1:{made_port}"
            feed_pages: list[Load] = []
            list_pages: list[Load] = []
            for round_ in range(1, args.runs + 1):
                for name in (["feed", "list"] if round_ % 2 else ["list", "feed"]):
                    target = f"{FEED}?limit=100" if name == "feed" else f"{PETS}?limit=100"
                    load = wrk(f"{base}{target}", auth, args.seconds, process=made)
                    (feed_pages if name == "feed" else list_pages).append(load)
                    say(f"{store}: a page of 100, {name}, run {round_}/{args.runs}: "
                        f"{load.rps:.0f} req/s")
        rows.append((f"{store}: listPets page of 100", median_load(list_pages), ""))
        rows.append((f"{store}: pet feed page of 100", median_load(feed_pages),
                     _versus(feed_pages, list_pages, "listPets", PAGE_AT_LEAST)))
    return rows, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    args = parser.parse_args()
    if (os.cpu_count() or 1) >= 2:
        os.sched_setaffinity(0, {int(LOAD_CPU)})  # the storefront and receiver: wrk's core
    rows, lines = on_both_stores(run, args, "pet-feed")
    print("\nThe catalogue in sync: medians of rounds; ratios are medians of each round's "
          "ratio")
    print(table(rows))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
