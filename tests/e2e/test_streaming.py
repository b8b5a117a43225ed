"""A list larger than the cache, streamed by a real `petstore serve` (one worker): slow
downloads hold no handler thread, so other requests go on being answered."""

from __future__ import annotations

import json
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import PETSTORE, serving

pytestmark = pytest.mark.slow

ORDERS = 250_000  # 25 pages of the streamed list: more than a2wsgi queued per response
SLOW_CLIENTS = 10  # as many as the worker has handler threads
LIST = "/v1/store/orders"


def _import_orders(env: dict[str, str], count: int) -> None:
    rows = "\n".join(json.dumps({"id": i, "petId": i % 97, "quantity": 1})
                     for i in range(1, count + 1))
    subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"], input=rows,
                   env=env, check=True, capture_output=True, text=True)


def _stalled_download(port: int, key: str) -> socket.socket:
    """Ask for the list, read its first bytes, then stop reading (the socket stays open)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.sendall(f"GET {LIST} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\r\n"
                 .encode())
    assert sock.recv(1024).startswith(b"HTTP/1.1 200")
    return sock


def test_slow_downloads_of_a_streamed_list_leave_the_handler_threads_free(
    tmp_path: Path,
) -> None:
    with serving(tmp_path, workers="1", list_cache_bytes="1000000") as server:
        key = server.petstore("keys", "create", "--plan", "enterprise", "--name", "slow",
                              "--per-minute", "100000", "--per-day", "1000000").stdout.strip()
        _import_orders(server.env, ORDERS)
        auth = {"Authorization": f"Bearer {key}"}

        status, headers, body = server.request("GET", LIST, auth)
        assert status == 200 and "content-length" not in headers  # streamed, chunked
        orders = json.loads(body)
        assert len(orders) == ORDERS and orders[-1]["id"] == ORDERS

        stalled = [_stalled_download(server.port, key) for _ in range(SLOW_CLIENTS)]
        try:
            # Requests that need a handler thread, several at once, while all ten stall.
            with ThreadPoolExecutor(5) as pool:
                answers = list(pool.map(
                    lambda order_id: server.request("DELETE", f"{LIST}/{order_id}", auth),
                    range(1, 21)))
            assert [status for status, _, _ in answers] == [204] * 20
        finally:
            for sock in stalled:
                sock.close()
        # The server goes on serving whole lists after the stalled clients left.
        status, _, body = server.request("GET", LIST, auth)
        assert status == 200
        assert sum(o["status"] == "cancelled" for o in json.loads(body)) == 20
