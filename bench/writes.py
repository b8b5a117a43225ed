"""The service's writes against hand-written endpoints (issue 34), in one run, over SQLite
and then over PostgreSQL (that of --postgres, databases of the benchmark's own, dropped
afterwards; skipped with a message where none answers).

The peer is bench/write_baselines.py: FastAPI as its docs teach it (sync handlers over the
database, an `async def` key check) over a plain table of orders, with the service's
durability (WAL and synchronous=FULL on SQLite, synchronous commits on PostgreSQL). Rows:

- cancel: v1's DELETE of distinct pending orders (read, 404/409, update, one transaction);
- place: v2's POST of new orders, each under an Idempotency-Key of its own (the peer: one
  INSERT returning the order);
- ship: v2's POST .../ship of distinct pending orders;
- read: v2's GET of one order, the service alone, for the CPU a write costs against a read.

One gunicorn worker per server, pinned to one core, wrk on the other, 16 connections; the
servers take turns, one run each per round (every other round in reverse order); a ratio is
the median of the rounds' ratios. Targets: each write at least 1.0 times its peer on both
stores; a write's CPU at most 3 times a read's.

    python -m bench.writes [--runs 3] [--seconds 3] [--orders 300000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import statistics
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from app.core.keys import digest
from bench import write_baselines
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
)
from bench.quotas import GUNICORN, prepare
from bench.service import DELETE_SCRIPT, PLACE_SCRIPT, measure

CONNECTIONS = 16
PEER = "hand-written FastAPI"
AT_LEAST = 1.0  # each write against its peer, on both stores
CPU_AT_MOST = 3.0  # a write's CPU against a read's
SHIP_SCRIPT = """
local id = {first}
request = function()
  id = id + 1
  return wrk.format("POST", "/v2/store/orders/" .. id .. "/ship")
end
"""


def run(store: str, database: str, peer_database: str, args: argparse.Namespace,
        folder: Path) -> Found:
    """Both servers over their own database of args.orders pending orders; every scenario's
    rows, and the lines of the verdicts."""
    say(f"{store}: preparing {args.orders:,} orders for the service and for its peer...")
    env, key = prepare(folder, args.orders, database=database)
    write_baselines.prepare(peer_database, args.orders)
    auth = {"Authorization": f"Bearer {key}"}
    service_env = {**env, "PETSTORE_RATELIMIT_STORAGE": "memory://"}
    peer_env = {**env, "PETSTORE_DATABASE": peer_database, "BENCH_KEY_DIGEST": digest(key)}
    with ExitStack() as stack:
        ports = {"service": free_port(), PEER: free_port()}
        processes = {
            "service": stack.enter_context(server(
                [*GUNICORN, "--bind", f"127.0.0.1:{ports['service']}", "wsgi:app"],
                service_env, ports["service"], "/v2/store/orders/1", auth)),
            PEER: stack.enter_context(server(
                [*GUNICORN, "--bind", f"127.0.0.1:{ports[PEER]}",
                 "bench.write_baselines:app"],
                peer_env, ports[PEER], "/v2/store/orders/1", auth)),
        }
        base = {who: f"http://127.0.0.1:{port}" for who, port in ports.items()}
        # Each run of cancel and of ship takes ids no other run has taken: both databases
        # hold the same orders, so one counter serves both servers.
        slots = args.runs * len(ports) * 2 + 1
        step = args.orders // slots
        taken = {"next": 0}

        def ranged(template: str, name: str) -> Any:
            def script() -> Path:
                path = folder / f"{store}-{name}-{taken['next']}.lua"
                path.write_text(template.replace("{first}", str(taken["next"]))
                                .replace("{list}", "/v1/store/orders"))
                taken["next"] += step
                return path
            return script

        runs = iter(range(1_000_000))

        def placing() -> Path:
            number = next(runs)
            path = folder / f"{store}-place-{number}.lua"
            path.write_text(PLACE_SCRIPT.replace("{run}", f"{store}-{number}")
                            .replace("{list}", "/v2/store/orders"))
            return path

        common = {"processes": processes, "connections": CONNECTIONS}
        scenarios: dict[str, dict[str, Any]] = {
            f"{store}: cancel (v1 DELETE)": {"targets": {
                who: (f"{url}/v1/store/orders", auth, ranged(DELETE_SCRIPT, "cancel"))
                for who, url in base.items()}, **common},
            f"{store}: place (v2 POST)": {"targets": {
                who: (f"{url}/v2/store/orders", auth, placing)
                for who, url in base.items()}, **common},
            f"{store}: ship (v2 POST .../ship)": {"targets": {
                who: (f"{url}/v2/store/orders", auth, ranged(SHIP_SCRIPT, "ship"))
                for who, url in base.items()}, **common},
            f"{store}: read (v2 GET one order)": {"targets": {
                "service": (f"{base['service']}/v2/store/orders/1", auth, None)}, **common},
        }
        results = measure(scenarios, args.runs, args.seconds)
    return verdicts(store, results)


def verdicts(store: str, results: dict[str, dict[str, list[Load]]]) -> Found:
    rows: list[tuple[str, Load, str]] = []
    lines: list[str] = []
    read = median_load(results[f"{store}: read (v2 GET one order)"]["service"])
    for scenario, by_server in results.items():
        for who, loads in by_server.items():
            comparison = ""
            if who == "service" and PEER in by_server:
                ratio = statistics.median(s.rps / b.rps for s, b in
                                          zip(loads, by_server[PEER], strict=True))
                cpu = median_load(loads).cpu_us / read.cpu_us
                comparison = (f"{ratio:.2f}x {PEER} (target >= {AT_LEAST}: "
                              f"{'ok' if ratio >= AT_LEAST else 'BELOW TARGET'}), "
                              f"CPU {cpu:.1f}x a read's (target <= {CPU_AT_MOST}: "
                              f"{'ok' if cpu <= CPU_AT_MOST else 'ABOVE TARGET'})")
                lines.append(f"{scenario}: {comparison}")
            rows.append((f"{scenario}, {who}", median_load(loads), comparison))
    return rows, lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    parser.set_defaults(orders=300_000)
    args = parser.parse_args()
    rows, lines = on_both_stores(run, args, "writes")
    print("\nWrites against hand-written FastAPI endpoints: medians of rounds; ratios are "
          "medians of each round's ratio")
    print(table(rows))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
