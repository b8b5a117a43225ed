"""Placing orders over real HTTP against `petstore serve` (D22-D24): however many
requests with one Idempotency-Key race, on one server or two sharing PostgreSQL, exactly one
order results and every answer is that order's 201 or a 409 idempotency_key_in_use; a
rotation of the API key keeps its idempotency keys; a kill -9 right after a 201 loses
neither the order nor its key; and a ship racing a cancel on one order has one winner."""

from __future__ import annotations

import http.client
import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from tests.support import Server, serving

pytestmark = pytest.mark.slow

LIST = "/v2/store/orders"
NEW = {"petId": 7, "quantity": 2}
# Quotas are not what these tests are about (and two workers would need Redis for them).
NO_QUOTAS = {"ratelimit_enabled": "false"}


def send(server: Server, method: str, path: str, headers: dict[str, str],
         body: Any = None) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
    try:
        data = None if body is None else json.dumps(body).encode()
        sent = {**headers, **({"Content-Type": "application/json"} if data else {})}
        conn.request(method, path, body=data, headers=sent)
        response = conn.getresponse()
        return (response.status, {k.lower(): v for k, v in response.getheaders()},
                response.read())
    finally:
        conn.close()


def key_of(server: Server) -> str:
    return server.petstore("keys", "create", "--plan", "business", "--name", "shop").stdout.strip()


def race(servers: list[Server], auth: dict[str, str], idempotency_key: str,
         count: int = 20) -> list[tuple[int, dict[str, str], bytes]]:
    """count POSTs with one key, released together, spread over the servers."""
    barrier = threading.Barrier(count)
    answers: list[tuple[int, dict[str, str], bytes]] = []

    def post(index: int) -> None:
        barrier.wait()
        answers.append(send(servers[index % len(servers)], "POST", LIST,
                            {**auth, "Idempotency-Key": idempotency_key}, NEW))

    threads = [threading.Thread(target=post, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == count
    return answers


def assert_one_order(answers: list[tuple[int, dict[str, str], bytes]]) -> dict[str, Any]:
    statuses = Counter(status for status, _, _ in answers)
    assert set(statuses) <= {201, 409}, statuses
    placed = [body for status, _, body in answers if status == 201]
    assert placed and len(set(placed)) == 1, placed  # every 201: the same order
    for status, headers, body in answers:
        if status == 409:
            assert json.loads(body)["code"] == "idempotency_key_in_use"
            assert int(headers["retry-after"]) >= 1
    return dict(json.loads(placed[0]))


def count_orders(server: Server, auth: dict[str, str]) -> int:
    status, _, body = send(server, "GET", "/v1/store/orders", auth)
    assert status == 200
    return len(json.loads(body))


def test_twenty_racing_posts_with_one_key_place_one_order_on_sqlite(tmp_path: Path) -> None:
    with serving(tmp_path, "--workers", "2", **NO_QUOTAS) as server:
        auth = {"Authorization": f"Bearer {key_of(server)}"}
        for round_ in range(3):
            order = assert_one_order(race([server], auth, f"race-{round_}"))
            assert order["status"] == "pending"
        assert count_orders(server, auth) == 3


@pytest.fixture
def two_hosts(tmp_path: Path, postgres_database: str) -> Iterator[list[Server]]:
    """Two `petstore serve` processes, as two hosts would run, over one PostgreSQL."""
    with ExitStack() as stack:
        servers = []
        for host in ("host1", "host2"):
            (tmp_path / host).mkdir()
            servers.append(stack.enter_context(serving(
                tmp_path / host, environ={"PETSTORE_DATABASE": postgres_database},
                **NO_QUOTAS)))
        yield servers


def test_twenty_racing_posts_over_two_hosts_place_one_order_on_postgresql(
        two_hosts: list[Server]) -> None:
    auth = {"Authorization": f"Bearer {key_of(two_hosts[0])}"}
    for round_ in range(3):
        assert_one_order(race(two_hosts, auth, f"race-{round_}"))
    assert count_orders(two_hosts[1], auth) == 3


def test_a_replay_after_the_api_key_is_rotated_still_replays(tmp_path: Path) -> None:
    with serving(tmp_path, **NO_QUOTAS) as server:
        old = key_of(server)
        first = send(server, "POST", LIST, {"Authorization": f"Bearer {old}",
                                            "Idempotency-Key": "rotate-me"}, NEW)
        assert first[0] == 201
        new = server.petstore("keys", "rotate", "1", "--grace", "1h").stdout.strip()
        again = send(server, "POST", LIST, {"Authorization": f"Bearer {new}",
                                            "Idempotency-Key": "rotate-me"}, NEW)
        assert again[0] == 201 and again[2] == first[2]
        assert again[1]["idempotent-replayed"] == "true"
        assert count_orders(server, {"Authorization": f"Bearer {new}"}) == 1


def test_a_kill_9_right_after_a_201_keeps_the_order_and_its_key(tmp_path: Path) -> None:
    with serving(tmp_path, own_group=True, **NO_QUOTAS) as server:
        auth = {"Authorization": f"Bearer {key_of(server)}"}
        first = send(server, "POST", LIST, {**auth, "Idempotency-Key": "crash"}, NEW)
        assert first[0] == 201
        assert server.process is not None
        os.killpg(server.process.pid, signal.SIGKILL)  # master and workers, no shutdown
        server.process.wait()
    with serving(tmp_path, **NO_QUOTAS) as again:
        retry = send(again, "POST", LIST, {**auth, "Idempotency-Key": "crash"}, NEW)
        assert retry[0] == 201 and retry[2] == first[2]
        assert retry[1]["idempotent-replayed"] == "true"
        assert count_orders(again, auth) == 1


def test_a_ship_racing_a_cancel_has_one_winner_and_one_409(tmp_path: Path) -> None:
    with serving(tmp_path, "--workers", "2", **NO_QUOTAS) as server:
        auth = {"Authorization": f"Bearer {key_of(server)}"}
        ids = [json.loads(send(server, "POST", LIST, {**auth, "Idempotency-Key": f"o{i}"},
                               NEW)[2])["id"] for i in range(20)]
        for order_id in ids:
            ship, cancel = together(
                lambda order_id=order_id: send(server, "POST", f"{LIST}/{order_id}/ship", auth),
                lambda order_id=order_id: send(server, "DELETE", f"{LIST}/{order_id}", auth))
            final = json.loads(send(server, "GET", f"{LIST}/{order_id}", auth)[2])["status"]
            if final == "shipped":
                assert (ship[0], cancel[0]) == (200, 409)
                assert json.loads(cancel[2])["code"] == "order_already_shipped"
            else:
                assert final == "cancelled"
                assert (ship[0], cancel[0]) == (409, 204)
                assert json.loads(ship[2])["code"] == "order_cancelled"


def together(*calls: Callable[[], Any]) -> list[Any]:
    """Each call's result, the calls released at the same moment from threads of their own."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(index: int) -> None:
        barrier.wait()
        results[index] = calls[index]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    return results
