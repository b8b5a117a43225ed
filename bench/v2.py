"""v2's list against v1's, in one run: pages from a store of 1,000,000 orders against v1's
list of a store of 100 orders, a late page, filtered and sorted pages against the first,
and a walk over every page against v1's one download of the same million. Over SQLite,
then over PostgreSQL (that of --postgres, a database of the benchmark's own, dropped
afterwards; skipped with a message where none answers).

The v2 pages are measured twice: as served (repeats answered from the page cache, as v1's
list is from its list cache), and with the cache off (PETSTORE_PAGE_CACHE_BYTES=0), where
every request reads its page from the store: those rows show what the keyset costs, and
that the size of the store and the place of the page do not change it.

One gunicorn worker (uvicorn) per server, pinned to one core, wrk on the other; the servers
take turns under load, one run each per round; a ratio is the median of rounds' ratios.

    python -m bench.v2 [--runs 3] [--seconds 3] [--orders 1000000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson

from app.core import paging
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
from bench.quotas import GUNICORN, HUGE, PETSTORE
from bench.service import measure

V1 = "/v1/store/orders"
V2 = "/v2/store/orders"
PAGE = "limit=100"
TARGETS = {  # scenario: (baseline scenario, at least)
    "v2 first page": ("v1 list of 100", 0.8),
    "v2 late page": ("v2 first page", 0.9),
    "v2 status=pending (1%)": ("v2 first page", 0.8),
    "v2 petId=7": ("v2 first page", 0.8),
    "v2 sort=-shipDate": ("v2 first page", 0.8),
}
WALK_AT_MOST = 2.5  # times v1's one download


def _rows(count: int) -> str:
    """NDJSON of count orders: 1% pending, pets 0-999 (so petId=7 has a thousandth), a
    shipDate on nine orders in ten."""
    lines = []
    for i in range(1, count + 1):
        status = "pending" if i % 100 == 0 else ("shipped" if i % 2 else "cancelled")
        dated = "" if i % 10 == 0 else (f',"shipDate":"2026-{1 + i % 12:02d}-'
                                        f'{1 + i % 28:02d}T{i % 24:02d}:00:00Z"')
        lines.append(f'{{"id":{i},"petId":{i % 1000},"quantity":1,"status":"{status}"'
                     f'{dated}}}')
    return "\n".join(lines)


def _prepare(database: str, orders: int, folder: Path) -> tuple[dict[str, str], str]:
    import subprocess

    env = {**os.environ, "PETSTORE_DATABASE": database}
    subprocess.run([*PETSTORE, "init"], env=env, check=True, capture_output=True)
    if orders:
        started = time.monotonic()
        subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                       input=_rows(orders), env=env, check=True, capture_output=True, text=True)
        say(f"  imported {orders:,} orders in {time.monotonic() - started:.0f} s")
    key = subprocess.run(
        [*PETSTORE, "keys", "create", "--plan", "enterprise", "--name", "bench",
         "--per-minute", HUGE, "--per-day", HUGE],
        env=env, check=True, capture_output=True, text=True).stdout.strip()
    return env, key


def _get(port: int, target: str, headers: dict[str, str],
         conn: http.client.HTTPConnection | None = None) -> bytes:
    conn = conn or http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("GET", target, headers=headers)
    response = conn.getresponse()
    body = response.read()
    assert response.status == 200, (response.status, body[:200])
    return body


def _walk_seconds(port: int, headers: dict[str, str], expected: int) -> float:
    """Every page of 1,000, following next, over one keep-alive connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    started = time.perf_counter()
    seen, cursor = 0, None
    while True:
        target = f"{V2}?limit=1000" + (f"&cursor={cursor}" if cursor else "")
        page = orjson.loads(_get(port, target, headers, conn))
        seen += len(page["orders"])
        cursor = page["next"]
        if cursor is None:
            break
    elapsed = time.perf_counter() - started
    assert seen == expected, (seen, expected)
    return elapsed


def _download_seconds(port: int, headers: dict[str, str], expected: int) -> float:
    started = time.perf_counter()
    body = _get(port, V1, headers)
    elapsed = time.perf_counter() - started
    assert body.count(b'"id":') == expected
    return elapsed


def run(store: str, big_db: str, small_db: str, args: argparse.Namespace,
        folder: Path) -> tuple[list[tuple[str, Load, str]], list[str]]:
    say(f"{store}: preparing {args.orders:,} orders, and 100 for v1's baseline...")
    big_env, key = _prepare(big_db, args.orders, folder)
    small_env, small_key = _prepare(small_db, 0, folder)
    import subprocess

    subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                   input=_rows(100), env=small_env, check=True, capture_output=True, text=True)
    auth = {"Authorization": f"Bearer {key}"}
    small_auth = {"Authorization": f"Bearer {small_key}"}
    late = paging.encode_cursor(paging.order_query(),
                                Position(None, args.orders - args.orders // 100))
    servers = {"cached": (big_env, {}), "uncached": (big_env, {"PETSTORE_PAGE_CACHE_BYTES": "0"}),
               "v1": (small_env, {})}
    results: dict[str, dict[str, list[Load]]] = {}
    lines: list[str] = []
    with ExitStack() as stack:
        ports, processes = {}, {}
        for who, (env, extra) in servers.items():
            port = ports[who] = free_port()
            probe_auth = small_auth if who == "v1" else auth
            processes[who] = stack.enter_context(server(
                [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"],
                {**env, "PETSTORE_RATELIMIT_STORAGE": "memory://", **extra}, port,
                V1 if who == "v1" else f"{V2}?{PAGE}", probe_auth))

        def url(who: str, query: str) -> str:
            return f"http://127.0.0.1:{ports[who]}{V2}?{query}"

        v2_queries = {
            "v2 first page": PAGE,
            "v2 late page": f"{PAGE}&cursor={late}",
            "v2 status=pending (1%)": f"{PAGE}&status=pending",
            "v2 petId=7": f"{PAGE}&petId=7",
            "v2 sort=-shipDate": f"{PAGE}&sort=-shipDate",
        }
        scenarios: dict[str, dict[str, Any]] = {
            "v1 list of 100": {
                "targets": {"v1": (f"http://127.0.0.1:{ports['v1']}{V1}", small_auth, None)},
                "processes": processes},
        }
        for name, query in v2_queries.items():
            scenarios[name] = {
                "targets": {who: (url(who, query), auth, None) for who in ("cached", "uncached")},
                "processes": processes}
        for target in [t for plan in scenarios.values() for t in plan["targets"].values()]:
            wrk(target[0], target[1], 1)  # warm up
        results = measure(scenarios, args.runs, args.seconds)

        say(f"{store}: walking {args.orders:,} orders in pages of 1,000, and downloading "
            "v1's list of them...")
        walks, downloads = [], []
        for _ in range(3):
            walks.append(_walk_seconds(ports["uncached"], auth, args.orders))
            downloads.append(_download_seconds(ports["cached"], auth, args.orders))
        walk, download = statistics.median(walks), statistics.median(downloads)
        ratio = walk / download
        lines.append(
            f"{store}: walking {args.orders:,} orders in pages of 1,000 took {walk:.2f} s, "
            f"v1's one download {download:.2f} s: {ratio:.2f}x (target <= {WALK_AT_MOST}: "
            f"{'ok' if ratio <= WALK_AT_MOST else 'ABOVE TARGET'})")

    rows: list[tuple[str, Load, str]] = []
    for scenario, by_server in results.items():
        for who, loads in by_server.items():
            comparison = ""
            target = TARGETS.get(scenario)
            if target is not None:
                baseline, at_least = target
                base = results[baseline]
                base_loads = base["v1"] if "v1" in base else base[who]
                ratio = statistics.median(s.rps / b.rps
                                          for s, b in zip(loads, base_loads, strict=True))
                comparison = (f"{ratio:.2f}x {baseline} (target >= {at_least}: "
                              f"{'ok' if ratio >= at_least else 'BELOW TARGET'})")
            label = "" if who == "v1" else f", {who}"
            rows.append((f"{store}: {scenario}{label}", median_load(loads), comparison))
    return rows, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    rows, lines = on_both_stores(run, parser.parse_args(), "v2")
    print("\nv2's list against v1's: medians of rounds; ratios are medians of each round's "
          "ratio")
    print(table(rows))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
