"""The service against its baselines: plain Flask (gunicorn's sync worker, the json module)
and a raw ASGI callable (pre-encoded bytes, the same uvicorn worker), in one run.

Every server has one worker pinned to one core, wrk runs on the other, and all servers of a
scenario serve side by side and take turns under load, one run each per round; ratios are
medians of the rounds' ratios. The service runs with quotas on (memory://) and an
Enterprise key whose limits cannot be reached.

With --against REV the service as it was at commit REV serves beside today's (from a git
worktree, same database, same settings), and each scenario's row says today's throughput
as a ratio of REV's: the before/after of a change, measured in one run.

    python -m bench.service [--runs 5] [--seconds 3] [--sizes 10,1000,100000] [--against REV]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.harness import ROOT, Load, free_port, median_load, say, server, table, worktree, wrk
from bench.quotas import GUNICORN, LIST, prepare

SYNC = [sys.executable, "-m", "gunicorn", "--worker-class", "sync", "--workers", "1",
        "--no-control-socket", "--log-level", "warning"]
SERVERS = {
    "service": (GUNICORN, "wsgi:app"),
    "plain Flask": (SYNC, "bench.baselines:flask_app"),
    "raw ASGI": (GUNICORN, "bench.baselines:asgi_app"),
}
BAD_KEY = {"Authorization": "Bearer psk_" + "x" * 43}
DELETE_SCRIPT = """
local id = {first}
request = function()
  id = id + 1
  return wrk.format("DELETE", "{list}/" .. id)
end
"""


def etag_of(port: int, headers: dict[str, str]) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", LIST, headers=headers)
    response = conn.getresponse()
    response.read()
    return response.getheader("ETag") or ""


def measure(scenarios: dict[str, dict[str, Any]], runs: int,
            seconds: int) -> dict[str, dict[str, list[Load]]]:
    """scenario -> server -> loads, each scenario's servers taking turns round by round."""
    results: dict[str, dict[str, list[Load]]] = {}
    for name, plan in scenarios.items():
        targets: dict[str, tuple[str, dict[str, str], Path | None]] = plan["targets"]
        processes = plan["processes"]
        results[name] = {who: [] for who in targets}
        for run in range(1, runs + 1):
            for who, (url, headers, script) in targets.items():
                load = wrk(url, headers, seconds, script=script() if callable(script) else script,
                           process=processes[who])
                results[name][who].append(load)
                say(f"{name}, {who}, run {run}/{runs}: {load.rps:.0f} req/s")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="rounds per scenario")
    parser.add_argument("--seconds", type=int, default=3, help="length of each run")
    parser.add_argument("--sizes", default="10,1000,100000", help="list sizes to serve")
    parser.add_argument("--against", metavar="REV",
                        help="also serve the service as it was at this commit, for a ratio")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    rows: list[tuple[str, Load, str]] = []
    everything: dict[str, dict[str, list[Load]]] = {}
    trees = {who: ROOT for who in SERVERS}
    servers = dict(SERVERS)
    with ExitStack() as trees_stack, \
            tempfile.TemporaryDirectory(prefix="petstore-bench-") as folder:
        if args.against:
            before = f"service at {args.against}"
            trees[before] = trees_stack.enter_context(worktree(args.against))
            servers[before] = SERVERS["service"]
        for size in sizes:
            say(f"preparing {size:,} orders...")
            env, key = prepare(Path(folder) / str(size), size)
            auth = {"Authorization": f"Bearer {key}"}
            with ExitStack() as stack:
                ports, processes = {}, {}
                for who, (command, target) in servers.items():
                    port = ports[who] = free_port()
                    processes[who] = stack.enter_context(server(
                        [*command, "--bind", f"127.0.0.1:{port}", target],
                        {**env, "PETSTORE_RATELIMIT_STORAGE": "memory://"}, port, LIST, auth,
                        tree=trees[who]))
                    wrk(f"http://127.0.0.1:{port}{LIST}", auth, 1)  # warm up
                urls = {who: f"http://127.0.0.1:{port}{LIST}" for who, port in ports.items()}
                scenarios: dict[str, dict[str, Any]] = {
                    f"GET list of {size:,}": {
                        "targets": {who: (url, auth, None) for who, url in urls.items()},
                        "processes": processes},
                }
                services = [who for who in urls if who.startswith("service")]
                if size == sizes[0]:
                    tag = etag_of(ports["service"], auth)
                    scenarios["GET list, If-None-Match: 304"] = {
                        "targets": {who: (urls[who], {**auth, "If-None-Match": tag}, None)
                                    for who in services},
                        "processes": processes}
                    scenarios["bad key: 401"] = {
                        "targets": {who: (url, BAD_KEY, None) for who, url in urls.items()},
                        "processes": processes}
                results = measure(scenarios, args.runs, args.seconds)
                if size == sizes[-1]:
                    results.update(measure_deletes(
                        Path(folder), {who: ports[who] for who in services}, processes, auth,
                        size, args))
            rows += rows_for(results)
            everything.update(results)
    print("\nThe service against its baselines: medians of rounds; ratios are medians of "
          "each round's ratio")
    print(table(rows))
    small = f"GET list of {sizes[0]:,}"
    if small in everything:
        base = median_load(everything[small]["service"]).rps
        for scenario, at_least in (("GET list, If-None-Match: 304", 1.0),
                                   ("DELETE of pending orders", 0.5)):
            if scenario in everything:
                ratio = median_load(everything[scenario]["service"]).rps / base
                verdict = "ok" if ratio >= at_least else "BELOW TARGET"
                print(f"{scenario}: {ratio:.2f}x the service's {small} "
                      f"(target >= {at_least}: {verdict})")


def measure_deletes(folder: Path, ports: dict[str, int], processes: dict[str, Any],
                    auth: dict[str, str], size: int,
                    args: argparse.Namespace) -> dict[str, dict[str, list[Load]]]:
    """DELETE of distinct pending orders: each run (of each server, over one database)
    cancels ids no earlier run touched."""
    state = {"first": 0}

    def script() -> Path:
        path = folder / f"delete-{state['first']}.lua"
        path.write_text(DELETE_SCRIPT.replace("{first}", str(state["first"]))
                        .replace("{list}", LIST))
        state["first"] += size // (args.runs * len(ports) + 1)
        return path

    plan = {"targets": {who: (f"http://127.0.0.1:{port}{LIST}", auth, script)
                        for who, port in ports.items()},
            "processes": processes}
    return measure({"DELETE of pending orders": plan}, args.runs, args.seconds)


TARGETS = {
    # scenario: (baseline, at least)
    "GET list of 10": ("plain Flask", 0.5),
    "GET list of 1,000": ("plain Flask", 1.5),
    "GET list of 100,000": ("plain Flask", 5.0),
}


def rows_for(results: dict[str, dict[str, list[Load]]]) -> list[tuple[str, Load, str]]:
    rows = []
    for scenario, by_server in results.items():
        service = by_server["service"]
        for who, loads in by_server.items():
            comparison = ""
            if who == "service":
                parts = []
                befores = [who for who in by_server if who.startswith("service at ")]
                for baseline in (*befores, "plain Flask", "raw ASGI"):
                    if baseline in by_server:
                        ratio = statistics.median(
                            s.rps / b.rps for s, b in zip(service, by_server[baseline],
                                                          strict=True))
                        parts.append(f"{ratio:.2f}x {baseline}")
                target = TARGETS.get(scenario)
                if target and target[0] in by_server:
                    ratio = statistics.median(s.rps / b.rps for s, b in
                                              zip(service, by_server[target[0]], strict=True))
                    parts.append(f"(target >= {target[1]}: "
                                 f"{'ok' if ratio >= target[1] else 'BELOW TARGET'})")
                comparison = ", ".join(parts)
            rows.append((f"{scenario}, {who}", median_load(loads), comparison))
    return rows


if __name__ == "__main__":
    main()
