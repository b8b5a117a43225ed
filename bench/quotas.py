"""What quotas cost: GET list throughput with quotas off, on with memory://, on with Redis.

One gunicorn worker (uvicorn) pinned to one core, wrk on the other, an Enterprise key
whose limits cannot be reached, the same database for every configuration. The runs
of the three configurations are interleaved, so that drift of the machine hits all
three alike, and each figure is the median of --runs.

    python -m bench.quotas [--runs 5] [--seconds 5] [--redis redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import uuid
from pathlib import Path

from bench.harness import Load, best_load, free_port, median_load, say, server, table, wrk

PETSTORE = [sys.executable, "-m", "app.cli"]
GUNICORN = [sys.executable, "-m", "gunicorn", "--worker-class", "uvicorn_worker.UvicornWorker",
            "--workers", "1", "--no-control-socket", "--log-level", "warning"]
LIST = "/v1/store/orders"
HUGE = str(10**9)


def prepare(folder: Path, orders: int) -> tuple[dict[str, str], str]:
    """A fresh database with orders and an Enterprise key; its env and the key."""
    import subprocess

    env = {**os.environ, "PETSTORE_DATABASE": str(folder / "bench.db")}
    subprocess.run([*PETSTORE, "init"], env=env, check=True, capture_output=True)
    rows = "\n".join(f'{{"id": {i}, "petId": {i % 97}, "quantity": 1}}'
                     for i in range(1, orders + 1))
    subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"], input=rows,
                   env=env, check=True, capture_output=True, text=True)
    key = subprocess.run(
        [*PETSTORE, "keys", "create", "--plan", "enterprise", "--name", "bench",
         "--per-minute", HUGE, "--per-day", HUGE],
        env=env, check=True, capture_output=True, text=True,
    ).stdout.strip()
    return env, key


def cleanup_redis(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    for name in client.scan_iter(f"{prefix}*"):
        client.delete(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="runs per configuration")
    parser.add_argument("--seconds", type=int, default=3, help="length of each run")
    parser.add_argument("--orders", type=int, default=10, help="orders in the list")
    parser.add_argument("--redis", default=os.environ.get("PETSTORE_BENCH_REDIS_URL",
                                                          "redis://127.0.0.1:6379/15"),
                        help="Redis for the Redis configuration ('' to skip it)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="petstore-bench-") as folder:
        env, key = prepare(Path(folder), args.orders)
        prefix = f"petstore-bench-{uuid.uuid4().hex[:8]}"
        configs = {
            "quotas off": {"PETSTORE_RATELIMIT_ENABLED": "false"},
            "quotas on, memory://": {"PETSTORE_RATELIMIT_STORAGE": "memory://"},
        }
        if args.redis:
            configs["quotas on, Redis"] = {"PETSTORE_RATELIMIT_STORAGE": args.redis,
                                           "PETSTORE_RATELIMIT_KEY_PREFIX": prefix}
        headers = {"Authorization": f"Bearer {key}"}
        results: dict[str, list[Load]] = {name: [] for name in configs}
        try:
            for run in range(1, args.runs + 1):
                for name, extra in configs.items():
                    port = free_port()
                    argv = [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"]
                    with server(argv, {**env, **extra}, port, LIST, headers) as process:
                        wrk(f"http://127.0.0.1:{port}{LIST}", headers, 1)  # warm up
                        load = wrk(f"http://127.0.0.1:{port}{LIST}", headers, args.seconds,
                                   process=process)
                    if load.requests == 0:
                        raise SystemExit(f"{name}: no request completed in {args.seconds} s;"
                                         " the server is not answering")
                    results[name].append(load)
                    say(f"run {run}/{args.runs} {name}: {load.rps:.0f} req/s, "
                        f"{load.cpu_us:.0f} us CPU a request")
        finally:
            if args.redis:
                cleanup_redis(args.redis, prefix)

    targets = {"quotas on, memory://": 0.9, "quotas on, Redis": 0.7}
    for title, pick in (("medians", median_load), ("best runs", best_load)):
        chosen = {name: pick(loads) for name, loads in results.items()}
        off = chosen["quotas off"]
        rows = []
        for name, load in chosen.items():
            comparison = "baseline"
            if name in targets:
                ratio = load.rps / off.rps
                verdict = "ok" if ratio >= targets[name] else "BELOW TARGET"
                comparison = (f"{ratio:.2f}x quotas off (target >= {targets[name]}) {verdict};"
                              f" by CPU a request {off.cpu_us / load.cpu_us:.2f}x")
            if load.non_2xx:
                comparison += f"  [{load.non_2xx} non-2xx answers]"
            rows.append((f"GET list of {args.orders}, {name}", load, comparison))
        print(f"\nQuotas, one worker, {title} of {args.runs} interleaved runs of "
              f"{args.seconds} s:")
        print(table(rows))


if __name__ == "__main__":
    main()
