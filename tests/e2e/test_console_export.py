"""The console's CSV export of a million orders, from a real `petstore serve` (one worker):
streamed a page at a time, so the worker's peak memory grows by far less than the CSV it
sends (D35)."""

from __future__ import annotations

import http.client
import subprocess
import time
from pathlib import Path

import pytest

from app.core.config import Settings
from app.core.storage import open_store
from app.core.users import accounts, sessions
from tests.support import PETSTORE, serving

pytestmark = pytest.mark.slow

ORDERS = 1_000_000
GROWTH_MB = 20  # the CSV is about 30 MB; gathered whole, it and its rows would take far more


def _peak_rss_mb(master: int) -> float:
    """The peak resident memory (VmHWM) of the server's worker."""
    worker = Path(f"/proc/{master}/task/{master}/children").read_text().split()[-1]
    for line in Path(f"/proc/{worker}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_million_orders_export_without_the_worker_growing(tmp_path: Path) -> None:
    with serving(tmp_path) as server:
        rows = "\n".join(f'{{"id":{i},"petId":{i % 97},"quantity":1}}'
                         for i in range(1, ORDERS + 1))
        subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"], input=rows,
                       env=server.env, check=True, capture_output=True, text=True)
        store = open_store(Settings(database=server.env["PETSTORE_DATABASE"]))
        user, _ = accounts.add(store, "owner")
        opened = sessions.open_session(store, user, sessions.OPEN, time.time())
        store.update_console_user(user.id, {"must_change_password": False})
        store.dispose()
        cookie = {"Cookie": f"petstore-console={opened.session_id}"}
        assert server.request("GET", "/console/orders", cookie)[0] == 200
        assert server.process is not None
        before = _peak_rss_mb(server.process.pid)
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=300)
        conn.request("GET", "/console/orders.csv?sort=-id", headers=cookie)
        response = conn.getresponse()
        assert response.status == 200
        lines, sent, first = 0, 0, b""
        while chunk := response.read(1 << 16):
            first = first or chunk[:200]
            lines += chunk.count(b"\n")
            sent += len(chunk)
        conn.close()
        after = _peak_rss_mb(server.process.pid)
    assert lines == ORDERS + 1
    assert first.startswith(b'"id","petId","petName","quantity","shipDate","status",'
                            b'"complete"\r\n"1000000",')
    assert sent > 25 * 2**20
    assert after - before < GROWTH_MB, (before, after)
