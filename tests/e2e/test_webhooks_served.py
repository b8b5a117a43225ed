"""Webhooks from a served instance (D28, D39): a worker killed with SIGKILL in the
middle of an attempt, of an order's message or a pet's, leaves its lease to run out, and
the worker gunicorn starts in its place sends the same message again, with the same
webhook-id, within the lease time."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from app.core import webhook_urls, webhooks
from app.core.config import Settings
from app.core.storage import open_store
from tests.receivers import Received, receiving
from tests.support import PETSTORE, serving

pytestmark = pytest.mark.slow
LEASE_SECONDS = 2


def _worker(pid: int) -> int:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


@pytest.mark.parametrize("subject", ["order", "pet"])
def test_a_worker_killed_mid_attempt_leaves_the_same_message_to_another(
        subject: str, tmp_path: Path) -> None:
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
            webhooks.create(store, None, receiver.url,
                            None if subject == "order" else ["pet.created"], None,
                            webhook_urls.networks("127.0.0.0/8"))
            if subject == "order":
                store.import_orders([{"id": 1, "petId": 1, "quantity": 1}])
            else:
                store.import_pets([{"id": 1, "name": "Rex", "stock": 3}])
            first = receiver.wait_for(1, timeout=10)[0]
            assert server.process is not None
            os.kill(_worker(server.process.pid), signal.SIGKILL)
            killed = time.monotonic()
            killed_yet.set()
            again = receiver.wait_for(2, timeout=LEASE_SECONDS + 15)[1]
        finally:
            store.dispose()
    prefix = "msg_1_" if subject == "order" else "msg_pet_1_"
    assert again.id == first.id == prefix + first.id.rsplit("_", 1)[1]
    assert again.message["data"]["id"] == 1
    # Within the lease (and the new worker's start and first claim).
    assert again.at - killed < LEASE_SECONDS + 10


def test_a_deliverer_of_its_own_delivers_while_the_workers_do_not(tmp_path: Path) -> None:
    """`petstore webhooks deliver` beside `petstore serve` with PETSTORE_WEBHOOKS_ENABLED
    false: the messages come from it, a change made through the API among them, and
    SIGTERM stops it cleanly, its leases given back."""
    allowed = {"PETSTORE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
               "PETSTORE_WEBHOOK_LEASE_SECONDS": str(LEASE_SECONDS)}
    with receiving() as receiver, serving(
            tmp_path, webhooks_enabled="false", webhook_allowed_networks="127.0.0.0/8",
            webhook_lease_seconds=str(LEASE_SECONDS)) as server:
        store = open_store(Settings(database=str(tmp_path / "petstore.db")))
        try:
            endpoint, _ = webhooks.create(store, None, receiver.url, None, None,
                                          webhook_urls.networks("127.0.0.0/8"))
            store.import_orders([{"id": 1, "petId": 1, "quantity": 1}])
            deliverer = subprocess.Popen(
                [*PETSTORE, "webhooks", "deliver"], env={**server.env, **allowed},
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            try:
                first = receiver.wait_for(1, timeout=15)[0]
                assert first.message["data"]["id"] == 1
                holder = store.get_webhook_endpoint(endpoint.id)
                # Its lease names the process that holds it: the deliverer's, no worker's.
                assert holder is not None and f":{deliverer.pid}:" in str(holder.lease_owner)
                key = server.petstore("keys", "create", "--plan", "free").stdout.strip()
                status, _, _ = server.request("DELETE", "/v1/store/orders/1",
                                              {"Authorization": f"Bearer {key}"})
                assert status == 204
                second = receiver.wait_for(2, timeout=15)[1]
                assert second.message["type"] == "order.cancelled"
            finally:
                deliverer.send_signal(signal.SIGTERM)
                _, err = deliverer.communicate(timeout=20)
            assert deliverer.returncode == 0, err
            assert "Traceback" not in err
            held = store.get_webhook_endpoint(endpoint.id)
            assert held is not None and held.lease_owner is None  # given back at the stop
        finally:
            store.dispose()
