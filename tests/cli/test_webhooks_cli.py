"""`petstore webhooks` (D28): the operator adds, lists, shows, disables, enables,
rotates, replays, tests and removes endpoints; `listen` receives, verifies and prints
messages as JSON lines until SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from app.cli import main
from app.core import webhooks
from app.core.config import Settings
from app.core.storage import open_store
from app.core.storage.records import Change, WebhookEndpoint
from tests.receivers import receiving
from tests.support import PETSTORE, free_port

LOOPBACK = {"PETSTORE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "petstore.db"


def run(db: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, ["webhooks", *args],
                              env={"PETSTORE_DATABASE": str(db), **LOOPBACK, **(env or {})})


def test_an_endpoint_is_added_listed_shown_disabled_enabled_rotated_and_removed(
        db: Path) -> None:
    added = run(db, "add", "http://127.0.0.1:9/hooks", "--type", "order.shipped",
                "--description", "mine")
    assert added.exit_code == 0, added.output
    endpoint = json.loads(added.stdout)
    assert endpoint["secret"].startswith("whsec_") and endpoint["types"] == ["order.shipped"]
    listed = run(db, "list")
    assert "enabled" in listed.stdout and "http://127.0.0.1:9/hooks" in listed.stdout
    assert run(db, "disable", str(endpoint["id"])).exit_code == 0
    shown = json.loads(run(db, "show", str(endpoint["id"])).stdout)
    assert shown["enabled"] is False and shown["disabledReason"] == "disabled by its owner"
    assert run(db, "enable", str(endpoint["id"])).exit_code == 0
    assert json.loads(run(db, "list", "--json").stdout)[0]["enabled"] is True
    rotated = run(db, "rotate-secret", str(endpoint["id"]), "--grace", "60")
    assert rotated.stdout.strip().startswith("whsec_")
    assert rotated.stdout.strip() != endpoint["secret"]
    assert run(db, "replay", str(endpoint["id"])).exit_code == 0
    assert run(db, "remove", str(endpoint["id"])).exit_code == 0
    missing = run(db, "show", str(endpoint["id"]))
    assert missing.exit_code == 1 and "No webhook endpoint has the id" in missing.output


def test_a_refused_url_or_a_bad_cursor_is_said_plainly(db: Path) -> None:
    refused = run(db, "add", "http://169.254.169.254/", env={
        "PETSTORE_WEBHOOK_ALLOWED_NETWORKS": ""})
    assert refused.exit_code == 1 and "not public" in refused.output
    added = json.loads(run(db, "add", "http://127.0.0.1:9/").stdout)
    bad = run(db, "replay", str(added["id"]), "--after", "bm90")
    assert bad.exit_code == 1 and "after" in bad.output and "Traceback" not in bad.output


def test_test_sends_a_ping_and_deliveries_lists_it(db: Path) -> None:
    with receiving() as receiver:
        added = json.loads(run(db, "add", receiver.url).stdout)
        tested = run(db, "test", str(added["id"]))
        assert tested.exit_code == 0, tested.output
        assert json.loads(tested.stdout)["status"] == 204
        ping = receiver.wait_for(1)[0]
    assert ping.message["type"] == "ping"
    listed = run(db, "deliveries", str(added["id"]))
    assert "ping" in listed.stdout and "204" in listed.stdout


def test_listen_prints_each_verified_message_and_stops_on_sigterm(db: Path) -> None:
    secret = webhooks.new_secret()
    port = free_port()
    listener = subprocess.Popen([*PETSTORE, "webhooks", "listen", "--port", str(port),
                                 "--secret", secret],
                                env={**os.environ, "PETSTORE_DATABASE": str(db)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stuck = threading.Timer(30, listener.kill)
    stuck.start()
    try:
        deadline = time.monotonic() + 10
        endpoint = WebhookEndpoint(1, None, f"http://127.0.0.1:{port}/", (), "", True, None,
                                   secret, None, None, 0, 0, None, None, 0, None, "")
        change = Change('{"id":1,"complete":false,"status":"pending"}', 3, 1, "placed")
        body = webhooks.message("order.placed", change.data, time.time())
        headers = webhooks.signed_headers(endpoint, webhooks.webhook_id(change), body,
                                          time.time())
        while True:
            outcome = _post(endpoint.url, headers, body)
            if outcome is not None or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert outcome == 204
        assert _post(endpoint.url, {**headers, "webhook-signature": "v1,AAAA"}, body) == 400
        assert listener.stdout is not None
        printed = json.loads(listener.stdout.readline())
        assert printed["webhook-id"] == "msg_1_3" and printed["type"] == "order.placed"
        assert printed["data"] == {"id": 1, "complete": False, "status": "pending"}
    finally:
        listener.send_signal(signal.SIGTERM)
        _, err = listener.communicate(timeout=10)
        stuck.cancel()
    assert listener.returncode == 0, err
    assert "does not verify" in err and "Stopped." in err and "Traceback" not in err


def _post(url: str, headers: dict[str, str], body: bytes) -> int | None:
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    try:
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=5)
        conn.request("POST", "/", body=body, headers=headers)
        return conn.getresponse().status
    except OSError:
        return None


def test_a_store_holds_the_endpoints_the_cli_adds(db: Path) -> None:
    run(db, "add", "http://127.0.0.1:9/")
    store = open_store(Settings(database=str(db)))
    try:
        assert [e.url for e in store.list_webhook_endpoints()] == ["http://127.0.0.1:9/"]
    finally:
        store.dispose()
