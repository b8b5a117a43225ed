"""An answered write survives kill -9 (D15), grouped commits included: under a write load of 16
connections (placing, shipping and cancelling at once) the whole `petstore serve` (master
and workers) is killed with SIGKILL, and after a restart every write that had been answered
2xx is in the store, on SQLite and on PostgreSQL. A write in flight at the kill may or may
not have happened; one that was answered must have."""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_placing import NEW, NO_QUOTAS, send
from tests.support import Server, serving

pytestmark = pytest.mark.slow

LIST = "/v2/store/orders"
CONNECTIONS = 16
ANSWERED_BEFORE_THE_KILL = 300  # writes answered 2xx, then the kill
LOAD_AT_MOST_SECONDS = 20.0


@pytest.fixture(params=["sqlite", "postgresql"])
def store_environ(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The server's database: a SQLite file in the test's folder, or a PostgreSQL database of
    the test's own."""
    if request.param == "sqlite":
        yield {}
    else:
        yield {"PETSTORE_DATABASE": request.getfixturevalue("postgres_database")}


class Ledger:
    """What the writers were told, order by order: the state of its last answered write, and
    the state its next write (sent, perhaps unanswered at the kill) would give it."""

    def __init__(self) -> None:
        self.answered: dict[int, str] = {}
        self.pending_move: dict[int, str] = {}
        self.count = 0
        self.unexpected: list[tuple[int, bytes]] = []  # answers other than the write's 2xx
        self.lock = threading.Lock()

    def answer(self, order_id: int, state: str, next_state: str | None = None) -> None:
        with self.lock:
            self.answered[order_id] = state
            self.count += 1
            if next_state is None:
                self.pending_move.pop(order_id, None)
            else:
                self.pending_move[order_id] = next_state

    def acceptable(self, order_id: int) -> set[str]:
        return {self.answered[order_id], *filter(None, [self.pending_move.get(order_id)])}


def write_until_stopped(server: Server, auth: dict[str, str], writer: int, ledger: Ledger,
                        stop: threading.Event) -> None:
    """Place an order, then ship it (odd rounds) or cancel it (even ones), over and over,
    writing down each answered write, until stopped or the server is gone."""
    round_ = 0
    try:
        while not stop.is_set():
            round_ += 1
            move = "shipped" if round_ % 2 else "cancelled"
            status, _, body = send(server, "POST", LIST,
                                   {**auth, "Idempotency-Key": f"w{writer}-{round_}"}, NEW)
            if status != 201:
                ledger.unexpected.append((status, body))
                return
            order_id = json.loads(body)["id"]
            ledger.answer(order_id, "pending", next_state=move)
            if move == "shipped":
                status, _, body = send(server, "POST", f"{LIST}/{order_id}/ship", auth)
            else:
                status, _, body = send(server, "DELETE", f"{LIST}/{order_id}", auth)
            if status not in (200, 204):
                ledger.unexpected.append((status, body))
                return
            ledger.answer(order_id, move)
    except (OSError, http.client.HTTPException):
        return  # the server was killed under this request


def test_a_kill_9_under_a_write_load_loses_no_answered_write(
        tmp_path: Path, store_environ: dict[str, str]) -> None:
    ledger = Ledger()
    # Quotas on, as served by default, under a key whose quotas this load does not reach.
    with serving(tmp_path, own_group=True, environ=store_environ) as server:
        key = server.petstore("keys", "create", "--plan", "enterprise", "--name", "load",
                              "--per-minute", "1000000000", "--per-day", "1000000000")
        auth = {"Authorization": f"Bearer {key.stdout.strip()}"}
        stop = threading.Event()
        writers = [threading.Thread(target=write_until_stopped,
                                    args=(server, auth, n, ledger, stop), daemon=True)
                   for n in range(CONNECTIONS)]
        for writer in writers:
            writer.start()
        deadline = time.monotonic() + LOAD_AT_MOST_SECONDS
        while ledger.count < ANSWERED_BEFORE_THE_KILL and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.process is not None
        os.killpg(server.process.pid, signal.SIGKILL)  # master and workers, mid-write
        server.process.wait()
        stop.set()
        for writer in writers:
            writer.join(30)
        assert not any(writer.is_alive() for writer in writers)
    assert not ledger.unexpected, ledger.unexpected[:5]
    assert ledger.count >= ANSWERED_BEFORE_THE_KILL, ledger.count

    with serving(tmp_path, environ=store_environ, **NO_QUOTAS) as again:
        stored = again.statuses(auth)
    lost = {order_id: (ledger.acceptable(order_id), stored.get(order_id))
            for order_id in ledger.answered if stored.get(order_id) not in
            ledger.acceptable(order_id)}
    assert not lost, f"answered writes not in the store after the restart: {lost}"
