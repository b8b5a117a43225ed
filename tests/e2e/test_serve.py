"""`petstore serve` for real: gunicorn with the uvicorn worker, a fresh SQLite file, HTTP."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import PETSTORE, Server, free_port, serving

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    with serving(tmp_path_factory.mktemp("serve")) as server:
        key = server.petstore("init", "--demo").stdout.strip()
        assert key.startswith("psk_")
        yield server, key


def test_the_demo_key_lists_the_demo_orders(server: tuple[Server, str]) -> None:
    http, key = server
    status, headers, body = http.request("GET", "/v1/store/orders",
                                         {"Authorization": f"Bearer {key}"})
    assert status == 200
    assert headers["content-type"] == "application/json"
    assert headers["x-ratelimit-limit"] == "60"
    orders = json.loads(body)
    assert {o["status"] for o in orders} == {"pending", "shipped", "cancelled"}


def test_cancel_pending_shipped_and_unknown_over_real_http(server: tuple[Server, str]) -> None:
    http, key = server
    auth = {"Authorization": f"Bearer {key}"}
    orders = json.loads(http.request("GET", "/v1/store/orders", auth)[2])
    pending = next(o["id"] for o in orders if o["status"] == "pending")
    shipped = next(o["id"] for o in orders if o["status"] == "shipped")

    status, headers, body = http.request("DELETE", f"/v1/store/orders/{pending}", auth)
    assert (status, body) == (204, b"")

    for order_id, want_status, want_code in ((shipped, 409, "order_already_shipped"),
                                             (999999, 404, "order_not_found"),
                                             ("abc", 400, "invalid_request")):
        status, headers, body = http.request("DELETE", f"/v1/store/orders/{order_id}", auth)
        assert status == want_status
        assert headers["content-type"] == "application/json"
        error = json.loads(body)
        assert (error["code"], error["status"]) == (want_code, want_status)

    after = {o["id"]: o["status"]
             for o in json.loads(http.request("GET", "/v1/store/orders", auth)[2])}
    assert after[pending] == "cancelled" and after[shipped] == "shipped"


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def test_every_thread_of_the_worker_runs_as_batch_work(server: tuple[Server, str]) -> None:
    """A thread the worker wakes waits for its waker rather than preempting it
    (worker.batch_scheduling): the loop's thread, the handler thread a cancel ran in, and
    every other thread the worker started, all after the policy was set."""
    http, key = server
    status, _, _ = http.request("DELETE", "/v1/store/orders/1", {"Authorization": f"Bearer {key}"})
    assert status in (204, 409)
    assert http.process is not None
    master = http.process.pid
    (worker,) = map(int, Path(f"/proc/{master}/task/{master}/children").read_text().split())
    policies = {int(tid): os.sched_getscheduler(int(tid))
                for tid in os.listdir(f"/proc/{worker}/task")}
    assert len(policies) >= 2, policies  # the loop's thread and a handler thread at least
    assert set(policies.values()) == {os.SCHED_BATCH}, policies
    assert os.sched_getscheduler(master) != os.SCHED_BATCH  # the master is left as it was


def test_no_key_is_401_with_the_error_object(server: tuple[Server, str]) -> None:
    http, _ = server
    status, headers, body = http.request("GET", "/v1/store/orders")
    assert status == 401
    assert headers["www-authenticate"] == "Bearer"
    assert "x-ratelimit-remaining" in headers
    assert json.loads(body)["code"] == "missing_api_key"


def test_the_key_never_reaches_the_server_log(server: tuple[Server, str]) -> None:
    http, key = server
    http.request("GET", "/v1/store/orders", {"Authorization": "Bearer psk_not_a_real_key"})
    log = http.log.read_text()
    assert key not in log and "psk_not_a_real_key" not in log


def test_the_server_logs_one_json_access_line_per_request(server: tuple[Server, str]) -> None:
    import time

    http, key = server
    http.request("DELETE", "/v1/store/orders/999999",
                 {"Authorization": f"Bearer {key}", "X-Request-ID": "e2e-line"})
    deadline = time.monotonic() + 5
    while '"e2e-line"' not in http.log.read_text():
        assert time.monotonic() < deadline, http.log.read_text()[-2000:]
        time.sleep(0.05)
    line = next(json.loads(text) for text in http.log.read_text().splitlines()
                if '"e2e-line"' in text)
    assert (line["method"], line["path"], line["status"]) == (
        "DELETE", "/v1/store/orders/{orderId}", 404)
    assert isinstance(line["key_id"], int) and line["duration_ms"] > 0


def test_every_line_of_the_server_log_is_json_of_one_shape(server: tuple[Server, str]) -> None:
    """gunicorn's, uvicorn's and the service's lines alike: time, level, logger, message
    first, no field with terminal escape codes (uvicorn's color_message), nothing else."""
    http, _ = server
    http.request("GET", "/v1/store/orders", {})
    lines = http.log.read_text().splitlines()
    loggers = set()
    for text in lines:
        assert text.startswith('{"time":"'), text  # compact JSON, not json.dumps' spaces
        line = json.loads(text)
        assert list(line)[:4] == ["time", "level", "logger", "message"], line
        assert "color_message" not in line and "\x1b" not in text, line
        loggers.add(line["logger"].split(".")[0])
    assert {"petstore", "gunicorn", "uvicorn"} <= loggers, loggers


@pytest.mark.parametrize(("name", "value"), [("ANONYMOUS_PLAN", "gold"),
                                             ("RATELIMIT_STORAGE", "foo://host")])
def test_a_setting_only_the_service_can_check_stops_it_at_start(
        tmp_path: Path, name: str, value: str) -> None:
    """The plans live in the document and the storages in the limits library: checked when
    the worker builds the app, not at the first request, and named in the log."""
    env = {**os.environ, "PETSTORE_DATABASE": str(tmp_path / "p.db"), "TMPDIR": str(tmp_path),
           f"PETSTORE_{name}": value}
    done = subprocess.run([*PETSTORE, "serve", "--bind", f"127.0.0.1:{free_port()}"],
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert f"PETSTORE_{name}" in done.stdout + done.stderr
