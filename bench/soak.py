"""A soak: mixed load against two workers sharing quotas in Redis, and each worker's
resident memory before and after.

The load, for --seconds: threads listing with an Enterprise key, threads cancelling
distinct orders with it, one thread guessing keys (refused, then throttled per address),
and one thread hammering with a Free key far past its quota (429, then banned). It counts
every answer by kind and status; the soak test (tests/e2e/test_soak.py) runs the same load
and asserts no 5xx and quotas within their bounds. Here only the figures are printed.

    python -m bench.soak [--seconds 60] [--redis redis://127.0.0.1:6379/15]
"""

from __future__ import annotations

import argparse
import collections
import http.client
import itertools
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from bench.harness import free_port, say, server
from bench.quotas import GUNICORN, LIST, PETSTORE, cleanup_redis, prepare

BAD_KEY = "psk_" + "x" * 43


def mixed_load(port: int, enterprise: str, free: str, orders: int,
               seconds: float) -> dict[str, collections.Counter[int]]:
    """kind -> Counter of statuses, over seconds of load on 127.0.0.1:port."""
    answers: dict[str, collections.Counter[int]] = collections.defaultdict(collections.Counter)
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    order_ids = itertools.cycle(range(1, orders + 1))  # cancelling again is a 204 too

    def drive(kind: str, method: str, key: str, target: Callable[[], str]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < deadline:
            try:
                conn.request(method, target(), headers={"Authorization": f"Bearer {key}"})
                response = conn.getresponse()
                response.read()
                status = response.status
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                status = 0  # no answer: counted, never expected
            with lock:
                answers[kind][status] += 1
            if kind in ("bad key", "over quota"):
                time.sleep(0.01)  # a client retrying in a loop, not a flood
        conn.close()

    def next_cancel() -> str:
        with lock:
            return f"{LIST}/{next(order_ids)}"

    threads = [threading.Thread(target=drive, args=("list", "GET", enterprise, lambda: LIST))
               for _ in range(4)]
    threads += [threading.Thread(target=drive, args=("cancel", "DELETE", enterprise,
                                                     next_cancel)) for _ in range(2)]
    threads.append(threading.Thread(target=drive, args=("bad key", "GET", BAD_KEY,
                                                        lambda: LIST)))
    threads.append(threading.Thread(target=drive, args=("over quota", "GET", free,
                                                        lambda: LIST)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return dict(answers)


def http_get(port: int, key: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", LIST, headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    response.read()
    conn.close()
    return response.status


def prepare_soak(folder: Path, orders: int) -> tuple[dict[str, str], str, str]:
    """A database with orders, an Enterprise key and a Free key: env and both keys."""
    env, enterprise = prepare(folder, orders)
    free = subprocess.run([*PETSTORE, "keys", "create", "--plan", "free", "--name", "free"],
                          env=env, check=True, capture_output=True, text=True).stdout.strip()
    return env, enterprise, free


def worker_rss_mb(pid: int) -> list[float]:
    """Resident memory of each worker of the gunicorn master pid, in MB."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    sizes = []
    for child in children:
        for line in Path(f"/proc/{child}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                sizes.append(int(line.split()[1]) / 1024)
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60, help="length of the load")
    parser.add_argument("--redis", default=os.environ.get("PETSTORE_BENCH_REDIS_URL",
                                                          "redis://127.0.0.1:6379/15"))
    args = parser.parse_args()
    prefix = f"petstore-soak-{uuid.uuid4().hex[:8]}"
    orders = 10_000
    with tempfile.TemporaryDirectory(prefix="petstore-bench-") as folder:
        say(f"preparing {orders:,} orders...")
        env, enterprise, free = prepare_soak(Path(folder), orders)
        port = free_port()
        settings = {**env, "PETSTORE_RATELIMIT_STORAGE": args.redis,
                    "PETSTORE_RATELIMIT_KEY_PREFIX": prefix}
        try:
            gunicorn = GUNICORN.copy()
            gunicorn[gunicorn.index("--workers") + 1] = "2"
            with server([*gunicorn, "--bind", f"127.0.0.1:{port}", "wsgi:app"],
                        settings, port, "/healthz", {}) as process:
                for _ in range(200):  # warm both workers
                    http_get(port, enterprise)
                before = worker_rss_mb(process.pid)
                say(f"soaking for {args.seconds:.0f} s...")
                answers = mixed_load(port, enterprise, free, orders, args.seconds)
                after = worker_rss_mb(process.pid)
        finally:
            cleanup_redis(args.redis, prefix)
    print(f"\nSoak: {args.seconds:.0f} s of mixed load, two workers, quotas in Redis")
    for kind, statuses in sorted(answers.items()):
        counts = ", ".join(f"{status or 'no answer'}: {n}"
                           for status, n in sorted(statuses.items()))
        print(f"  {kind:<11} {counts}")
    print("  worker RSS MB before: " + ", ".join(f"{mb:.1f}" for mb in before)
          + "; after: " + ", ".join(f"{mb:.1f}" for mb in after))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
