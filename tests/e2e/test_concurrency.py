"""Nothing lost under concurrency or a crash: real `petstore serve` with two gunicorn
workers over one SQLite file, real HTTP, the CLI in processes of its own."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import PETSTORE, Server, serving

pytestmark = pytest.mark.slow

LIST = "/v1/store/orders"
TWO_WORKERS = ("--workers", "2")
# Two workers with in-process quotas would each count on their own; these tests are about
# orders, so quotas are off (tests/e2e/test_quotas_redis.py covers quotas shared by workers).
NO_QUOTAS = {"ratelimit_enabled": "false"}


def _key(server: Server) -> dict[str, str]:
    key = server.petstore("keys", "create", "--plan", "free", "--name", "race").stdout.strip()
    return {"Authorization": f"Bearer {key}"}


def _import(server: Server, count: int) -> None:
    rows = "\n".join(json.dumps({"id": i, "petId": 1, "quantity": 1})
                     for i in range(1, count + 1))
    subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"], input=rows,
                   env=server.env, check=True, capture_output=True, text=True)


def test_fifty_concurrent_cancels_of_one_order_over_two_workers_record_one(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, *TWO_WORKERS, **NO_QUOTAS) as server:
        auth = _key(server)
        _import(server, 3)
        before = server.revision(auth)
        barrier = threading.Barrier(50)

        def cancel(_: int) -> int:
            barrier.wait()
            return server.request("DELETE", f"{LIST}/2", auth)[0]

        with ThreadPoolExecutor(50) as pool:
            answers = list(pool.map(cancel, range(50)))
        assert answers == [204] * 50  # cancelling a cancelled order changes nothing (D3)
        assert server.statuses(auth) == {1: "pending", 2: "cancelled", 3: "pending"}
        # Every change to an order raises the revision by one: one cancellation recorded.
        assert server.revision(auth) == before + 1


def test_cancels_racing_the_cli_ship_end_each_order_cancelled_or_shipped(
    tmp_path: Path,
) -> None:
    """The CLI ships orders 60 down to 1 while cancels of 1 up to 60 arrive over HTTP.
    Each order ends in exactly one state, and both sides say which."""
    count = 60
    with serving(tmp_path, *TWO_WORKERS, **NO_QUOTAS) as server:
        auth = _key(server)
        _import(server, count)
        def cancel(order_id: int) -> int:
            time.sleep(order_id * 0.02)
            return server.request("DELETE", f"{LIST}/{order_id}", auth)[0]

        # Cancels of 1 upward go out one every 20 ms; the CLI, shipping 60 downward, starts
        # once a third are answered, whatever its own start-up takes: the two meet in the
        # middle, where they race for the same orders.
        with ThreadPoolExecutor(20) as pool:
            futures = [pool.submit(cancel, order_id) for order_id in range(1, count + 1)]
            deadline = time.monotonic() + 30
            while sum(f.done() for f in futures) < count // 3:
                assert time.monotonic() < deadline, "the cancels did not get going"
                time.sleep(0.005)
            ship = subprocess.Popen([*PETSTORE, "orders", "ship",
                                     *map(str, range(count, 0, -1))],
                                    env=server.env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True)
            cancels = {order_id: future.result()
                       for order_id, future in zip(range(1, count + 1), futures, strict=True)}
        said = ship.communicate(timeout=60)[0]
        final = server.statuses(auth)

    for order_id in range(1, count + 1):
        line = next(line for line in said.splitlines() if line.startswith(f"order {order_id}:"))
        if cancels[order_id] == 204:
            assert final[order_id] == "cancelled", order_id
            assert "is cancelled and cannot be shipped" in line, line
        else:
            assert cancels[order_id] == 409, (order_id, cancels[order_id])
            assert final[order_id] == "shipped", order_id
            assert "shipped on" in line, line
    assert ship.returncode == (1 if 204 in cancels.values() else 0)
    # The two really raced: some orders went each way (about half and half here).
    assert 204 in cancels.values() and 409 in cancels.values(), cancels


def test_kill_9_of_master_and_workers_loses_no_acknowledged_cancel(tmp_path: Path) -> None:
    count = 3000
    acknowledged: list[int] = []
    with serving(tmp_path, *TWO_WORKERS, **NO_QUOTAS) as server:
        auth = _key(server)
        _import(server, count)
        assert server.process is not None
        workers = [int(pid) for pid in Path(
            f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()]
        assert len(workers) == 2
        stop = threading.Event()

        def cancel_from(first: int) -> None:
            for order_id in range(first, count + 1, 8):
                if stop.is_set():
                    return
                try:
                    if server.request("DELETE", f"{LIST}/{order_id}", auth)[0] == 204:
                        acknowledged.append(order_id)
                except OSError:
                    return  # the server is gone

        threads = [threading.Thread(target=cancel_from, args=(first,)) for first in range(1, 9)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + 20
        while len(acknowledged) < 300 and time.monotonic() < deadline:
            time.sleep(0.01)
        for pid in (server.process.pid, *workers):
            os.kill(pid, signal.SIGKILL)
        stop.set()
        for thread in threads:
            thread.join(timeout=15)
        assert len(acknowledged) >= 300, "the load did not get going"

    database = tmp_path / "petstore.db"
    with sqlite3.connect(database) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    with serving(tmp_path, **NO_QUOTAS) as again:
        statuses = again.statuses(auth)
    lost = [order_id for order_id in acknowledged if statuses[order_id] != "cancelled"]
    assert lost == []


def test_a_revoked_key_is_refused_by_every_worker_within_the_key_cache_time(
    tmp_path: Path,
) -> None:
    cache_seconds = 2
    with serving(tmp_path, *TWO_WORKERS, key_cache_seconds=str(cache_seconds),
                 **NO_QUOTAS) as server:
        auth = _key(server)
        # Fresh connections, spread by the kernel over both workers: both cache the key.
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(lambda _: server.request("GET", LIST, auth)[0],
                                range(40))) == {200}
        key = auth["Authorization"].split()[1]
        keys = json.loads(server.petstore("keys", "list", "--json").stdout)
        key_id = next(k["id"] for k in keys if key.startswith(k["prefix"]))
        server.petstore("keys", "revoke", str(key_id))
        revoked = time.monotonic()
        while True:
            with ThreadPoolExecutor(8) as pool:
                answers = list(pool.map(lambda _: server.request("GET", LIST, auth)[0],
                                        range(40)))
            if set(answers) == {401}:
                break
            assert set(answers) <= {200, 401}, answers
            assert time.monotonic() - revoked < cache_seconds + 5, "still accepted"
            time.sleep(0.2)
        # And it stays refused everywhere.
        with ThreadPoolExecutor(8) as pool:
            assert set(pool.map(lambda _: server.request("GET", LIST, auth)[0],
                                range(40))) == {401}
