"""Huge lists: the worker's peak memory and the time of one whole download, at 10,000 and
at 1,000,000 orders.

For each size, a fresh database and a fresh service (gunicorn, one worker, default
settings: a list of 1,000,000 orders is larger than the list cache and is streamed). The
list is downloaded --downloads times, one after another, by a client that reads as fast
as it can; then the worker's peak resident memory (VmHWM) is read. The baseline for time is
what the same machine takes, in one process, to read the same rows from SQLite into dicts
and encode them with orjson (Store.list_orders and orjson.dumps).

    python -m bench.large [--sizes 10000,1000000] [--downloads 3]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

from bench.harness import free_port, say, server
from bench.quotas import GUNICORN, LIST, prepare

MEMORY_TARGET = 1.5  # peak RSS at the largest size / at the smallest, at most
TIME_TARGET = 1.5  # download time / read + encode in one process, at most


def download(port: int, key: str) -> tuple[float, int]:
    """Seconds to receive the whole list, and its length in bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    started = time.perf_counter()
    conn.request("GET", LIST, headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    size = 0
    while chunk := response.read(1 << 20):
        size += len(chunk)
    seconds = time.perf_counter() - started
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"list answered {response.status}")
    return seconds, size


def read_and_encode(database: str) -> float:
    """Seconds to read every order into dicts and encode them with orjson, in-process."""
    from app.core.config import Settings
    from app.core.storage import open_store

    store = open_store(Settings(database=database))
    started = time.perf_counter()
    orjson.dumps(store.list_orders())
    seconds = time.perf_counter() - started
    store.close()
    return seconds


def _verdict(ratio: float, at_most: float) -> str:
    return f"(target <= {at_most}: {'ok' if ratio <= at_most else 'ABOVE TARGET'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,1000000", help="list sizes, smallest first")
    parser.add_argument("--downloads", type=int, default=3, help="downloads per size")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    results = {}
    with tempfile.TemporaryDirectory(prefix="petstore-bench-") as folder:
        for size in sizes:
            say(f"preparing {size:,} orders...")
            env, key = prepare(Path(folder) / str(size), size)
            baseline = statistics.median(read_and_encode(env["PETSTORE_DATABASE"])
                                         for _ in range(args.downloads))
            port = free_port()
            with server([*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"],
                        {**env, "PETSTORE_RATELIMIT_STORAGE": "memory://"}, port,
                        "/healthz", {}) as process:
                times = []
                for run in range(1, args.downloads + 1):
                    seconds, length = download(port, key)
                    times.append(seconds)
                    say(f"{size:,} orders, download {run}/{args.downloads}: {seconds:.3f} s, "
                        f"{length / 1e6:.1f} MB")
                results[size] = (process.peak_rss_mb(), statistics.median(times), baseline)

    print("\nHuge lists: one worker, downloads one after another; medians")
    print(f"{'orders':>10} {'peak RSS MB':>12} {'download s':>11} {'read+orjson s':>14}  "
          "comparison")
    smallest = results[sizes[0]][0]
    for size, (rss, seconds, baseline) in results.items():
        memory_ratio, time_ratio = rss / smallest, seconds / baseline
        comparison = f"{time_ratio:.2f}x read+orjson"
        if size != sizes[0]:
            comparison = (f"{memory_ratio:.2f}x the peak RSS at {sizes[0]:,} "
                          f"{_verdict(memory_ratio, MEMORY_TARGET)}, "
                          f"{comparison} {_verdict(time_ratio, TIME_TARGET)}")
        print(f"{size:>10,} {rss:>12.1f} {seconds:>11.3f} {baseline:>14.3f}  {comparison}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
