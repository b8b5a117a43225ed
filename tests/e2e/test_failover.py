"""A standby promoted under load (D41): a primary and a synchronous standby of the test's
own (Debian's PostgreSQL binaries, free ports, a temporary folder; the machine's shared
PostgreSQL untouched), a served petstore over both through
`target_session_attrs=read-write`, clients placing orders under Idempotency-Keys, the
primary killed with SIGKILL and the standby promoted (its synchronous_standby_names,
copied from the primary by pg_basebackup, cleared first: the trap that several-hosts.md
describes). Places resume within the bound, every answer meanwhile is 201 or 503 with
Retry-After, no acknowledged order is lost and every Idempotency-Key replays its order."""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psycopg
import pytest

from tests.faults import Ledger, Load, Watch, assert_unavailable, first_success_after
from tests.support import free_port, serving, unavailable

pytestmark = pytest.mark.slow

RESUMED_WITHIN = 5.0 + 2.0  # places succeed again after the promotion (room for CI)
ANSWER_WITHIN = 5.0 + 2.0  # the manual's bound on any answer, with room for CI


class Cluster:
    """A PostgreSQL server of the test's own, run as the postgres user (root may not)."""

    def __init__(self, bin_dir: Path, folder: Path, port: int) -> None:
        self.bin_dir, self.data, self.port = bin_dir, folder, port

    def run(self, program: str, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["runuser", "-u", "postgres", "--", str(self.bin_dir / program),
                               *args], capture_output=True, text=True, check=True, timeout=120)

    def configure(self, **settings: str) -> None:
        with (self.data / "postgresql.auto.conf").open("a") as conf:
            for name, value in settings.items():
                conf.write(f"{name} = '{value}'\n")

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.data / "server.log"), "-w",
                 "-t", "60", "start")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def kill(self) -> None:
        """SIGKILL the postmaster and every process of it, as a machine lost would."""
        pid_file = self.data / "postmaster.pid"
        if not pid_file.exists():
            return
        leader = int(pid_file.read_text().split()[0])
        children = [int(d) for d in os.listdir("/proc") if d.isdigit()
                    and _parent(int(d)) == leader]
        for pid in (leader, *children):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def stop(self) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", str(self.bin_dir / "pg_ctl"), "-D",
                        str(self.data), "-m", "immediate", "stop"], capture_output=True,
                       timeout=60)


def _parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _postgres_binaries() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found or shutil.which("runuser") is None:
        unavailable("a failover test needs PostgreSQL's server binaries "
                     "(apt-get install postgresql) and runuser")
    if os.geteuid() != 0:
        unavailable("a failover test runs its PostgreSQL servers as the postgres user "
                     "(needs root)")
    return Path(found[-1]).parent


@contextmanager
def primary_and_standby() -> Iterator[tuple[Cluster, Cluster]]:
    """A primary and a synchronous standby streaming from it, on free ports of 127.0.0.1."""
    bin_dir = _postgres_binaries()
    folder = Path(tempfile.mkdtemp(prefix="petstore-failover-"))
    shutil.chown(folder, "postgres")
    primary = Cluster(bin_dir, folder / "primary", free_port())
    standby = Cluster(bin_dir, folder / "standby", free_port())
    try:
        primary.run("initdb", "-D", str(primary.data), "-U", "postgres", "--auth=trust",
                    "-E", "UTF8", "--no-sync")
        common = {"listen_addresses": "127.0.0.1", "unix_socket_directories": str(folder),
                  "fsync": "off", "full_page_writes": "off"}
        primary.configure(port=str(primary.port), synchronous_standby_names="FIRST 1 (standby)",
                          **common)
        primary.start()
        primary.run("pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U",
                    "postgres", "-D", str(standby.data), "-X", "stream", "-R", "--no-sync")
        standby.configure(port=str(standby.port), primary_conninfo=(
            f"host=127.0.0.1 port={primary.port} user=postgres application_name=standby"))
        standby.start()
        with psycopg.connect(primary.url(), autocommit=True) as conn:
            deadline = time.monotonic() + 30
            while conn.execute("SELECT count(*) FROM pg_stat_replication WHERE sync_state = "
                               "'sync'").fetchone() != (1,):
                assert time.monotonic() < deadline, "the standby never became synchronous"
                time.sleep(0.1)
            conn.execute("CREATE DATABASE petstore")
        yield primary, standby
    finally:
        primary.kill()
        standby.stop()
        shutil.rmtree(folder, ignore_errors=True)


def test_a_promoted_synchronous_standby_loses_no_acknowledged_order(
        redis_url: str, redis_prefix: str, tmp_path: Path) -> None:
    with primary_and_standby() as (primary, standby):
        database = (f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}"
                    "/petstore?target_session_attrs=read-write")
        # Quotas on, in the shared Redis: every 503 carries the rate-limit headers.
        with serving(tmp_path, "--workers", "2", database=database,
                     ratelimit_storage=redis_url, ratelimit_key_prefix=redis_prefix) as server:
            key = server.petstore("keys", "create", "--plan", "enterprise", "--per-minute",
                                  "100000", "--per-day", "10000000").stdout.strip()
            auth = {"Authorization": f"Bearer {key}"}
            ledger = Ledger()
            with Watch(server.port, ("/readyz",)) as watch, Load(server.port, auth, ledger,
                                                                 clients=12):
                time.sleep(2.0)
                assert ledger.statuses()[201] > 0, ledger.statuses()
                killed = time.monotonic()
                primary.kill()
                # The trap: the standby carries the primary's synchronous_standby_names
                # and, once promoted, would wait forever for a standby of its own.
                with psycopg.connect(standby.url(), autocommit=True) as conn:
                    conn.execute("ALTER SYSTEM SET synchronous_standby_names = ''")
                    conn.execute("SELECT pg_reload_conf()")
                standby.run("pg_ctl", "-D", str(standby.data), "-w", "promote")
                promoted = time.monotonic()
                deadline = promoted + RESUMED_WITHIN + 5
                while (first_success_after(ledger, promoted) is None
                       and time.monotonic() < deadline):
                    time.sleep(0.1)
                time.sleep(2.0)
            resumed = first_success_after(ledger, promoted)
            checked = ledger.check_store(server.port, auth)
            ready = watch.answers["/readyz"]
            print(f"\n{dict(ledger.statuses())} of {len(ledger.answers)} places, longest "
                  f"{ledger.longest():.2f} s; promoted {promoted - killed:.2f} s after the "
                  f"kill, places again {resumed} s after; {checked} acknowledged orders "
                  "all there, each key replaying its order; /readyz "
                  f"{dict(Counter(a.status for a in ready))}, longest "
                  f"{max(a.seconds for a in ready):.2f} s")
            assert all(answer.seconds < 2.0 for answer in ready)
            for answer in ledger.answers:
                assert answer.status in (201, 503), (answer.status, answer.body)
                if answer.status == 503:
                    assert_unavailable(answer)
                assert answer.seconds < ANSWER_WITHIN, f"a place took {answer.seconds:.1f} s"
            assert resumed is not None and resumed < RESUMED_WITHIN, resumed
