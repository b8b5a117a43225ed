"""Load benchmarks on this machine: a server pinned to one core, wrk pinned to another.

Every figure is a median of several runs, and every comparison is against a baseline
measured in the same run, so the ratios hold on any machine even if the rates do not.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_CPU = "0"
LOAD_CPU = "1"


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def require_wrk() -> str:
    """The wrk binary, installed from Debian's packages where missing and we are root."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        say("wrk is missing; installing it with apt-get (Debian package wrk)...")
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "wrk"], check=True)
        found = shutil.which("wrk")
    if not found:
        raise SystemExit("make bench needs wrk: install it with `sudo apt-get install wrk`.")
    return found


def pinned(cpu: str, argv: list[str]) -> list[str]:
    """argv pinned to one core with taskset, where the machine has it and two cores."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", cpu, *argv]
    return argv


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Process:
    """A running server; cpu_seconds() is the CPU time its workers have used so far."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def _family(self) -> list[int]:
        try:
            children = Path(f"/proc/{self.pid}/task/{self.pid}/children").read_text().split()
        except OSError:
            children = []
        return [self.pid, *map(int, children)]

    def peak_rss_mb(self) -> float:
        """The peak resident memory (VmHWM) of the newest of its workers, in MB."""
        worker = self._family()[-1]
        for line in Path(f"/proc/{worker}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError(f"no VmHWM in /proc/{worker}/status")

    def cpu_seconds(self) -> float:
        total = 0
        for pid in self._family():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            total += int(fields[11]) + int(fields[12])  # utime + stime, in clock ticks
        return total / os.sysconf("SC_CLK_TCK")


@contextmanager
def server(argv: list[str], env: dict[str, str], port: int, probe: str,
           headers: dict[str, str], tree: Path = ROOT, pin: bool = True) -> Iterator[Process]:
    """Start a server command pinned to SERVER_CPU and wait until probe answers. Its log
    goes to a temporary file: a pipe nobody reads would fill and stop the server. tree is
    the source tree it serves (another commit's, checked out by worktree())."""
    env = {**os.environ, **env}
    if tree != ROOT:
        # Its own app package first, ahead of the editable install of this checkout.
        env["PYTHONPATH"] = str(tree)
    with tempfile.TemporaryFile(prefix="petstore-bench-") as log:
        process = subprocess.Popen(pinned(SERVER_CPU, argv) if pin else argv, env=env,
                                   stdout=log, stderr=subprocess.STDOUT, cwd=tree)
        try:
            deadline = time.monotonic() + 30
            while True:
                if process.poll() is not None:
                    log.seek(0)
                    raise RuntimeError(f"server exited: {log.read().decode()[-2000:]}")
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                    conn.request("GET", probe, headers=headers)
                    conn.getresponse().read()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            yield Process(process.pid)
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextmanager
def worktree(revision: str) -> Iterator[Path]:
    """This repository at another commit, checked out in a temporary folder (git worktree),
    so that a benchmark can serve both side by side; removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="petstore-bench-tree-"))
    subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(folder), revision],
                   cwd=ROOT, check=True)
    # Its documents as its own app.openapi: served from the tree (PYTHONPATH), a commit
    # that ships them as that package would otherwise read this checkout's, which the
    # editable install maps there.
    if (folder / "openapi" / "__init__.py").exists() and not (folder / "app" / "openapi").exists():
        (folder / "app" / "openapi").symlink_to(folder / "openapi", target_is_directory=True)
    try:
        yield folder
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT,
                       check=False)
        shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True)
class Load:
    """One wrk run: requests a second, latency percentiles in milliseconds, and the
    server's CPU time per request in microseconds (less sensitive than req/s to other
    processes taking the machine's time)."""

    rps: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    requests: int = 0
    cpu_us: float = float("nan")
    # Requests wrk lost to a connection closed or a socket read or write that failed: sent
    # (or about to be) but counted in neither requests nor non_2xx.
    lost: int = 0


_UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0}


@contextmanager
def scratch_postgres(admin_url: str, benchmark: str) -> Iterator[str | None]:
    """The URL of a database of the benchmark's own on the PostgreSQL of admin_url, dropped
    afterwards; None, saying so, where that PostgreSQL does not answer."""
    import uuid
    from urllib.parse import urlsplit

    import psycopg

    from app.core.setting_values import redacted

    name = f"petstore_bench_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
    except psycopg.OperationalError as exc:
        say(f"skipping the {benchmark} benchmark: PostgreSQL at {redacted(admin_url)} does "
            f"not answer ({str(exc).strip().splitlines()[0]}); set --postgres or "
            "PETSTORE_BENCH_POSTGRES_URL")
        yield None
        return
    try:
        yield urlsplit(admin_url)._replace(path=f"/{name}").geturl()
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _latency(output: str, percentile: str) -> float:
    match = re.search(rf"^\s*{percentile}%\s+([\d.]+)(us|ms|s)\s*$", output, re.M)
    return float(match.group(1)) * _UNITS[match.group(2)] if match else float("nan")


def wrk(url: str, headers: dict[str, str], seconds: int, connections: int = 10,
        method: str = "GET", script: Path | None = None,
        process: Process | None = None, pin: bool = True) -> Load:
    """Drive url with wrk pinned to LOAD_CPU (or, unpinned, wherever the kernel puts it);
    one thread, several connections. With the server's process, also measure its CPU
    time per request."""
    argv = [require_wrk(), "-t1", f"-c{connections}", f"-d{seconds}s", "--latency"]
    for name, value in headers.items():
        argv += ["-H", f"{name}: {value}"]
    if script is not None:
        argv += ["-s", str(script)]
    argv.append(url)
    env = {**os.environ, "WRK_METHOD": method}
    cpu_before = process.cpu_seconds() if process else 0.0
    output = subprocess.run(pinned(LOAD_CPU, argv) if pin else argv, capture_output=True,
                            text=True,
                            check=True, env=env).stdout
    cpu = (process.cpu_seconds() - cpu_before) if process else float("nan")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", output).group(1))  # type: ignore[union-attr]
    bad = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    errors = re.search(r"Socket errors: connect \d+, read (\d+), write (\d+), timeout (\d+)",
                       output)
    return Load(rps, _latency(output, "50"), _latency(output, "99"),
                int(bad.group(1)) if bad else 0, requests,
                cpu / requests * 1e6 if requests else float("nan"),
                sum(map(int, errors.groups())) if errors else 0)


def median_load(loads: list[Load]) -> Load:
    return Load(
        statistics.median(x.rps for x in loads),
        statistics.median(x.p50_ms for x in loads),
        statistics.median(x.p99_ms for x in loads),
        sum(x.non_2xx for x in loads),
        sum(x.requests for x in loads),
        statistics.median(x.cpu_us for x in loads),
        sum(x.lost for x in loads),
    )


def table(rows: list[tuple[str, Load, str]]) -> str:
    """A fixed-width table: name, req/s, p50, p99, p99/p50, CPU, and a comparison; a row
    with answers of 400 or more says how many (wrk counts them), so that a run that
    measured refusals (an order already cancelled, an id past the last) shows as such."""
    width = max([44, *(len(name) for name, _, _ in rows)])
    lines = [f"{'scenario':<{width}} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'p99/p50':>7}"
             f" {'CPU us/req':>10}  comparison"]
    for name, load, comparison in rows:
        if load.non_2xx:
            comparison = (f"{comparison}  " if comparison else "") + (
                f"[{load.non_2xx:,} of {load.requests:,} answers 4xx or 5xx]")
        lines.append(f"{name:<{width}} {load.rps:>8.0f} {load.p50_ms:>7.2f} {load.p99_ms:>7.2f}"
                     f" {load.p99_ms / load.p50_ms:>7.1f} {load.cpu_us:>10.0f}  {comparison}")
    return "\n".join(lines)


class DistinctIds:
    """The wrk scripts of runs that each move orders no earlier run has touched: script
    (a Lua template counting up from {first}) is written afresh before each run, starting
    past the last id the run before could have sent: its requests, those wrk lost to a
    socket error, and one in flight per connection. (One count for the run: wrk() runs one
    thread, and with more each would count from {first}.) A fixed share of the ids per run
    let a faster server's runs reach into the next run's share: its cancels then found
    orders already cancelled, which answers 204 and changes nothing, and its ships 409
    (issue 34). Where every server's database holds the same orders, one DistinctIds serves
    them all; one made `after` another starts where that one ended. measure()
    (bench/service.py) calls ran() after each run."""

    def __init__(self, folder: Path, name: str, script: str, first: int = 0,
                 after: DistinctIds | None = None) -> None:
        self.folder = folder
        self.name = name
        self.script = script
        self.next = first
        self.after = after

    def __call__(self) -> Path:
        if self.after is not None:
            self.next = max(self.next, self.after.next)
        path = self.folder / f"{self.name}-{self.next}.lua"
        path.write_text(self.script.replace("{first}", str(self.next)))
        return path

    def ran(self, load: Load, connections: int) -> None:
        self.next += load.requests + load.lost + connections


Found = tuple[list[tuple[str, "Load", str]], list[str]]


def store_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of a benchmark over a big store on both databases."""
    parser.add_argument("--runs", type=int, default=3, help="rounds per scenario")
    parser.add_argument("--seconds", type=int, default=3, help="length of each run")
    parser.add_argument("--orders", type=int, default=1_000_000, help="orders in the big store")
    parser.add_argument("--postgres", default=os.environ.get(
        "PETSTORE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"),
        help="a PostgreSQL where the benchmark may create its databases ('' to skip it)")
    parser.add_argument("--no-sqlite", dest="sqlite", action="store_false",
                        help="PostgreSQL only: skip the SQLite rounds (half the time)")


def on_both_stores(run: Callable[[str, str, str, argparse.Namespace, Path], Found],
                   args: argparse.Namespace, benchmark: str) -> Found:
    """run(store, big database, small database, args, folder) over SQLite files (unless
    --no-sqlite), then over two PostgreSQL databases of the benchmark's own (skipped,
    saying so, where none answers); their rows and lines together."""
    rows: list[tuple[str, Load, str]] = []
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="petstore-bench-") as folder:
        if args.sqlite:
            found = run("SQLite", str(Path(folder) / "big.db"), str(Path(folder) / "small.db"),
                        args, Path(folder))
            rows += found[0]
            lines += found[1]
        if args.postgres:
            with scratch_postgres(args.postgres, benchmark) as big, \
                    scratch_postgres(args.postgres, benchmark) as small:
                if big and small:
                    found = run("PostgreSQL", big, small, args, Path(folder))
                    rows += found[0]
                    lines += found[1]
    return rows, lines
