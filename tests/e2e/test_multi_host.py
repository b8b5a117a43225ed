"""Several hosts, one store, one quota: two `petstore serve` processes on different ports
(two workers each), over one PostgreSQL database of the test's own and one Redis, as a
shop behind a proxy runs them. Real HTTP throughout."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.support import Server, postgres_databases, serving

pytestmark = pytest.mark.slow

LIST = "/v1/store/orders"


class Hosts:
    """Host a and host b, and requests spread over them in turn."""

    def __init__(self, a: Server, b: Server) -> None:
        self.a, self.b = a, b

    def of(self, i: int) -> Server:
        return (self.a, self.b)[i % 2]

    def key(self, *plan: str) -> dict[str, str]:
        secret = self.a.petstore("keys", "create", "--name", "multi-host", "--plan",
                                 *plan).stdout.strip()
        return {"Authorization": f"Bearer {secret}"}

    def orders(self, count: int, first: int) -> None:
        rows = "\n".join(json.dumps({"id": i, "petId": 1, "quantity": 1})
                         for i in range(first, first + count))
        path = Path(self.a.log).with_name(f"orders-{first}.ndjson")
        path.write_text(rows)
        self.b.petstore("orders", "import", "--format", "ndjson", str(path))


@pytest.fixture(scope="module")
def hosts(postgres_url: str, redis_url: str,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hosts]:
    import redis

    folder = tmp_path_factory.mktemp("multi-host")
    # Unique to this run: a run stopped half-way leaves its counters behind, and the next
    # run's key (id 1 again) would find its quota spent under a prefix named by the folder.
    prefix = f"petstore-test-multi-{uuid.uuid4().hex[:12]}"
    with postgres_databases(postgres_url) as create:
        shared = {"database": create(), "ratelimit_storage": redis_url,
                  "ratelimit_key_prefix": prefix}
        (folder / "a").mkdir()
        (folder / "b").mkdir()
        with serving(folder / "a", "--workers", "2", **shared) as a, \
                serving(folder / "b", "--workers", "2", **shared) as b:
            assert a.port != b.port
            yield Hosts(a, b)
    client = redis.Redis.from_url(redis_url)
    for name in client.scan_iter(f"{prefix}*"):
        client.delete(name)


def test_a_free_keys_seventy_requests_over_two_hosts_get_exactly_sixty(hosts: Hosts) -> None:
    auth = hosts.key("free")
    barrier = threading.Barrier(10)

    def call(i: int) -> tuple[int, dict[str, str]]:
        if i < 10:
            barrier.wait()
        status, headers, _ = hosts.of(i).request("GET", LIST, auth)
        return status, headers

    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(call, range(70)))
    statuses = Counter(status for status, _ in answers)
    print(f"\nFree key, 70 requests over two hosts: {dict(statuses)}")
    assert statuses == {200: 60, 429: 10}
    for status, headers in answers:
        assert headers["x-ratelimit-limit"] == "60"
        if status == 429:
            assert int(headers["retry-after"]) >= 1
    by_host = Counter(i % 2 for i, (status, _) in enumerate(answers) if status == 200)
    assert by_host[0] > 0 and by_host[1] > 0, "both hosts served the key"


def test_fifty_concurrent_cancels_over_two_hosts_record_one_cancellation(hosts: Hosts) -> None:
    auth = hosts.key("enterprise", "--per-minute", "100000", "--per-day", "1000000")
    hosts.orders(1, first=1000)
    before = hosts.a.revision(auth)
    barrier = threading.Barrier(50)

    def cancel(i: int) -> int:
        barrier.wait()
        return hosts.of(i).request("DELETE", f"{LIST}/1000", auth)[0]

    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(cancel, range(50)))
    print(f"\n50 concurrent cancels over two hosts: {dict(Counter(answers))}, "
          f"revision {before} -> {hosts.b.revision(auth)}")
    assert answers == [204] * 50  # cancelling a cancelled order changes nothing (D3)
    assert hosts.b.statuses(auth)[1000] == "cancelled"
    # Every change to the orders raises the revision by one: one cancellation recorded.
    assert hosts.a.revision(auth) == hosts.b.revision(auth) == before + 1


def test_a_cancel_on_one_host_is_seen_by_a_list_on_the_other_at_once(hosts: Hosts) -> None:
    auth = hosts.key("enterprise", "--per-minute", "100000", "--per-day", "1000000")
    hosts.orders(20, first=2000)
    for i in range(2000, 2020):
        here, there = hosts.of(i), hosts.of(i + 1)
        assert there.statuses(auth)[i] == "pending"  # the other host's list is cached now
        etag = there.request("GET", LIST, auth)[1]["etag"]
        assert there.request("GET", LIST, {**auth, "If-None-Match": etag})[0] == 304
        assert here.request("DELETE", f"{LIST}/{i}", auth)[0] == 204
        status, headers, body = there.request("GET", LIST, {**auth, "If-None-Match": etag})
        assert status == 200, "the old ETag no longer matches on the other host"
        assert headers["etag"] != etag
        assert {o["id"]: o["status"] for o in json.loads(body)}[i] == "cancelled"
    # A refusal and an unknown order answer alike on both hosts.
    hosts.orders(1, first=2100)
    hosts.a.petstore("orders", "ship", "2100")
    for server in (hosts.a, hosts.b):
        assert server.request("DELETE", f"{LIST}/2100", auth)[0] == 409
        assert server.request("DELETE", f"{LIST}/999999", auth)[0] == 404


def _post(server: Server, path: str, body: dict[str, object],
          headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    """POST as a client does: under one Idempotency-Key, sent again after a 503's
    Retry-After (a busy database's answer, D41) for up to RETRIED_FOR seconds."""
    import http.client

    key = uuid.uuid4().hex
    give_up = time.monotonic() + RETRIED_FOR
    while True:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        try:
            conn.request("POST", path, body=json.dumps(body),
                         headers={**headers, "Content-Type": "application/json",
                                  "Idempotency-Key": key})
            response = conn.getresponse()
            answer = response.status, json.loads(response.read() or b"{}")
            wait = float(response.headers.get("Retry-After") or 1)
        finally:
            conn.close()
        if answer[0] != 503 or time.monotonic() + wait > give_up:
            return answer
        time.sleep(wait)


RETRIED_FOR = 30.0


def test_a_sale_over_two_hosts_sells_exactly_the_units_there_are(hosts: Hosts) -> None:
    """D33: 60 customers at once, over two hosts of two workers each, for a pet with 25
    units: exactly 25 orders are placed, the other 35 are refused out_of_stock, and both
    hosts read the pet sold out."""
    auth = hosts.key("business")
    status, pet = _post(hosts.a, "/v2/pets", {"name": "Last puppies", "stock": 25}, auth)
    assert status == 201, pet
    barrier = threading.Barrier(20)

    def place(i: int) -> tuple[int, dict[str, object]]:
        if i < 20:
            barrier.wait()
        return _post(hosts.of(i), "/v2/store/orders", {"petId": pet["id"], "quantity": 1},
                     auth)

    with ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(place, range(60)))
    statuses = Counter(status for status, _ in answers)
    assert statuses == {201: 25, 422: 35}, statuses
    refused = [body for status, body in answers if status == 422]
    assert {(body["code"], body["param"]) for body in refused} == {("out_of_stock", "quantity")}
    for host in (hosts.a, hosts.b):
        status, _, body = host.request("GET", f"/v2/pets/{pet['id']}", auth)
        seen = json.loads(body)
        assert (status, seen["reserved"], seen["available"], seen["status"]) == (
            200, 25, 0, "pending")
    assert hosts.b.petstore("pets", "check").returncode == 0
