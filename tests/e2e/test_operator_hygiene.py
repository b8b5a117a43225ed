"""Operator hygiene of `petstore serve` (issue 19): the metrics folder it makes is gone
after it stops, whatever stopped it; one the operator chose is left alone; and a worker
killed under gunicorn is retired from the live metrics."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.support import PETSTORE, Server, serving

pytestmark = pytest.mark.slow


def metrics_folders(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("petstore-metrics-*"))


def private_tmp(tmp_path: Path) -> dict[str, str]:
    folder = tmp_path / "tmp"
    folder.mkdir()
    return {"TMPDIR": str(folder)}


@pytest.mark.parametrize("stop", ["SIGTERM", "Ctrl-C"])
def test_serve_removes_the_metrics_folder_it_made_when_it_stops(
    tmp_path: Path, stop: str
) -> None:
    environ = private_tmp(tmp_path)
    with serving(tmp_path, environ=environ, own_group=True) as server:
        made = metrics_folders(Path(environ["TMPDIR"]))
        assert len(made) == 1 and list(made[0].glob("*.db")), made
        assert server.process is not None
        if stop == "SIGTERM":  # a service manager stopping it
            server.process.send_signal(signal.SIGTERM)
        else:  # Ctrl-C in its terminal: SIGINT to the master and its workers
            os.killpg(server.process.pid, signal.SIGINT)
        assert server.process.wait(timeout=15) == 0
    assert metrics_folders(Path(environ["TMPDIR"])) == []


def test_serve_removes_it_too_when_the_start_fails(tmp_path: Path) -> None:
    environ = {**os.environ, **private_tmp(tmp_path),
               "PETSTORE_DATABASE": str(tmp_path / "petstore.db")}
    with socket.socket() as taken:  # the address is in use: gunicorn's master gives up
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        address = f"127.0.0.1:{taken.getsockname()[1]}"
        done = subprocess.run([*PETSTORE, "serve", "--bind", address], env=environ,
                              capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "in use" in done.stdout + done.stderr
    assert metrics_folders(Path(environ["TMPDIR"])) == []


def test_serve_leaves_a_metrics_folder_the_operator_set(tmp_path: Path) -> None:
    chosen = tmp_path / "metrics"
    chosen.mkdir()
    with serving(tmp_path, environ={"PROMETHEUS_MULTIPROC_DIR": str(chosen)}):
        pass
    assert chosen.is_dir() and list(chosen.glob("*.db"))


def workers_of(server: Server) -> set[int]:
    assert server.process is not None
    found = subprocess.run(["pgrep", "-P", str(server.process.pid)], capture_output=True,
                           text=True).stdout.split()
    return {int(pid) for pid in found}


def metric(server: Server, name: str) -> float:
    body = server.request("GET", "/metrics")[2].decode()
    return sum(float(value) for value in
               re.findall(rf"^{name}(?:\{{[^}}]*\}})? (\S+)$", body, re.M))


def test_a_killed_worker_is_retired_from_the_live_metrics(tmp_path: Path) -> None:
    chosen = tmp_path / "metrics"
    chosen.mkdir()
    with serving(tmp_path, "--workers", "2", ratelimit_enabled="false",
                 environ={"PROMETHEUS_MULTIPROC_DIR": str(chosen)}) as server:
        deadline = time.monotonic() + 20
        while metric(server, "petstore_workers") != 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert metric(server, "petstore_workers") == 2
        for _ in range(10):
            server.request("GET", "/v1/store/orders")
        answered = metric(server, "petstore_requests_total")
        victim = min(workers_of(server))
        assert (chosen / f"gauge_livesum_{victim}.db").exists()
        os.kill(victim, signal.SIGKILL)
        while (len(workers_of(server) - {victim}) < 2 or victim in workers_of(server)) \
                and time.monotonic() < deadline + 20:
            time.sleep(0.1)
        while metric(server, "petstore_workers") != 2 and time.monotonic() < deadline + 30:
            time.sleep(0.1)
        # Two workers serve, and /metrics says two, not three: the dead one's live gauge
        # file is retired; its counts stay, so totals never go back.
        assert len(workers_of(server)) == 2
        assert metric(server, "petstore_workers") == 2
        assert not (chosen / f"gauge_livesum_{victim}.db").exists()
        assert list(chosen.glob(f"counter_{victim}.db"))
        assert metric(server, "petstore_requests_total") >= answered
