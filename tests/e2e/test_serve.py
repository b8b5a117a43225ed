"""`petstore serve` for real: gunicorn with the uvicorn worker, a fresh SQLite file, HTTP."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import free_port

pytestmark = pytest.mark.slow

PETSTORE = [sys.executable, "-m", "app.cli"]


class Server:
    def __init__(self, port: int, key: str, log: Path) -> None:
        self.port, self.key, self.log = port, key, log

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, headers=headers or {})
            response = conn.getresponse()
            body = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, body
        finally:
            conn.close()

    def authed(self, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        return self.request(method, path, {"Authorization": f"Bearer {self.key}"})


def _wait_for_port(port: int, process: subprocess.Popen[Any], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited early:\n{log.read_text()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/v1/openapi.json")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"server did not answer within 30 s:\n{log.read_text()}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("serve")
    env = {**os.environ, "PETSTORE_DATABASE": str(folder / "petstore.db")}
    init = subprocess.run([*PETSTORE, "init", "--demo"], env=env, capture_output=True,
                          text=True, check=True)
    key = init.stdout.strip()
    port = free_port()
    log = folder / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [*PETSTORE, "serve", "--bind", f"127.0.0.1:{port}"],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_port(port, process, log)
        yield Server(port, key, log)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_demo_key_lists_the_demo_orders(server: Server) -> None:
    status, headers, body = server.authed("GET", "/v1/store/orders")
    assert status == 200
    assert headers["content-type"] == "application/json"
    orders = json.loads(body)
    assert {o["status"] for o in orders} == {"pending", "shipped", "cancelled"}


def test_cancel_pending_shipped_and_unknown_over_real_http(server: Server) -> None:
    orders = json.loads(server.authed("GET", "/v1/store/orders")[2])
    pending = next(o["id"] for o in orders if o["status"] == "pending")
    shipped = next(o["id"] for o in orders if o["status"] == "shipped")

    status, headers, body = server.authed("DELETE", f"/v1/store/orders/{pending}")
    assert (status, body) == (204, b"")

    for order_id, want_status, want_code in ((shipped, 409, "order_already_shipped"),
                                             (999999, 404, "order_not_found"),
                                             ("abc", 400, "invalid_request")):
        status, headers, body = server.authed("DELETE", f"/v1/store/orders/{order_id}")
        assert status == want_status
        assert headers["content-type"] == "application/json"
        assert json.loads(body) == {**json.loads(body), "code": want_code, "status": want_status}

    after = {o["id"]: o["status"] for o in json.loads(server.authed("GET", "/v1/store/orders")[2])}
    assert after[pending] == "cancelled" and after[shipped] == "shipped"


def test_no_key_is_401_with_the_error_object(server: Server) -> None:
    status, headers, body = server.request("GET", "/v1/store/orders")
    assert status == 401
    assert headers["www-authenticate"] == "Bearer"
    assert json.loads(body)["code"] == "missing_api_key"


def test_the_key_never_reaches_the_server_log(server: Server) -> None:
    server.request("GET", "/v1/store/orders", {"Authorization": "Bearer psk_not_a_real_key"})
    log = server.log.read_text()
    assert server.key not in log and "psk_not_a_real_key" not in log
