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

Beside them, on cancel and place, Connexion's AsyncApp alone (bench/apps.py's, with the
service's orjson jsonifier): a bearer check that is a dict lookup, the body's schema, and
a handler that writes nothing. It is the most a write reached through Connexion's router,
security, validation and a plain `def` handler can answer on this machine, whatever the
handler and the layers around it do (issue 57, D42): its ratio to the service at --against
REV bounds what the one way can win back.

One gunicorn worker per server, pinned to one core, wrk on the other, 16 connections; the
servers take turns, one run each per round (every other round in reverse order); a ratio is
the median of the rounds' ratios. Targets: each write at least 1.0 times its peer on both
stores; a write's CPU at most 3 times a read's.

With --against REV the service as it was at commit REV serves beside today's (from a git
worktree, over a database of its own, made and filled alike by that commit's CLI, so with
that commit's schema and triggers), and each row of today's service also says its
throughput as a ratio of REV's, and the read is measured on both.

    python -m bench.writes [--runs 3] [--seconds 3] [--orders 300000] [--postgres URL]
                           [--no-sqlite] [--against REV]
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from app.core.keys import digest
from bench import apps, write_baselines
from bench.harness import (
    ROOT,
    DistinctIds,
    Found,
    Load,
    free_port,
    median_load,
    on_both_stores,
    say,
    scratch_postgres,
    server,
    store_arguments,
    table,
    worktree,
)
from bench.quotas import GUNICORN, prepare
from bench.service import DELETE_SCRIPT, PLACE_SCRIPT, _service, measure

CONNECTIONS = 16
PEER = "hand-written FastAPI"
FLOOR = "Connexion's AsyncApp alone"  # bench/apps.py: the one way's floor
BEFORE = "service at "  # the name of the service at --against REV begins so
AT_LEAST = 1.0  # each write against its peer, on both stores
CPU_AT_MOST = 3.0  # a write's CPU against a read's
SHIP_SCRIPT = """
local id = {first}
request = function()
  id = id + 1
  return wrk.format("POST", "/v2/store/orders/" .. id .. "/ship")
end
"""


@contextmanager
def _before_database(store: str, args: argparse.Namespace, folder: Path) -> Iterator[str]:
    """A database of its own for the service at --against REV: two services writing one
    SQLite file would each pay the other's WAL checkpoints (bench/service.py)."""
    if store != "PostgreSQL":
        yield str(folder / "before.db")
        return
    with scratch_postgres(args.postgres, "writes") as url:
        if url is None:
            raise SystemExit("no PostgreSQL database for the service at --against")
        yield url


def run(store: str, database: str, peer_database: str, args: argparse.Namespace,
        folder: Path) -> Found:
    """Both servers (and the service at --against REV) over their own database of
    args.orders pending orders; every scenario's rows, and the lines of the verdicts."""
    say(f"{store}: preparing {args.orders:,} orders for the service and for its peer...")
    env, key = prepare(folder, args.orders, database=database)
    write_baselines.prepare(peer_database, args.orders)
    auth = {"Authorization": f"Bearer {key}"}
    service_env = {**env, "PETSTORE_RATELIMIT_STORAGE": "memory://"}
    peer_env = {**env, "PETSTORE_DATABASE": peer_database, "BENCH_KEY_DIGEST": digest(key)}
    with ExitStack() as stack:
        # name -> (command, app, tree, env, headers)
        servers: dict[str, tuple[list[str], str, Path, dict[str, str], dict[str, str]]] = {
            "service": (GUNICORN, "wsgi:app", ROOT, service_env, auth),
            PEER: (GUNICORN, "bench.write_baselines:app", ROOT, peer_env, auth),
            FLOOR: (GUNICORN, 'bench.apps:make("async+orjson")', ROOT, {},
                    {"Authorization": f"Bearer {apps.TOKEN}"}),
        }
        if args.against:
            tree = stack.enter_context(worktree(args.against))
            before_database = stack.enter_context(_before_database(store, args, folder))
            say(f"{store}: preparing {args.orders:,} orders for the service at "
                f"{args.against}...")
            # Made by that commit's own CLI: its schema, its triggers.
            before_env, before_key = prepare(folder, args.orders, database=before_database,
                                             tree=tree)
            servers[f"{BEFORE}{args.against}"] = (
                _service(tree), "wsgi:app", tree,
                {**before_env, "PETSTORE_RATELIMIT_STORAGE": "memory://"},
                {"Authorization": f"Bearer {before_key}"})
        ports = {who: free_port() for who in servers}
        processes = {
            who: stack.enter_context(server(
                [*command, "--bind", f"127.0.0.1:{ports[who]}", target], own_env,
                ports[who], apps.ONE if who == FLOOR else "/v2/store/orders/1", headers,
                tree=tree))
            for who, (command, target, tree, own_env, headers) in servers.items()}
        base = {who: f"http://127.0.0.1:{port}" for who, port in ports.items()}
        heads = {who: servers[who][4] for who in servers}
        # Each run of cancel and of ship takes ids no other run has taken: every database
        # holds the same orders, so one counter serves every server.
        cancels = DistinctIds(folder, f"{store}-cancel",
                              DELETE_SCRIPT.replace("{list}", "/v1/store/orders"))
        ships = DistinctIds(folder, f"{store}-ship", SHIP_SCRIPT, after=cancels)

        runs = iter(range(1_000_000))

        def placing() -> Path:
            number = next(runs)
            path = folder / f"{store}-place-{number}.lua"
            path.write_text(PLACE_SCRIPT.replace("{run}", f"{store}-{number}")
                            .replace("{list}", "/v2/store/orders"))
            return path

        services = [who for who in base if who == "service" or who.startswith(BEFORE)]
        writers = [who for who in base if who != FLOOR]
        # The floor's own paths: any id cancels, any body of the schema's shape places.
        floor_cancel = folder / f"{store}-floor-cancel.lua"
        floor_cancel.write_text(DELETE_SCRIPT.replace("{list}", apps.MANY)
                                .replace("{first}", "0"))
        floor_place = folder / f"{store}-floor-place.lua"
        floor_place.write_text(PLACE_SCRIPT.replace("{run}", f"{store}-floor")
                               .replace("{list}", apps.MANY))
        common = {"processes": processes, "connections": CONNECTIONS}
        scenarios: dict[str, dict[str, Any]] = {
            f"{store}: cancel (v1 DELETE)": {"targets": {
                **{who: (f"{base[who]}/v1/store/orders", heads[who], cancels)
                   for who in writers},
                FLOOR: (f"{base[FLOOR]}{apps.MANY}", heads[FLOOR], floor_cancel)}, **common},
            f"{store}: place (v2 POST)": {"targets": {
                **{who: (f"{base[who]}/v2/store/orders", heads[who], placing)
                   for who in writers},
                FLOOR: (f"{base[FLOOR]}{apps.MANY}", heads[FLOOR], floor_place)}, **common},
            f"{store}: ship (v2 POST .../ship)": {"targets": {
                who: (f"{base[who]}/v2/store/orders", heads[who], ships)
                for who in writers}, **common},
            f"{store}: read (v2 GET one order)": {"targets": {
                who: (f"{base[who]}/v2/store/orders/1", heads[who], None)
                for who in services}, **common},
        }
        results = measure(scenarios, args.runs, args.seconds)
    return verdicts(store, results)


def verdicts(store: str, results: dict[str, dict[str, list[Load]]]) -> Found:
    rows: list[tuple[str, Load, str]] = []
    lines: list[str] = []
    read = median_load(results[f"{store}: read (v2 GET one order)"]["service"])
    for scenario, by_server in results.items():
        for who, loads in by_server.items():
            parts = []
            if who == "service" and PEER in by_server:
                ratio = _ratio(loads, by_server[PEER])
                cpu = median_load(loads).cpu_us / read.cpu_us
                parts.append(f"{ratio:.2f}x {PEER} (target >= {AT_LEAST}: "
                             f"{'ok' if ratio >= AT_LEAST else 'BELOW TARGET'}), "
                             f"CPU {cpu:.1f}x a read's (target <= {CPU_AT_MOST}: "
                             f"{'ok' if cpu <= CPU_AT_MOST else 'ABOVE TARGET'})")
            if who in ("service", FLOOR):
                parts += [f"{_ratio(loads, by_server[before]):.2f}x {before}"
                          for before in by_server if before.startswith(BEFORE)]
            if who == "service" and FLOOR in by_server:
                parts.append(f"{_ratio(loads, by_server[FLOOR]):.2f}x {FLOOR}")
            comparison = ", ".join(parts)
            if comparison:
                lines.append(f"{scenario}{'' if who == 'service' else f', {who}'}: "
                             f"{comparison}")
            rows.append((f"{scenario}, {who}", median_load(loads), comparison))
    return rows, lines


def _ratio(loads: list[Load], baseline: list[Load]) -> float:
    """The median of the rounds' ratios of throughput."""
    return statistics.median(s.rps / b.rps for s, b in zip(loads, baseline, strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    store_arguments(parser)
    parser.set_defaults(orders=300_000)
    parser.add_argument("--against", metavar="REV",
                        help="also serve the service as it was at this commit, for a ratio")
    args = parser.parse_args()
    rows, lines = on_both_stores(run, args, "writes")
    print("\nWrites against hand-written FastAPI endpoints: medians of rounds; ratios are "
          "medians of each round's ratio")
    print(table(rows))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
