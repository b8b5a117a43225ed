"""What guessing keys costs (issue 24): one worker over PostgreSQL, flooded from one address
with random bearer tokens (each one a token no key has) and, as the baseline, with one bad
token repeated. The target: the random flood is refused at least 0.8 times as fast as the
repeated one, since neither reads the database per token. Also the p50 of a valid key's
requests, alone and during each flood.

    python -m bench.guessing [--runs 5] [--seconds 3] [--postgres postgresql://...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.harness import Load, free_port, median_load, say, scratch_postgres, server, table, wrk
from bench.quotas import GUNICORN, prepare

LIST = "/v1/store/orders"
RANDOM_TOKENS = """
local chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
request = function()
  local t = {}
  for i = 1, 43 do
    local n = math.random(1, #chars)
    t[i] = chars:sub(n, n)
  end
  return wrk.format(nil, nil, {["Authorization"] = "Bearer psk_" .. table.concat(t)})
end
"""


def p50_of_valid_key(url: str, key: str, seconds: float) -> float:
    """The median time of a valid key's requests, one at a time, for seconds."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    times = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and len(times) < 2000:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
        started = time.monotonic()
        conn.request("GET", parts.path, headers={"Authorization": f"Bearer {key}"})
        conn.getresponse().read()
        times.append((time.monotonic() - started) * 1000)
        conn.close()
        time.sleep(0.01)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="rounds (one run of each flood)")
    parser.add_argument("--seconds", type=int, default=3, help="length of each run")
    parser.add_argument("--postgres", default=os.environ.get(
        "PETSTORE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL where the benchmark may create its database")
    args = parser.parse_args()

    with scratch_postgres(args.postgres, "guessing") as database, \
            tempfile.TemporaryDirectory(prefix="petstore-bench-") as folder:
        if database is not None:
            run(args, database, Path(folder))


def run(args: argparse.Namespace, database: str, folder: Path) -> None:
    env, key = prepare(folder, 10, database)
    script = folder / "random-tokens.lua"
    script.write_text(RANDOM_TOKENS)
    port = free_port()
    url = f"http://127.0.0.1:{port}{LIST}"
    floods = {"one bad token repeated": ({"Authorization": "Bearer psk_not-a-key"}, None),
              "random tokens": ({}, script)}
    results: dict[str, list[Load]] = {flood: [] for flood in floods}
    during: dict[str, list[float]] = {flood: [] for flood in floods}
    argv = [*GUNICORN, "--bind", f"127.0.0.1:{port}", "wsgi:app"]
    with server(argv, env, port, LIST, {"Authorization": f"Bearer {key}"}) as process:
        alone = p50_of_valid_key(url, key, 2)
        for number in range(1, args.runs + 1):
            for flood, (headers, lua) in floods.items():
                timing: list[float] = []
                probe = threading.Thread(target=lambda t=timing: t.append(
                    p50_of_valid_key(url, key, args.seconds - 1)))
                probe.start()
                load = wrk(url, headers, args.seconds, connections=32, script=lua,
                           process=process)
                probe.join()
                results[flood].append(load)
                during[flood] += timing
                say(f"run {number}/{args.runs} {flood}: {load.rps:.0f} req/s refused")
    rounds = list(zip(results["random tokens"], results["one bad token repeated"],
                      strict=True))
    ratio = statistics.median(x.rps / o.rps for x, o in rounds)
    rows = []
    for flood, loads in results.items():
        comparison = (f"{ratio:.2f}x the repeated token (target >= 0.8: "
                      f"{'ok' if ratio >= 0.8 else 'BELOW TARGET'})"
                      if flood == "random tokens" else "baseline")
        comparison += (f"; a valid key's p50 meanwhile {statistics.median(during[flood]):.2f} ms"
                       f" ({alone:.2f} ms alone)")
        rows.append((f"flood of {flood}, 32 connections, PostgreSQL", median_load(loads),
                     comparison))
    print(f"\nGuessing keys, one worker over PostgreSQL: medians of {args.runs} rounds of "
          f"{args.seconds} s runs (every answer a 401 or 429)")
    print(table(rows))


if __name__ == "__main__":
    main()
