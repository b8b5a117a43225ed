"""What quotas cost: GET list throughput with quotas off, on with memory://, on with Redis;
and what recording each key's last use costs (issue 18: within 5% of the same service with
PETSTORE_KEY_LAST_USED=false).

One gunicorn worker (uvicorn) pinned to one core, wrk on the other, an Enterprise key
whose limits cannot be reached, the same database for every configuration. The three
servers run side by side and take turns under load, one run each per round, so that the
machine's drift hits a round's runs alike; a ratio is the median of the rounds' ratios.

    python -m bench.quotas [--runs 15] [--seconds 3] [--redis redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import uuid
from contextlib import ExitStack
from pathlib import Path

from bench.harness import Load, free_port, median_load, say, server, table, wrk

PETSTORE = [sys.executable, "-m", "app.cli"]
# The service's own gunicorn settings and worker (as `petstore serve` runs it), one worker.
SERVICE_CONFIG = "app/web/gunicorn_conf.py"
GUNICORN = [sys.executable, "-m", "gunicorn", "--config", SERVICE_CONFIG, "--workers", "1",
            "--no-control-socket", "--log-level", "warning"]
LIST = "/v1/store/orders"
HUGE = str(10**9)
NO_LAST_USE = "quotas on, memory://, last use not recorded"


def prepare(folder: Path, orders: int, database: str | None = None,
            tree: Path | None = None) -> tuple[dict[str, str], str]:
    """A fresh database (SQLite in folder, unless another is named) with orders and an
    Enterprise key; its env and the key. With tree (another commit's source, from
    harness.worktree), that tree's CLI makes it, so that its schema (its triggers
    included) is the one that commit gives: a before/after of a change to the schema
    measures the change."""
    import subprocess

    env = {**os.environ, "PETSTORE_DATABASE": database or str(folder / "bench.db")}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    subprocess.run([*PETSTORE, "init"], env=env, check=True, capture_output=True, cwd=tree)
    add_orders(env, 1, orders, tree)
    key = subprocess.run(
        [*PETSTORE, "keys", "create", "--plan", "enterprise", "--name", "bench",
         "--per-minute", HUGE, "--per-day", HUGE],
        env=env, check=True, capture_output=True, text=True, cwd=tree,
    ).stdout.strip()
    return env, key


def add_orders(env: dict[str, str], first: int, count: int, tree: Path | None = None) -> None:
    """Pending orders first to first + count - 1 in env's database, by the CLI's import
    (tree's, when given)."""
    import subprocess

    rows = "\n".join(f'{{"id": {i}, "petId": {i % 97}, "quantity": 1}}'
                     for i in range(first, first + count))
    done = subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                          input=rows, env={**os.environ, **env}, capture_output=True, text=True,
                          cwd=tree)
    if done.returncode != 0:
        raise SystemExit(f"petstore orders import failed: {done.stderr.strip()}")


def cleanup_redis(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    for name in client.scan_iter(f"{prefix}*"):
        client.delete(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15,
                        help="rounds (one run of each configuration)")
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
            NO_LAST_USE: {"PETSTORE_RATELIMIT_STORAGE": "memory://",
                          "PETSTORE_KEY_LAST_USED": "false"},
        }
        if args.redis:
            configs["quotas on, Redis"] = {"PETSTORE_RATELIMIT_STORAGE": args.redis,
                                           "PETSTORE_RATELIMIT_KEY_PREFIX": prefix}
        headers = {"Authorization": f"Bearer {key}"}
        results: dict[str, list[Load]] = {name: [] for name in configs}
        try:
            with ExitStack() as stack:
                # All configurations serve at once, each pinned to the same core, and take
                # turns under load: each round measures them back to back, so that the
                # machine's drift (large here) hits a round's runs alike.
                urls, processes = {}, {}
                for name, extra in configs.items():
                    port = free_port()
                    argv = [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"]
                    processes[name] = stack.enter_context(
                        server(argv, {**env, **extra}, port, LIST, headers))
                    urls[name] = f"http://127.0.0.1:{port}{LIST}"
                    wrk(urls[name], headers, 1)  # warm up
                for run in range(1, args.runs + 1):
                    for name in configs:
                        load = wrk(urls[name], headers, args.seconds, process=processes[name])
                        if load.requests == 0:
                            raise SystemExit(f"{name}: no request completed in "
                                             f"{args.seconds} s; the server is not answering")
                        results[name].append(load)
                        say(f"run {run}/{args.runs} {name}: {load.rps:.0f} req/s, "
                            f"{load.cpu_us:.0f} us CPU a request")
        finally:
            if args.redis:
                cleanup_redis(args.redis, prefix)

    # configuration: (its baseline, the least throughput ratio to it)
    targets = {"quotas on, memory://": [("quotas off", 0.9), (NO_LAST_USE, 0.95)],
               "quotas on, Redis": [("quotas off", 0.7)]}
    rows = []
    for name, loads in results.items():
        load = median_load(loads)
        comparisons = []
        for baseline, at_least in targets.get(name, []):
            # The median of each round's ratio: robust to drift between rounds.
            rounds = list(zip(loads, results[baseline], strict=True))
            ratio = statistics.median(x.rps / o.rps for x, o in rounds)
            by_cpu = statistics.median(o.cpu_us / x.cpu_us for x, o in rounds)
            verdict = "ok" if ratio >= at_least else "BELOW TARGET"
            comparisons.append(f"{ratio:.2f}x {baseline} (target >= {at_least}) {verdict};"
                               f" by CPU a request {by_cpu:.2f}x")
        comparison = " | ".join(comparisons) or "baseline"
        rows.append((f"GET list of {args.orders}, {name}", load, comparison))
    print(f"\nQuotas, one worker: medians of {args.runs} rounds of {args.seconds} s runs; "
          "ratios are medians of each round's ratio")
    print(table(rows))


if __name__ == "__main__":
    main()
