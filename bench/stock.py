"""The catalogue and its stock (D32-D34), in one run over SQLite and then over PostgreSQL
(that of --postgres, a database of the benchmark's own, dropped afterwards; skipped with a
message where none answers). The service as served (and, for the inventory's row, a second
one keeping no answers), one gunicorn worker pinned to one core, wrk on the other; the
compared loads take turns, one run each per round, every other round in reverse order; a
ratio is the median of the rounds' ratios. Rows:

- place for a tracked pet against place for an untracked one (target at least 0.9): what
  reserving the units costs a placing;
- a flash sale, 16 connections placing one unit each of one pet with 10,000 units, against
  the same places spread over 100 pets (target at least 0.8): what the contention on one
  pet's row costs; then one sale to the end, which must sell exactly its 10,000 units and
  refuse the rest as out_of_stock;
- a page of listPets (100 pets) against a page of v2's orders (100 orders; target at least
  0.8);
- getInventory against a read of one order (target at least 1.0), in at least 15 rounds,
  each answer made by its handler: a second server over the same database keeps no
  answers (PETSTORE_PAGE_CACHE_BYTES=0), so the row weighs what the inventory costs to
  read (D34: one row the store keeps, never a scan). The same pair repeated on the first
  server is printed beside it: kept answers both, one code path, so it reads about 1.0
  (the inventory's answer is a few bytes longer) and has no target; it too runs at least
  15 rounds.

The pets are added over the API (POST /v2/pets), as a shop would.

    python -m bench.stock [--runs 3] [--seconds 3] [--orders 10000] [--postgres URL]
                          [--no-sqlite]
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

from bench.harness import (
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
from bench.quotas import GUNICORN, HUGE, PETSTORE
from bench.service import measure

ORDERS = "/v2/store/orders"
PETS = "/v2/pets"
CONNECTIONS = 16
SALE_UNITS = 10_000
SALE_SECONDS = 2  # a run of the sale must not sell its 10,000 units out (about 4,000 a second)
SALE_MOST_SECONDS = 90  # the longest the sale to the end is driven
SPREAD = 100  # pets the places of the sale's baseline are spread over
PLENTY = 1_000_000_000  # the most stock a pet may have: never sold out in a run
# getInventory and getOrder cost within a few percent of each other (one row each), and
# rounds on a busy machine spread by a fifth either way: the pair takes more rounds than the
# others for its median to say which side of 1.0 it is.
EVEN_RUNS = 15
TARGETS = {  # row: (baseline row, at least)
    "place, tracked pet": ("place, untracked pet", 0.9),
    "flash sale, one pet": ("places spread over 100 pets", 0.8),
    "listPets page of 100": ("v2 orders page of 100", 0.8),
    "getInventory, made": ("getOrder, made", 1.0),
}
# The pairs printed with their ratio and no target: the kept answers of one code path.
SIDE_BY_SIDE = {"getInventory, kept": "getOrder, kept"}
PLACE_SCRIPT = """
local n = 0
request = function()
  n = n + 1
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = "{run}-" .. n
  local pet = {first} + (n % {pets})
  return wrk.format("POST", "/v2/store/orders", headers,
                    '{"petId": ' .. pet .. ', "quantity": 1}')
end
"""


def _orders(count: int) -> str:
    """NDJSON of count orders over pets that the catalogue does not hold (imports are not
    held to the catalogue), a quarter of them pending."""
    statuses = ("pending", "shipped", "cancelled", "shipped")
    return "\n".join(f'{{"id":{i},"petId":{10_000_000 + i % 1000},"quantity":1,'
                     f'"status":"{statuses[i % 4]}"}}' for i in range(1, count + 1))


def _prepare(database: str, orders: int) -> tuple[dict[str, str], str]:
    env = {**os.environ, "PETSTORE_DATABASE": database}
    subprocess.run([*PETSTORE, "init"], env=env, check=True, capture_output=True)
    subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                   input=_orders(orders), env=env, check=True, capture_output=True, text=True)
    key = subprocess.run(
        [*PETSTORE, "keys", "create", "--plan", "enterprise", "--name", "bench",
         "--per-minute", HUGE, "--per-day", HUGE],
        env=env, check=True, capture_output=True, text=True).stdout.strip()
    return env, key


class Shop:
    """The service's API, a connection a call (the worker closes one left idle while wrk
    runs)."""

    def __init__(self, port: int, auth: dict[str, str]) -> None:
        self.port = port
        self.auth = auth
        self.keys = itertools.count()

    def call(self, method: str, target: str, body: Any = None,
             expect: int = 200) -> Any:
        headers = {**self.auth}
        if body is not None:
            headers["Content-Type"] = "application/json"
            headers["Idempotency-Key"] = f"bench-{next(self.keys)}"
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            conn.request(method, target,
                         body=orjson.dumps(body) if body is not None else None, headers=headers)
            response = conn.getresponse()
            answer = response.read()
        finally:
            conn.close()
        assert response.status == expect, (method, target, response.status, answer[:300])
        return orjson.loads(answer) if answer else None

    def add(self, name: str, stock: int | None = None, **more: Any) -> int:
        body = {"name": name, **({"stock": stock} if stock is not None else {}), **more}
        return int(self.call("POST", PETS, body, expect=201)["id"])


def _placing(folder: Path, name: str, first: int, pets: int = 1) -> Callable[[], Path]:
    """A Lua script per run, placing one unit each of pets first..first+pets-1 under keys
    no run has used."""
    runs = itertools.count()

    def script() -> Path:
        path = folder / f"{name}-{next(runs)}.lua"
        path.write_text(PLACE_SCRIPT.replace("{run}", path.stem).replace("{first}", str(first))
                        .replace("{pets}", str(pets)))
        return path

    return script


def _sale_seconds(rate: float) -> int:
    """How long to drive a sale of SALE_UNITS so that it sells out with time to spare, at
    rate places a second (the flash sale's, measured just before): twice the time its units
    take, at least 8 s and at most SALE_MOST_SECONDS. One run of wrk, so that every place it
    sent is counted (a place still in flight when a run ends would be sold and not counted)."""
    return int(min(SALE_MOST_SECONDS, max(8.0, 2 * SALE_UNITS / max(rate, 1.0))))


def _sale_to_the_end(store: str, shop: Shop, port: int, auth: dict[str, str],
                     folder: Path, rate: float) -> str:
    """A sale of 10,000 units driven until well past selling out: exactly those units sold,
    every other place refused."""
    pet = shop.add("flash sale, to the end", SALE_UNITS)
    units_before = shop.call("GET", "/v2/store/inventory")["orders"]["pending"]
    started = time.monotonic()
    load = wrk(f"http://127.0.0.1:{port}{ORDERS}", auth, _sale_seconds(rate),
               connections=CONNECTIONS, script=_placing(folder, f"{store}-end", pet)())
    seconds = time.monotonic() - started
    after = shop.call("GET", f"{PETS}/{pet}")
    units = shop.call("GET", "/v2/store/inventory")["orders"]["pending"] - units_before
    sold = load.requests - load.non_2xx
    exact = (after["reserved"], after["available"], after["status"], units, sold) == (
        SALE_UNITS, 0, "pending", SALE_UNITS, SALE_UNITS)
    if exact:
        verdict = "exactly its units, ok"
    elif (load.non_2xx == 0 and after["available"] > 0
          and after["reserved"] + after["available"] == SALE_UNITS):
        verdict = "NOT SOLD OUT in its time, nothing told: run it on a quieter machine"
    else:
        verdict = "WRONG"
    return (f"{store}: a sale of {SALE_UNITS:,} units to {CONNECTIONS} connections for "
            f"{seconds:.0f} s: {sold:,} places answered 201, {load.non_2xx:,} refused, the pet "
            f"reserved {after['reserved']:,} and {after['available']} available, "
            f"{units:,} units pending: {verdict}")


def run(store: str, database: str, _other: str, args: argparse.Namespace,
        folder: Path) -> Found:
    say(f"{store}: preparing {args.orders:,} orders and the catalogue...")
    env, key = _prepare(database, args.orders)
    auth = {"Authorization": f"Bearer {key}"}
    lines: list[str] = []
    with ExitStack() as stack:
        port = free_port()
        process = stack.enter_context(server(
            [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"],
            {**env, "PETSTORE_RATELIMIT_STORAGE": "memory://"}, port, f"{ORDERS}/1", auth))
        shop = Shop(port, auth)
        untracked = shop.add("untracked")
        tracked = shop.add("tracked", PLENTY)
        spread = [shop.add(f"spread {n}", PLENTY) for n in range(SPREAD)]
        assert spread == list(range(spread[0], spread[0] + SPREAD))
        for n in range(100):
            shop.add(f"listed {n}", n, category="dogs" if n % 2 else "cats",
                     tags=["puppy"] if n % 3 else ["adult"])
        sales = iter([shop.add(f"flash sale {n}", SALE_UNITS) for n in range(args.runs + 1)])

        def sale() -> Path:
            return _placing(folder, f"{store}-sale-{time.monotonic_ns()}", next(sales))()

        url = f"http://127.0.0.1:{port}"

        def pair(a: tuple[str, Any], b: tuple[str, Any], seconds: int,
                 runs: int = args.runs, on: Any = process) -> dict[str, list[Load]]:
            (a_name, a_target), (b_name, b_target) = a, b
            plan = {"targets": {a_name: a_target, b_name: b_target},
                    "processes": {a_name: on, b_name: on},
                    "connections": CONNECTIONS}
            return measure({f"{store}: {a_name}": plan}, runs, seconds)[f"{store}: {a_name}"]

        results: dict[str, list[Load]] = {}
        results.update(pair(
            ("place, tracked pet", (f"{url}{ORDERS}", auth,
                                    _placing(folder, f"{store}-t", tracked))),
            ("place, untracked pet", (f"{url}{ORDERS}", auth,
                                      _placing(folder, f"{store}-u", untracked))),
            args.seconds))
        results.update(pair(
            ("flash sale, one pet", (f"{url}{ORDERS}", auth, sale)),
            ("places spread over 100 pets", (f"{url}{ORDERS}", auth,
                                             _placing(folder, f"{store}-s", spread[0], SPREAD))),
            SALE_SECONDS))
        results.update(pair(
            ("listPets page of 100", (f"{url}{PETS}?limit=100", auth, None)),
            ("v2 orders page of 100", (f"{url}{ORDERS}?limit=100", auth, None)),
            args.seconds))
        results.update(pair(
            ("getInventory, kept", (f"{url}/v2/store/inventory", auth, None)),
            ("getOrder, kept", (f"{url}{ORDERS}/1", auth, None)),
            args.seconds, max(args.runs, EVEN_RUNS)))
        made_port = free_port()
        with server([*GUNICORN, "--bind", f"127.0.0.1:{made_port}", "wsgi:app"],
                    {**env, "PETSTORE_RATELIMIT_STORAGE": "memory://",
                     "PETSTORE_PAGE_CACHE_BYTES": "0"}, made_port, f"{ORDERS}/1",
                    auth) as made:
            made_url = f"http://127.0.0.1:{made_port}"
            results.update(pair(
                ("getInventory, made", (f"{made_url}/v2/store/inventory", auth, None)),
                ("getOrder, made", (f"{made_url}{ORDERS}/1", auth, None)),
                args.seconds, max(args.runs, EVEN_RUNS), made))
        rate = median_load(results["flash sale, one pet"]).rps
        lines.append(_sale_to_the_end(store, shop, port, auth, folder, rate))

    rows: list[tuple[str, Load, str]] = []
    for name, loads in results.items():
        comparison = ""
        if name in TARGETS or name in SIDE_BY_SIDE:
            baseline, at_least = TARGETS.get(name, (SIDE_BY_SIDE.get(name, ""), None))
            ratios = [s.rps / b.rps for s, b in zip(loads, results[baseline], strict=True)]
            ratio = statistics.median(ratios)
            verdict = ("no target" if at_least is None else f"target >= {at_least}: "
                       f"{'ok' if ratio >= at_least else 'BELOW TARGET'}")
            comparison = (f"{ratio:.2f}x {baseline} ({len(ratios)} rounds, {min(ratios):.2f}x "
                          f"to {max(ratios):.2f}x; {verdict})")
            lines.append(f"{store}: {name}: {comparison}")
        rows.append((f"{store}: {name}", median_load(loads), comparison))
    return rows, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    parser.set_defaults(orders=10_000)
    args = parser.parse_args()
    rows, lines = on_both_stores(run, args, "stock")
    print("\nThe catalogue and its stock: medians of rounds; ratios are medians of each "
          "round's ratio")
    print(table(rows))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
