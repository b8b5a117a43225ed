"""SIGTERM under load: every request a worker had accepted gets its whole answer."""

from __future__ import annotations

import http.client
import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.support import PETSTORE, serving, wait_until

pytestmark = pytest.mark.slow

# A list big enough, and not cached, that several requests are always in flight: a
# request just connecting at SIGTERM may be refused, one being answered may not be cut.
ORDERS = 100_000


def test_sigterm_lets_requests_in_flight_finish(tmp_path: Path) -> None:
    with serving(tmp_path, graceful_timeout="20", list_cache_bytes="0",
                 gzip_level="0") as server:
        rows = "\n".join(f'{{"id": {i}, "petId": {i % 50}}}' for i in range(1, ORDERS + 1))
        subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                       input=rows, env=server.env, text=True, check=True, capture_output=True)
        key = server.petstore("keys", "create", "--plan", "enterprise", "--per-minute",
                              "1000000", "--per-day", "1000000").stdout.strip()
        outcomes: list[tuple[str, float, float]] = []
        lock = threading.Lock()

        def client() -> None:
            while True:
                started = time.monotonic()
                conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                try:
                    conn.request("GET", "/v1/store/orders",
                                 headers={"Authorization": f"Bearer {key}"})
                    response = conn.getresponse()
                    try:
                        body = response.read()
                    except http.client.IncompleteRead:
                        outcome = "truncated"
                    else:
                        complete = response.status == 200 and len(json.loads(body)) == ORDERS
                        outcome = "complete" if complete else f"bad {response.status}"
                except (ConnectionError, http.client.RemoteDisconnected):
                    outcome = "not accepted"  # refused or reset before any answer
                finally:
                    conn.close()
                with lock:
                    outcomes.append((outcome, started, time.monotonic()))
                if outcome != "complete":
                    return

        threads = [threading.Thread(target=client) for _ in range(8)]
        for thread in threads:
            thread.start()
        # At work: each client answered at least once, and asking again.
        wait_until(lambda: len(outcomes) >= 2 * len(threads), 30, "the clients were not answered")
        assert server.process is not None
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        for thread in threads:
            thread.join(timeout=60)
        assert server.process.wait(timeout=30) == 0

    # Nothing that was answered is cut: every answer is whole (kinds), and requests being
    # answered at SIGTERM finish. One still connecting then may be refused with no answer
    # at all ("not accepted"), as the note at the top says.
    kinds = {outcome for outcome, _, _ in outcomes}
    assert kinds <= {"complete", "not accepted"}, outcomes
    in_flight = [o for o, start, end in outcomes if start < signalled < end]
    assert "complete" in in_flight, f"requests in flight at SIGTERM: {in_flight}"
    print(f"{len(outcomes)} requests, {len(in_flight)} in flight at SIGTERM, all complete")
