"""Redis killed in the middle of a load on two real workers, then started again: never a
500, never a hang; by default the workers go on counting in process memory and return to
Redis by themselves, and with PETSTORE_RATELIMIT_ON_ERROR=closed they answer 503 with
Retry-After until Redis is back."""

from __future__ import annotations

import collections
import http.client
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import PrivateRedis
from tests.support import Server, serving

pytestmark = pytest.mark.slow

LIST = "/v1/store/orders"


def _load(server: Server, key: str, stop: threading.Event,
          answers: collections.Counter[int]) -> None:
    lock = threading.Lock()

    def drive() -> None:
        while not stop.is_set():
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            try:
                conn.request("GET", LIST, headers={"Authorization": f"Bearer {key}"})
                response = conn.getresponse()
                response.read()
                status = response.status
                if status == 503:
                    assert int(response.getheader("Retry-After") or "0") >= 1
            except (OSError, http.client.HTTPException):
                status = 0  # no answer in 10 s, or the connection dropped
            finally:
                conn.close()
            with lock:
                answers[status] += 1

    threads = [threading.Thread(target=drive) for _ in range(6)]
    for thread in threads:
        thread.start()
    stop.wait()
    for thread in threads:
        thread.join(timeout=15)


@pytest.mark.parametrize("on_error", ["fallback", "closed"])
def test_redis_killed_mid_load_is_never_a_500_and_recovers(
    tmp_path: Path, private_redis: PrivateRedis, on_error: str,
) -> None:
    with serving(tmp_path, "--workers", "2", ratelimit_storage=private_redis.url,
                 ratelimit_on_error=on_error) as server:
        key = server.petstore("keys", "create", "--plan", "enterprise", "--name", "load",
                              "--per-minute", "1000000000", "--per-day", "1000000000"
                              ).stdout.strip()
        phases = {}
        for phase in ("before", "outage", "after"):
            answers: collections.Counter[int] = collections.Counter()
            stop = threading.Event()
            loader = threading.Thread(target=_load, args=(server, key, stop, answers))
            loader.start()
            if phase == "outage":
                time.sleep(0.5)
                private_redis.kill()  # while requests are in flight
            time.sleep(2 if phase != "after" else 3)  # after: past the 1 s retry pause
            stop.set()
            loader.join()
            if phase == "outage":
                private_redis.start()
            phases[phase] = answers
        print(on_error, {phase: dict(answers) for phase, answers in phases.items()})

    assert set(phases["before"]) == {200}
    allowed = {200} if on_error == "fallback" else {200, 503}
    assert set(phases["outage"]) <= allowed, phases["outage"]
    if on_error == "closed":
        assert phases["outage"][503] > 0
    assert 200 in phases["after"] and set(phases["after"]) <= allowed
    assert private_redis.dbsize() > 0, "counting in Redis again"
