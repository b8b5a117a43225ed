"""The service against its baselines: plain Flask (gunicorn's sync worker, the json module)
and a raw ASGI callable (pre-encoded bytes, the same uvicorn worker), in one run.

Every server has one worker pinned to one core, wrk runs on the other, and all servers of a
scenario serve side by side and take turns under load, one run each per round; ratios are
medians of the rounds' ratios. Each scenario runs at 16 and at 64 connections, and reports
p50, p99 and p99/p50 (the tail an integrator sees). An unpinned block then serves the list
of the smallest size with server and wrk sharing both cores, as on a small virtual machine
with nothing pinned. The service runs as `petstore serve` runs it (its gunicorn settings,
app/web/gunicorn_conf.py), with quotas on (memory://) and an Enterprise key whose limits
cannot be reached.

With --against REV the service as it was at commit REV serves beside today's (from a git
worktree, same database, same settings), and each scenario's row says today's throughput
as a ratio of REV's: the before/after of a change, measured in one run.

    python -m bench.service [--runs 5] [--seconds 3] [--sizes 10,1000,100000]
                            [--connections 16,64] [--against REV]
"""

from __future__ import annotations

import argparse
import http.client
import math
import shutil
import sqlite3
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.harness import (
    ROOT,
    DistinctIds,
    Load,
    free_port,
    median_load,
    say,
    server,
    table,
    worktree,
    wrk,
)
from bench.quotas import GUNICORN, LIST, SERVICE_CONFIG, add_orders, prepare

SYNC = [sys.executable, "-m", "gunicorn", "--worker-class", "sync", "--workers", "1",
        "--no-control-socket", "--log-level", "warning"]
SERVERS = {
    "service": (GUNICORN, "wsgi:app"),
    "plain Flask": (SYNC, "bench.baselines:flask_app"),
    "raw ASGI": (GUNICORN, "bench.baselines:asgi_app"),
    "bare FastAPI": (GUNICORN, "bench.baselines:fastapi_app"),
    "FastAPI with slowapi": (GUNICORN, "bench.baselines:fastapi_slowapi_app"),
}
# The FastAPI baselines serve the smallest list only (pydantic validates every order of
# every answer: a list of 100,000 takes seconds), its 304, the bad key and v2's order.
FASTAPI = ("bare FastAPI", "FastAPI with slowapi")
ONE_ORDER = "/v2/store/orders/1"
# Issue 27's targets, for the list of 10: throughput against each FastAPI baseline at 16
# connections, and the tail at 64 against bare FastAPI's.
AGAINST_FASTAPI = {"bare FastAPI": 0.8, "FastAPI with slowapi": 2.0}
BAD_KEY = {"Authorization": "Bearer psk_" + "x" * 43}
DELETE_SCRIPT = """
local id = {first}
request = function()
  id = id + 1
  return wrk.format("DELETE", "{list}/" .. id)
end
"""
# Orders placed under a new Idempotency-Key each (issue 25), the key unique to the run.
PLACE_SCRIPT = """
local n = 0
request = function()
  n = n + 1
  local headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = "application/json"
  headers["Idempotency-Key"] = "{run}-" .. n
  return wrk.format("POST", "{list}", headers, '{"petId": 7, "quantity": 1}')
end
"""
PLACE_AT_MOST = 2.0  # issue 25: placing costs at most twice a cancel
# Issue 17's targets, for the list of 10, the list of 1,000 and the cancel, at every
# connection count: the tail at most 3 times the median, and at most twice plain Flask's.
TAIL_AT_MOST = 3.0
P99_AT_MOST_FLASK = 2.0
TAILED = ("GET list of 10,", "GET list of 1,000,", "DELETE of pending orders")
THROUGHPUT = {  # scenario prefix: (baseline, at least)
    "GET list of 10, 16 connections": ("plain Flask", 0.8),
    "GET list of 10, 64 connections": ("plain Flask", 0.8),
    "GET list of 10, unpinned": ("plain Flask", 0.6),
    "GET list of 1,000,": ("plain Flask", 1.5),
    "GET list of 100,000,": ("plain Flask", 5.0),
}


def etag_of(port: int, headers: dict[str, str]) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", LIST, headers=headers)
    response = conn.getresponse()
    response.read()
    return response.getheader("ETag") or ""


def measure(scenarios: dict[str, dict[str, Any]], runs: int,
            seconds: int) -> dict[str, dict[str, list[Load]]]:
    """scenario -> server -> loads, each scenario's servers taking turns round by round. A
    plan may set "connections" (10 by default) and "pin" (True)."""
    results: dict[str, dict[str, list[Load]]] = {}
    for name, plan in scenarios.items():
        targets: dict[str, tuple[str, dict[str, str], Path | None]] = plan["targets"]
        processes = plan["processes"]
        results[name] = {who: [] for who in targets}
        for run in range(1, runs + 1):
            # Every other round in reverse order, so that no server always runs right after
            # the same other one, or first or last in a round (this machine drifts).
            turns = list(targets.items())
            for who, (url, headers, script) in turns if run % 2 else reversed(turns):
                connections = plan.get("connections", 10)
                load = wrk(url, headers, seconds, connections=connections,
                           script=script() if callable(script) else script,
                           process=processes[who], pin=plan.get("pin", True))
                if isinstance(script, DistinctIds):
                    script.ran(load, connections)
                results[name][who].append(load)
                say(f"{name}, {who}, run {run}/{runs}: {load.rps:.0f} req/s, "
                    f"p99 {load.p99_ms:.1f} ms")
    return results


def _service(tree: Path) -> list[str]:
    """The gunicorn command of the service in a source tree (an older commit's may keep its
    settings elsewhere, or have none)."""
    for config in (SERVICE_CONFIG, "app/gunicorn_conf.py"):
        if (tree / config).exists():
            return [GUNICORN[0], *(config if a == SERVICE_CONFIG else a for a in GUNICORN[1:])]
    return [*(a for a in GUNICORN if a not in ("--config", SERVICE_CONFIG)),
            "--worker-class", "uvicorn_worker.UvicornWorker"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="rounds per scenario")
    parser.add_argument("--seconds", type=int, default=3, help="length of each run")
    parser.add_argument("--sizes", default="10,1000,100000", help="list sizes to serve")
    parser.add_argument("--connections", default="16,64", help="wrk's connection counts")
    parser.add_argument("--against", metavar="REV",
                        help="also serve the service as it was at this commit, for a ratio")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    connections = [int(count) for count in args.connections.split(",")]

    rows: list[tuple[str, Load, str]] = []
    everything: dict[str, dict[str, list[Load]]] = {}
    trees = {who: ROOT for who in SERVERS}
    servers = dict(SERVERS)
    with ExitStack() as trees_stack, \
            tempfile.TemporaryDirectory(prefix="petstore-bench-") as folder:
        if args.against:
            before = f"service at {args.against}"
            trees[before] = trees_stack.enter_context(worktree(args.against))
            servers[before] = (_service(trees[before]), "wsgi:app")
        for size in sizes:
            say(f"preparing {size:,} orders...")
            env, key = prepare(Path(folder) / str(size), size)
            auth = {"Authorization": f"Bearer {key}"}
            pinned = {who: command for who, command in servers.items()
                      if size == sizes[0] or who not in FASTAPI}
            blocks = [(True, pinned, env, auth)]
            if size == sizes[0]:  # unpinned: the service and plain Flask share both cores
                # Over orders of their own: the pinned block's writes (when this size is
                # also the last) have cancelled and placed orders in the first database.
                unpinned_env, unpinned_key = prepare(Path(folder) / f"{size}-unpinned", size)
                blocks.append((False, {who: command for who, command in servers.items()
                                       if who != "raw ASGI" and who not in FASTAPI},
                               unpinned_env, {"Authorization": f"Bearer {unpinned_key}"}))
            for pin, chosen, block_env, block_auth in blocks:
                results = _serve_and_measure(chosen, trees, block_env, block_auth, size,
                                             sizes, connections, pin, Path(folder), args)
                rows += rows_for(results)
                everything.update(results)
    print("\nThe service against its baselines: medians of rounds; ratios are medians of "
          "each round's ratio")
    print(table(rows))
    small = f"GET list of {sizes[0]:,}, {connections[0]} connections"
    if small in everything:
        base = median_load(everything[small]["service"]).rps
        for scenario, at_least in ((f"GET list, If-None-Match: 304, {connections[0]} "
                                    "connections", 1.0),
                                   (f"DELETE of pending orders, {connections[0]} connections",
                                    0.5)):
            if scenario in everything:
                ratio = median_load(everything[scenario]["service"]).rps / base
                verdict = "ok" if ratio >= at_least else "BELOW TARGET"
                print(f"{scenario}: {ratio:.2f}x the service's {small} "
                      f"(target >= {at_least}: {verdict})")
    _against_fastapi(everything, sizes[0], connections)
    cancel = f"DELETE of pending orders, {connections[0]} connections"
    place = f"POST of new orders (distinct keys), {connections[0]} connections"
    if cancel in everything and place in everything:
        # What a request costs, by CPU a request: throughput is bounded by the one core.
        cost = (median_load(everything[place]["service"]).cpu_us
                / median_load(everything[cancel]["service"]).cpu_us)
        rate = (median_load(everything[cancel]["service"]).rps
                / median_load(everything[place]["service"]).rps)
        verdict = "ok" if max(cost, rate) <= PLACE_AT_MOST else "ABOVE TARGET"
        print(f"{place}: {cost:.2f}x the CPU a request of {cancel}, {rate:.2f}x its time "
              f"(target <= {PLACE_AT_MOST}: {verdict})")


def _against_fastapi(everything: dict[str, dict[str, list[Load]]], size: int,
                     connections: list[int]) -> None:
    """Issue 27's verdicts: the list's throughput against each FastAPI baseline at the
    fewest connections, and its p99 against bare FastAPI's at the most."""
    small = everything.get(f"GET list of {size:,}, {connections[0]} connections", {})
    for baseline, at_least in AGAINST_FASTAPI.items():
        if "service" in small and baseline in small:
            ratio = _ratio(small["service"], small[baseline], "rps")
            print(f"GET list of {size:,}, {connections[0]} connections: {ratio:.2f}x "
                  f"{baseline} (target >= {at_least}: "
                  f"{'ok' if ratio >= at_least else 'BELOW TARGET'})")
    busy = everything.get(f"GET list of {size:,}, {connections[-1]} connections", {})
    if "service" in busy and "bare FastAPI" in busy:
        ours, theirs = (median_load(busy[who]).p99_ms for who in ("service", "bare FastAPI"))
        print(f"GET list of {size:,}, {connections[-1]} connections: p99 {ours:.2f} ms, bare "
              f"FastAPI's {theirs:.2f} ms (target: at most: "
              f"{'ok' if ours <= theirs else 'ABOVE TARGET'})")


def _copy(database: str) -> str:
    """A copy of a SQLite database that nothing has open (with its WAL, if any)."""
    copy = f"{database}.before"
    for suffix in ("", "-wal"):
        if Path(database + suffix).exists():
            shutil.copyfile(database + suffix, copy + suffix)
    return copy


def _serve_and_measure(servers: dict[str, tuple[list[str], str]], trees: dict[str, Path],
                       env: dict[str, str], auth: dict[str, str], size: int, sizes: list[int],
                       connections: list[int], pin: bool, folder: Path,
                       args: argparse.Namespace) -> dict[str, dict[str, list[Load]]]:
    where = "" if pin else "unpinned, "
    with ExitStack() as stack:
        ports, processes, envs = {}, {}, {}
        for who, (command, target) in servers.items():
            port = ports[who] = free_port()
            own = envs[who] = env
            if who.startswith("service at "):
                # A database of its own: two services writing one SQLite file would each pay
                # the other's WAL checkpoints (it showed as a 23% fall of DELETE that was not
                # there when each had its own).
                own = envs[who] = {**env, "PETSTORE_DATABASE": _copy(env["PETSTORE_DATABASE"])}
            processes[who] = stack.enter_context(server(
                [*command, "--bind", f"127.0.0.1:{port}", target],
                {**own, "PETSTORE_RATELIMIT_STORAGE": "memory://"}, port, LIST, auth,
                tree=trees[who], pin=pin))
            wrk(f"http://127.0.0.1:{port}{LIST}", auth, 1, pin=pin)  # warm up
        urls = {who: f"http://127.0.0.1:{port}{LIST}" for who, port in ports.items()}
        services = [who for who in urls if who.startswith("service")]
        # What serves v2's order and answers If-None-Match: the services and FastAPI.
        conditional = [who for who in urls if who in services or who in FASTAPI]
        scenarios: dict[str, dict[str, Any]] = {}
        for count in connections:
            common = {"processes": processes, "connections": count, "pin": pin}
            scenarios[f"GET list of {size:,}, {where}{count} connections"] = {
                "targets": {who: (url, auth, None) for who, url in urls.items()}, **common}
            if size == sizes[0] and pin and count == connections[0]:
                scenarios[f"GET list, If-None-Match: 304, {count} connections"] = {
                    "targets": {who: (urls[who], {**auth,
                                                  "If-None-Match": etag_of(ports[who], auth)},
                                      None)
                                for who in conditional}, **common}
                scenarios[f"GET one order (v2), {count} connections"] = {
                    "targets": {who: (f"http://127.0.0.1:{ports[who]}{ONE_ORDER}", auth, None)
                                for who in conditional}, **common}
                scenarios[f"bad key: 401, {count} connections"] = {
                    "targets": {who: (url, BAD_KEY, None) for who, url in urls.items()},
                    **common}
        results = measure(scenarios, args.runs, args.seconds)
        if size == sizes[-1] and pin:
            pending = _add_pending(folder, {who: envs[who] for who in services}, size, args,
                                   connections)
            for count in connections:
                results.update(measure_deletes({who: ports[who] for who in services},
                                               processes, auth, count, args, pending))
            results.update(measure_places(folder, ports["service"], processes, auth, args,
                                          connections[0]))
    return results


# The most DELETEs a second a run is given pending orders for (the service does about
# 5,000 on one core here); a faster run reaches past them and its row shows 404 answers.
DELETES_A_SECOND_AT_MOST = 10_000


def _add_pending(folder: Path, services: dict[str, dict[str, str]], size: int,
                 args: argparse.Namespace, connections: list[int]) -> dict[str, DistinctIds]:
    """Pending orders for every run of DELETE, added once the lists have been measured over
    the size asked: ids from size + 1 on, imported into each service's database (made by
    today's CLI, as prepare() made it) and checkpointed, so that no run pays for the
    import's WAL; and for each service, the scripts that cancel them, each run ids no
    earlier one touched."""
    count = (args.runs * len(connections)
             * (DELETES_A_SECOND_AT_MOST * args.seconds + max(connections)))
    scripts = {}
    for who, env in services.items():
        say(f"adding {count:,} pending orders for DELETE to {who}'s database...")
        add_orders(env, size + 1, count)
        with sqlite3.connect(env["PETSTORE_DATABASE"]) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        scripts[who] = DistinctIds(folder, f"delete-{who.replace(' ', '-')}",
                                   DELETE_SCRIPT.replace("{list}", LIST), first=size)
    return scripts


def measure_deletes(ports: dict[str, int], processes: dict[str, Any], auth: dict[str, str],
                    connections: int, args: argparse.Namespace,
                    pending: dict[str, DistinctIds]) -> dict[str, dict[str, list[Load]]]:
    """DELETE of distinct pending orders: each run (of each server, over its database, at
    each connection count) cancels ids no earlier run on that database touched."""
    plan = {"targets": {who: (f"http://127.0.0.1:{port}{LIST}", auth, pending[who])
                        for who, port in ports.items()},
            "processes": processes, "connections": connections}
    return measure({f"DELETE of pending orders, {connections} connections": plan},
                   args.runs, args.seconds)


def measure_places(folder: Path, port: int, processes: dict[str, Any], auth: dict[str, str],
                   args: argparse.Namespace,
                   connections: int) -> dict[str, dict[str, list[Load]]]:
    """POST of new orders, each under an Idempotency-Key of its own (today's service only:
    an older one may not place orders)."""
    runs = iter(range(1_000_000))

    def script() -> Path:
        run = next(runs)
        path = folder / f"place-{run}.lua"
        path.write_text(PLACE_SCRIPT.replace("{run}", f"bench-{run}").replace("{list}",
                                                                               "/v2/store/orders"))
        return path

    plan = {"targets": {"service": (f"http://127.0.0.1:{port}/v2/store/orders", auth, script)},
            "processes": processes, "connections": connections}
    return measure({f"POST of new orders (distinct keys), {connections} connections": plan},
                   args.runs, args.seconds)


def _ratio(loads: list[Load], baseline: list[Load], field: str) -> float:
    """The median of the rounds' ratios; a round whose baseline answered nothing (plain
    Flask timing out on the list of 100,000 at 64 connections) counts as infinitely ahead."""
    return statistics.median(getattr(s, field) / getattr(b, field) if getattr(b, field)
                             else math.inf for s, b in zip(loads, baseline, strict=True))


def rows_for(results: dict[str, dict[str, list[Load]]]) -> list[tuple[str, Load, str]]:
    rows = []
    for scenario, by_server in results.items():
        service = by_server["service"]
        for who, loads in by_server.items():
            comparison = ""
            if who == "service":
                parts = []
                befores = [who for who in by_server if who.startswith("service at ")]
                for baseline in (*befores, "plain Flask", "raw ASGI", *FASTAPI):
                    if baseline in by_server:
                        parts.append(f"{_ratio(service, by_server[baseline], 'rps'):.2f}x "
                                     f"{baseline}")
                target = next((t for prefix, t in THROUGHPUT.items()
                               if scenario.startswith(prefix)), None)
                if target and target[0] in by_server:
                    ratio = _ratio(service, by_server[target[0]], "rps")
                    parts.append(f"(target >= {target[1]}: "
                                 f"{'ok' if ratio >= target[1] else 'BELOW TARGET'})")
                if scenario.startswith(TAILED):
                    tail = median_load(service)
                    tail_ratio = tail.p99_ms / tail.p50_ms
                    parts.append(f"p99/p50 {tail_ratio:.1f} (target <= {TAIL_AT_MOST}: "
                                 f"{'ok' if tail_ratio <= TAIL_AT_MOST else 'ABOVE TARGET'})")
                    if "plain Flask" in by_server:
                        p99 = _ratio(service, by_server["plain Flask"], "p99_ms")
                        parts.append(f"p99 {p99:.2f}x plain Flask's (target <= "
                                     f"{P99_AT_MOST_FLASK}: "
                                     f"{'ok' if p99 <= P99_AT_MOST_FLASK else 'ABOVE TARGET'})")
                comparison = ", ".join(parts)
            rows.append((f"{scenario}, {who}", median_load(loads), comparison))
    return rows


if __name__ == "__main__":
    main()
