"""PostgreSQL unreachable, restarting or failing over under a real `petstore serve`: every
answer is 503 service_unavailable with Retry-After (never a 500, never a hang), /readyz
says so, and the service recovers by itself. The service reaches its database through a
TCP proxy of the test's own, so the shared server is never stopped; a failover is its
connections dropped (pg_terminate_backend on the test's own database), and a standby is
the test's database made read-only."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.faults import assert_unavailable
from tests.relay import Relay
from tests.support import Server, serving

pytestmark = pytest.mark.slow

LIST = "/v1/store/orders"
ANSWER_WITHIN = 5.0  # the pool waits 2 s for a connection; a request never hangs past this


@pytest.fixture
def proxied(postgres_database: str, tmp_path: Path) -> Iterator[tuple[Server, Relay, str]]:
    """A server (two workers) whose database URL goes through a proxy; the proxy; and the
    database's direct URL for the test's own statements."""
    parts = urlsplit(postgres_database)
    proxy = Relay(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0] + "@" if len(netloc) == 2 else ""
    via_proxy = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
    try:
        with serving(tmp_path, "--workers", "2", database=via_proxy,
                     ratelimit_enabled="false") as server:
            yield server, proxy, postgres_database
    finally:
        proxy.stop()


def _auth(server: Server) -> dict[str, str]:
    key = server.petstore("keys", "create", "--plan", "free", "--name", "outage").stdout.strip()
    return {"Authorization": f"Bearer {key}"}


def _import(server: Server, count: int) -> None:
    path = server.log.with_name("orders.ndjson")
    path.write_text("\n".join(json.dumps({"id": i}) for i in range(1, count + 1)))
    server.petstore("orders", "import", "--format", "ndjson", str(path))


def _timed(server: Server, method: str, path: str,
           auth: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    started = time.monotonic()
    answer = server.request(method, path, auth)
    assert time.monotonic() - started < ANSWER_WITHIN, f"{method} {path} hung"
    return answer


def _wait_for(server: Server, auth: dict[str, str], deadline: float) -> tuple[float, float]:
    """Seconds until a list first answers 200 again, and until 20 lists in a row do (each
    on a connection of its own, so both workers have recovered)."""
    started = time.monotonic()
    first, in_a_row = 0.0, 0
    while time.monotonic() - started < deadline:
        status = _timed(server, "GET", LIST, auth)[0]
        assert status in (200, 503)
        if status == 200:
            first = first or time.monotonic() - started
            in_a_row += 1
            if in_a_row == 20:
                return first, time.monotonic() - started
        else:
            in_a_row = 0
            time.sleep(0.1)
    raise AssertionError(f"no recovery within {deadline} s")


def _ready_within(server: Server, expected: int, seconds: float = 3.0) -> bytes:
    """/readyz's body once it answers expected, which it must within seconds: its checks
    run every second off the request's path (D41)."""
    deadline = time.monotonic() + seconds
    while True:
        status, _, body = _timed(server, "GET", "/readyz", {})
        if status == expected:
            return body
        assert time.monotonic() < deadline, f"/readyz still {status}: {body!r}"
        time.sleep(0.1)


def _terminate_connections(database: str) -> int:
    """Drop every connection to the database, as a restart or failover of its server does."""
    with psycopg.connect(database, autocommit=True) as conn:
        row = conn.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                           "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                           ).fetchone()
    assert row is not None
    return int(row[0])


def test_an_unreachable_database_is_503_with_retry_after_and_recovers_by_itself(
    proxied: tuple[Server, Relay, str],
) -> None:
    server, proxy, _ = proxied
    auth = _auth(server)
    _import(server, 5000)  # refusals are quick: each second of the outage takes hundreds
    assert _timed(server, "GET", LIST, auth)[0] == 200
    assert _timed(server, "DELETE", f"{LIST}/1", auth)[0] == 204

    proxy.cut()
    refused: list[int] = []
    outage_started = time.monotonic()
    order_id = 2
    while time.monotonic() - outage_started < 4:
        assert_unavailable(_timed(server, "GET", LIST, auth), counted=False)
        assert_unavailable(_timed(server, "DELETE", f"{LIST}/{order_id}", auth), counted=False)
        refused.append(order_id)
        order_id += 1
    body = _ready_within(server, 503)
    assert json.loads(body)["message"].startswith("Not ready: database:")

    proxy.restore()
    back = time.monotonic()
    first, steady = _wait_for(server, auth, deadline=20)
    print(f"\nunreachable for {back - outage_started:.1f} s: {len(refused)} lists and "
          f"{len(refused)} cancels, all 503; after it came back, the first list 200 in "
          f"{first:.2f} s, 20 in a row by {steady:.2f} s")
    assert _timed(server, "DELETE", f"{LIST}/{order_id}", auth)[0] == 204
    _ready_within(server, 200)
    statuses = server.statuses(auth)
    assert all(statuses[i] == "pending" for i in refused), "a refused cancel changed nothing"
    assert statuses[1] == statuses[order_id] == "cancelled"


def test_a_failover_drops_connections_without_a_single_refusal(
    proxied: tuple[Server, Relay, str],
) -> None:
    """Every connection of the service dropped at once (the server restarted, or a
    standby took over at the same address): the next requests run on fresh connections,
    and each is answered as if nothing happened."""
    server, _, database = proxied
    auth = _auth(server)
    _import(server, 60)
    for round_ in range(3):
        for _ in range(10):  # warm both workers' pools
            assert _timed(server, "GET", LIST, auth)[0] == 200
        dropped = _terminate_connections(database)
        assert dropped >= 2, "both workers had connections to drop"
        answers: Counter[int] = Counter()
        for i in range(1, 21):
            order_id = round_ * 20 + i
            answers[_timed(server, "DELETE", f"{LIST}/{order_id}", auth)[0]] += 1
            answers[_timed(server, "GET", LIST, auth)[0]] += 1
        print(f"\nfailover {round_ + 1}: {dropped} connections dropped, then {dict(answers)}")
        assert answers == {204: 20, 200: 20}
    assert set(server.statuses(auth).values()) == {"cancelled"}


def test_a_read_only_database_refuses_cancels_with_503_and_readyz_says_so(
    proxied: tuple[Server, Relay, str],
) -> None:
    """After a failover to a standby that is still read-only: lists are served, cancels
    are 503 with Retry-After, /readyz names it; once the database takes writes again,
    cancels succeed."""
    server, _, database = proxied
    auth = _auth(server)
    _import(server, 5)
    name = urlsplit(database).path.lstrip("/")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{name}" SET default_transaction_read_only = on')
    _terminate_connections(database)
    assert _timed(server, "GET", LIST, auth)[0] == 200
    assert_unavailable(_timed(server, "DELETE", f"{LIST}/1", auth), counted=False)
    assert "read-only" in json.loads(_ready_within(server, 503))["message"]

    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = off")
        conn.execute(f'ALTER DATABASE "{name}" RESET default_transaction_read_only')
    _terminate_connections(database)
    assert _timed(server, "DELETE", f"{LIST}/1", auth)[0] == 204
    _ready_within(server, 200)
    assert server.statuses(auth)[1] == "cancelled"
