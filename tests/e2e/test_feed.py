"""The feed of changed orders against real `petstore serve` processes (D26): a
mirror kept by following the feed with `wait` equals the store after two writers make
about 500 changes by every path (two workers over SQLite, two hosts over PostgreSQL);
waiting requests hold no handler thread, wake on a change made by the CLI, and are
answered at once at SIGTERM."""

from __future__ import annotations

import http.client
import itertools
import json
import random
import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from app.core.config import Settings
from app.core.storage import Store, open_store
from tests.support import Server, postgres_databases, serving, wait_until
from tests.web.test_metrics import sample

pytestmark = pytest.mark.slow

FEED = "/v2/store/order-changes"
SEEDED = 40


def call(server: Server, method: str, path: str, auth: dict[str, str],
         body: dict[str, Any] | None = None, timeout: float = 40,
         **headers: str) -> tuple[int, dict[str, Any] | None]:
    """One request on a connection of its own; the status and the JSON body, if any."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        sent = {**auth, **headers}
        if body is not None:
            sent["Content-Type"] = "application/json"
        conn.request(method, path, body=json.dumps(body) if body is not None else None,
                     headers=sent)
        response = conn.getresponse()
        data = response.read()
        return response.status, json.loads(data) if data else None
    finally:
        conn.close()


def changes(server: Server, auth: dict[str, str], after: str | None, wait: int = 0,
            limit: int = 100) -> dict[str, Any]:
    query = {"limit": limit, "wait": wait, **({"after": after} if after else {})}
    status, body = call(server, "GET", f"{FEED}?{urlencode(query)}", auth)
    assert status == 200 and body is not None, (status, body)
    return body


@contextmanager
def shop(kind: str, folder: Path, postgres_url: str | None) -> Iterator[tuple[list[Server],
                                                                             Store, Any]]:
    """Two servers' worth of workers over one database, seeded with orders: the servers,
    a store of the test's own over the same database, and a function that runs SQL on it by
    hand."""
    with two_servers(kind, folder, postgres_url) as (servers, store, by_hand):
        store.import_orders({"id": i, "petId": i, "quantity": 1} for i in range(1, SEEDED + 1))
        yield servers, store, by_hand


@contextmanager
def two_servers(kind: str, folder: Path, postgres_url: str | None,
                **settings: str) -> Iterator[tuple[list[Server], Store, Any]]:
    """Two servers' worth of workers over one database (two workers of one server over
    SQLite, two servers over PostgreSQL, as two hosts), with these PETSTORE_* settings: the
    servers, a store of the test's own over the same database, and a function that runs SQL
    on it by hand."""
    # Quotas are not what this tests (and two workers would need a shared Redis for them).
    unmetered = {"ratelimit_enabled": "false", **settings}
    with ExitStack() as stack:
        if kind == "sqlite":
            server = stack.enter_context(serving(folder, "--workers", "2", **unmetered))
            servers, database = [server], server.env["PETSTORE_DATABASE"]
        else:
            assert postgres_url is not None
            database = stack.enter_context(postgres_databases(postgres_url))()
            servers = []
            for name in ("a", "b"):
                (folder / name).mkdir()
                servers.append(stack.enter_context(serving(folder / name, database=database,
                                                           **unmetered)))
        store = open_store(Settings(database=database, busy_timeout_ms=1000))
        stack.callback(store.dispose)
        yield servers, store, _by_hand(kind, database)


def _by_hand(kind: str, database: str) -> Any:
    def run(sql: str) -> None:
        if kind == "sqlite":
            import sqlite3

            with sqlite3.connect(database, timeout=5) as conn:
                conn.execute(sql)
        else:
            import psycopg

            with psycopg.connect(database) as conn:
                conn.execute(sql)  # type: ignore[arg-type]
    return run


def key(server: Server) -> dict[str, str]:
    secret = server.petstore("keys", "create", "--plan", "enterprise", "--per-minute",
                             "1000000", "--per-day", "10000000").stdout.strip()
    return {"Authorization": f"Bearer {secret}"}


class Writer(threading.Thread):
    """Changes orders by every path, at random: places, cancels, ships and completes over
    HTTP (through its own server), imports (upserts) and hand edits in SQL."""

    def __init__(self, name: str, server: Server, auth: dict[str, str], store: Store,
                 by_hand: Any, steps: int) -> None:
        super().__init__(daemon=True)
        self.name, self.server, self.auth = name, server, auth
        self.store, self.by_hand, self.steps = store, by_hand, steps
        self.random = random.Random(name)
        self.made: list[str] = []
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            for step in range(self.steps):
                self.made.append(self.change(step))
        except BaseException as exc:
            self.failure = exc

    def change(self, step: int) -> str:
        order_id = self.random.randint(1, SEEDED)
        what = self.random.choice(["place", "cancel", "ship", "complete", "import", "hand",
                                   "ship", "complete"])
        path = f"/v2/store/orders/{order_id}"
        if what == "place":
            status, _ = call(self.server, "POST", "/v2/store/orders", self.auth,
                             {"petId": order_id, "quantity": 1 + step % 9},
                             **{"Idempotency-Key": f"{self.name}-{step}"})
            assert status == 201
        elif what == "cancel":
            assert call(self.server, "DELETE", path, self.auth)[0] in (204, 409)
        elif what in ("ship", "complete"):
            assert call(self.server, "POST", f"{path}/{what}", self.auth)[0] in (200, 409)
        elif what == "import":
            self.store.import_orders([{"id": order_id, "petId": order_id,
                                       "quantity": 100 + step, "status": "pending"}],
                                     upsert=True)
        else:
            self.by_hand(f"UPDATE orders SET quantity = {1000 + step} WHERE id = {order_id}")
        return what


class Reader(threading.Thread):
    """Keeps a mirror by following a feed (the orders', or another: its path and the member
    its pages hold) with `wait`, over the servers in turn, in small pages, until told to
    stop and caught up."""

    def __init__(self, servers: list[Server], auth: dict[str, str], path: str = FEED,
                 member: str = "orders", limit: int = 25) -> None:
        super().__init__(daemon=True)
        self.servers, self.auth = itertools.cycle(servers), auth
        self.path, self.member, self.limit = path, member, limit
        self.mirror: dict[int, dict[str, Any]] = {}
        self.pages = 0
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            cursor = None
            while True:
                stopping = self.stop.is_set()
                query = {"limit": self.limit, "wait": 0 if stopping else 2,
                         **({"after": cursor} if cursor else {})}
                status, page = call(next(self.servers), "GET",
                                    f"{self.path}?{urlencode(query)}", self.auth)
                assert status == 200 and page is not None, (status, page)
                self.pages += 1
                for item in page[self.member]:
                    self.mirror[item["id"]] = item
                cursor = page["next"]
                if stopping and len(page[self.member]) < self.limit:
                    return
        except BaseException as exc:
            self.failure = exc


def follow_writers(follower: Any, writers: list[Writer]) -> list[str]:
    """Start the follower (a thread with a stop Event and a failure), run the writers to
    their end, then stop the follower once it has caught up; what the writers did."""
    follower.start()
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(240)
        assert writer.failure is None, writer.failure
    follower.stop.set()
    follower.join(60)
    assert not follower.is_alive() and follower.failure is None, follower.failure
    return [what for writer in writers for what in writer.made]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_mirror_kept_by_the_feed_equals_the_store_after_500_changes_by_every_path(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    postgres_url = request.getfixturevalue("postgres_url") if kind == "postgresql" else None
    with shop(kind, tmp_path, postgres_url) as (servers, store, by_hand):
        auth = key(servers[0])
        reader = Reader(servers, auth)
        made = follow_writers(reader, [Writer(f"w{i}", servers[i % len(servers)], auth, store,
                                              by_hand, 250) for i in range(2)])
        assert len(made) == 500 and {"place", "import", "hand"} <= set(made)
        expected = {order["id"]: order for order in store.list_orders()}
        assert reader.mirror == expected
        assert reader.pages > 10  # it followed the changes as they came, page by page


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, dict[str, str], str]]:
    """One worker over SQLite with demo orders, a key, and the feed's cursor of now."""
    with serving(tmp_path) as server:
        server.petstore("init", "--demo")
        auth = key(server)
        yield server, auth, changes(server, auth, None, limit=1000)["next"]


def waiting(server: Server) -> float:
    """The feed requests the server holds waiting now, as its /metrics shows them."""
    return sample(server.request("GET", "/metrics")[2].decode(), "petstore_feed_waiting")


def until_waiting(server: Server, count: int) -> None:
    wait_until(lambda: waiting(server) == count, 20, f"{count} requests were not waiting")


def _wait_in_threads(server: Server, auth: dict[str, str], cursor: str,
                     count: int) -> tuple[list[threading.Thread], list[Any]]:
    answers: list[Any] = []

    def wait() -> None:
        answers.append((changes(server, auth, cursor, wait=30), time.monotonic()))

    threads = [threading.Thread(target=wait, daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads, answers


def test_fifty_waiting_requests_hold_no_handler_thread_and_wake_on_a_cli_change(
        served: tuple[Server, dict[str, str], str]) -> None:
    server, auth, cursor = served
    threads, answers = _wait_in_threads(server, auth, cursor, 50)
    until_waiting(server, 50)
    assert answers == []  # all 50 wait; ten handler threads would be taken five times over
    # A write is answered while they wait: held by handler threads, it would wait for the
    # 30 s they asked for.
    started = time.monotonic()
    status, _ = call(server, "DELETE", "/v1/store/orders/1", auth)
    assert status == 204 and time.monotonic() - started < 15
    for thread in threads:
        thread.join(10)
    assert len(answers) == 50
    assert all([o["id"] for o in page["orders"]] == [1] for page, _ in answers)

    # A change made by another process (the CLI) wakes the next waiting requests.
    threads, answers = _wait_in_threads(server, auth, answers[0][0]["next"], 10)
    until_waiting(server, 10)
    server.petstore("orders", "ship", "2")
    shipped = time.monotonic()
    for thread in threads:
        thread.join(10)
    assert len(answers) == 10
    assert all([(o["id"], o["status"]) for o in page["orders"]] == [(2, "shipped")]
               for page, _ in answers)
    # D26 promises half a second after the commit; the bound leaves room for a loaded
    # machine (`make bench` prints the real figure).
    assert max(at for _, at in answers) - shipped < 3


def test_sigterm_answers_every_waiting_request_at_once(
        served: tuple[Server, dict[str, str], str]) -> None:
    server, auth, cursor = served
    threads, answers = _wait_in_threads(server, auth, cursor, 10)
    until_waiting(server, 10)
    assert server.process is not None
    stopped = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    for thread in threads:
        thread.join(10)
    assert len(answers) == 10
    assert all(page == {"orders": [], "next": cursor} for page, _ in answers)
    assert max(at for _, at in answers) - stopped < 5
    assert server.process.wait(15) == 0


def test_a_client_that_leaves_while_waiting_frees_its_place_under_the_cap(
        tmp_path: Path) -> None:
    with serving(tmp_path, feed_max_waiting="1") as server:
        server.petstore("init", "--demo")
        auth = key(server)
        cursor = changes(server, auth, None, limit=1000)["next"]
        leaving = socket.create_connection(("127.0.0.1", server.port))
        leaving.sendall(f"GET {FEED}?after={cursor}&wait=30 HTTP/1.1\r\nHost: x\r\n"
                        f"Authorization: {auth['Authorization']}\r\n\r\n".encode())
        until_waiting(server, 1)
        # The one place is taken: another request is answered at once, well before the
        # 30 s it asked for.
        started = time.monotonic()
        assert changes(server, auth, cursor, wait=30)["orders"] == []
        assert time.monotonic() - started < 15
        leaving.close()
        until_waiting(server, 0)
        # Its place is free again: this one waits, until a change.
        threads, answers = _wait_in_threads(server, auth, cursor, 1)
        until_waiting(server, 1)
        assert answers == []
        server.petstore("orders", "ship", "1")
        threads[0].join(10)
        assert [o["id"] for o in answers[0][0]["orders"]] == [1]
