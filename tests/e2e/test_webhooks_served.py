"""Webhooks from a served instance (D28): a worker killed with SIGKILL in the
middle of an attempt leaves its lease to run out, and the worker gunicorn starts in its
place sends the same message again, with the same webhook-id, within the lease time."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from app.core import webhooks
from app.core.config import Settings
from app.core.storage import open_store
from tests.receivers import Received, receiving
from tests.support import serving

pytestmark = pytest.mark.slow
LEASE_SECONDS = 2


def _worker(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def test_a_worker_killed_mid_attempt_leaves_the_same_message_to_another(
        tmp_path: Path) -> None:
    first_arrived: list[float] = []
    killed_yet = threading.Event()

    def answer(got: Received) -> tuple[int, dict[str, str], bytes]:
        if not first_arrived:
            first_arrived.append(time.monotonic())
            killed_yet.wait(60)  # held, unanswered, until the worker is killed
        return 204, {}, b""

    with receiving(answer=answer) as receiver, serving(
            tmp_path, webhook_allowed_networks="127.0.0.0/8",
            webhook_lease_seconds=str(LEASE_SECONDS), webhook_timeout="10") as server:
        store = open_store(Settings(database=str(tmp_path / "petstore.db")))
        try:
            webhooks.create(store, None, receiver.url, None, None,
                            webhooks.networks("127.0.0.0/8"))
            store.import_orders([{"id": 1, "petId": 1, "quantity": 1}])
            first = receiver.wait_for(1, timeout=10)[0]
            assert server.process is not None
            os.kill(_worker(server.process.pid), signal.SIGKILL)
            killed = time.monotonic()
            killed_yet.set()
            again = receiver.wait_for(2, timeout=LEASE_SECONDS + 15)[1]
        finally:
            store.dispose()
    assert again.id == first.id == "msg_1_" + first.id.rsplit("_", 1)[1]
    # Within the lease (and the new worker's start and first claim).
    assert again.at - killed < LEASE_SECONDS + 10
