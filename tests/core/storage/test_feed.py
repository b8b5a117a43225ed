"""The feed of changed orders over each store (D26): every path of change gives the
order a position, in commit order; a page is one range of an index; a cursor from another
database or from after a restored backup is refused."""

from __future__ import annotations

import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.core import feed, orders
from app.core.config import Settings
from app.core.errors import InvalidParameter, ResyncRequired
from app.core.services import open_services
from app.core.storage import Store, open_store
from tests.core.storage.conftest import Place
from tests.support import wait_until

NOW = "2026-11-24T10:00:00Z"


def _follow(store: Store, cursor: str | None) -> tuple[list[dict[str, Any]], str]:
    """Every order the feed gives after the cursor, page by page, and the last cursor."""
    seen: list[dict[str, Any]] = []
    while True:
        page = feed.changes(store, cursor, limit=2)
        seen += [orjson.loads(text) for text in page.items]
        cursor = page.next
        if len(page.items) < 2:
            return seen, cursor


def _seed(store: Store, count: int = 5) -> None:
    store.import_orders({"id": i, "petId": i, "quantity": 1, "status": "pending"}
                        for i in range(1, count + 1))


def test_the_feed_starts_with_every_order_and_then_gives_each_change_once(store: Store) -> None:
    _seed(store)
    everything, cursor = _follow(store, None)
    assert [o["id"] for o in everything] == [1, 2, 3, 4, 5]
    # Nothing changed: an empty page, and the same cursor.
    assert feed.changes(store, cursor) == feed.Feed([], cursor, store.revision())

    orders.ship(store, 4, NOW)
    orders.cancel(store, 2, None)
    orders.ship(store, 4, NOW)  # shipped already: no change, so no position
    seen, cursor = _follow(store, cursor)
    assert [(o["id"], o["status"]) for o in seen] == [(4, "shipped"), (2, "cancelled")]

    orders.complete(store, 4)
    seen, _ = _follow(store, cursor)
    assert [(o["id"], o["complete"]) for o in seen] == [(4, True)]


def test_every_path_of_change_gives_the_order_a_new_position(store: Store,
                                                             place: Place) -> None:
    _seed(store)
    _, cursor = _follow(store, None)
    placed = store.place_order({"petId": 9, "quantity": 2}, 1, "k-1", "f", NOW).order
    orders.cancel(store, 1, None)
    orders.ship(store, 2, NOW)
    orders.complete(store, 2)
    store.import_orders([{"id": 3, "petId": 30, "quantity": 3, "status": "shipped"}],
                        upsert=True)
    store.import_orders([{"id": 50, "petId": 5, "quantity": 1}])
    place.sql("UPDATE orders SET quantity = 77 WHERE id = 5")  # a hand edit
    seen, _ = _follow(store, cursor)
    assert [o["id"] for o in seen] == [placed["id"], 1, 2, 3, 50, 5]
    assert {o["id"]: o for o in seen} == {o["id"]: o for o in store.list_orders()
                                          if o["id"] != 4}
    # A hand edit still raises the version, as before the feed (D25).
    assert store.get_versioned_order(5) == (store.get_order(5), 2)


def test_a_transaction_of_many_orders_comes_whole_however_the_pages_cut_it(
        store: Store) -> None:
    _seed(store, 7)
    seen, cursor = _follow(store, None)  # pages of 2 cut the import of 7
    assert [o["id"] for o in seen] == [1, 2, 3, 4, 5, 6, 7]
    store.import_orders(({"id": i, "petId": i, "quantity": 2} for i in (6, 2, 4)),
                        upsert=True)
    seen, _ = _follow(store, cursor)
    assert sorted(o["id"] for o in seen) == [2, 4, 6]


def test_an_edited_cursor_or_limit_is_refused(store: Store) -> None:
    _seed(store)
    cursor = feed.changes(store).next
    for bad in (cursor[:-2], cursor + "A", "abc", "", "WyJjaGFuZ2VzIl0"):
        with pytest.raises(InvalidParameter) as refused:
            feed.changes(store, bad or "=")
        assert refused.value.name == "after"
    for limit in (0, feed.LIMIT_MAX + 1):
        with pytest.raises(InvalidParameter) as refused:
            feed.changes(store, limit=limit)
        assert refused.value.name == "limit"


def test_a_cursor_from_another_database_needs_a_resync(store: Store, tmp_path: Path) -> None:
    _seed(store)
    cursor = feed.changes(store).next
    other = open_store(Settings(database=str(tmp_path / "other.db")))
    _seed(other, 9)
    with pytest.raises(ResyncRequired):
        feed.changes(other, cursor)
    other.dispose()


def test_a_cursor_from_after_a_restored_backup_needs_a_resync(store: Store, place: Place,
                                                              tmp_path: Path) -> None:
    _seed(store)
    before = feed.changes(store).next
    backup = str(tmp_path / "backup")
    store.backup(backup)
    orders.ship(store, 1, NOW)
    store.place_order({"petId": 9, "quantity": 2}, 1, "k-1", "f", NOW)
    after = _follow(store, before)[1]

    restored = _restore(place, backup, tmp_path)
    services = open_services(Settings(database=restored))  # the service starts on it
    try:
        # A change made on the restored database takes the positions the lost ones had.
        orders.cancel(services.store, 2, None)
        orders.cancel(services.store, 3, None)
        with pytest.raises(ResyncRequired):
            feed.changes(services.store, after)
        # A cursor from before the backup's point goes on, and sees what changed since.
        seen, _ = _follow(services.store, before)
        assert [(o["id"], o["status"]) for o in seen] == [(2, "cancelled"), (3, "cancelled")]
    finally:
        services.store.dispose()
        if place.kind == "postgresql":
            _drop(restored)


def _drop(url: str) -> None:
    import psycopg

    base, name = url.rsplit("/", 1)
    with psycopg.connect(base + "/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")  # type: ignore[arg-type]


def _restore(place: Place, backup: str, tmp_path: Path) -> str:
    """The backup restored as a database of its own, as an operator would."""
    if place.kind == "sqlite":
        restored = str(tmp_path / "restored.db")
        shutil.copyfile(backup, restored)
        return restored
    import psycopg

    name = f"{place.database.rsplit('/', 1)[1]}_restored"
    admin = place.database.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")  # type: ignore[arg-type]
    restored = place.database.rsplit("/", 1)[0] + f"/{name}"
    subprocess.run(["pg_restore", "--no-owner", f"--dbname={restored}", backup], check=True)
    return restored


def assert_one_range(place: Place, table: str, index: str) -> None:
    """A page of the table's feed is one range of the index, read in its order: no sort."""
    page = (f"SELECT id FROM {table} WHERE (position, id) > (3, 3) "
            "ORDER BY position, id LIMIT 100")
    if place.kind == "sqlite":
        plan = " ".join(str(row) for row in place.sql(f"EXPLAIN QUERY PLAN {page}"))
        assert index in plan and "TEMP B-TREE" not in plan
    else:
        import psycopg

        with psycopg.connect(place.database) as conn:  # the plan of a large table
            conn.execute("SET enable_seqscan = off; SET enable_bitmapscan = off")
            plan = " ".join(str(row) for row in conn.execute(
                f"EXPLAIN {page}"))
        assert index in plan and "Sort" not in plan


def test_a_page_is_one_range_of_the_position_index(store: Store, place: Place) -> None:
    _seed(store)
    assert_one_range(place, "orders", "idx_orders_position_id")


def test_positions_follow_commit_order_when_transactions_overlap(
        place: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    """The case a sequence gets wrong: transaction A takes its position first and would
    commit last, while B changes another order and a reader polls in between. B waits for
    A (the revision's lock), so A's change is never behind the reader's cursor."""
    store = place.open()
    _seed(store)
    _, cursor = _follow(store, None)
    b_done = threading.Event()
    patient = open_store(Settings(database=place.database, busy_timeout_ms=1000))
    with _open_transaction(place) as a:
        a("UPDATE orders SET quantity = 10 WHERE id = 1")  # A takes its position
        writer = threading.Thread(target=lambda: (orders.ship(patient, 2, NOW),
                                                  b_done.set()))
        with place.writers_waiting(monkeypatch) as waiting:
            writer.start()
            wait_until(waiting, message="B never began to wait for A's lock")
        polled, cursor = _follow(store, cursor)  # the reader, in between
        assert polled == []
        assert not b_done.is_set(), "B committed before A, which took its position first"
    writer.join(5)
    patient.dispose()
    assert b_done.is_set()
    seen, _ = _follow(store, cursor)
    assert [(o["id"], o.get("quantity"), o["status"]) for o in seen] == [
        (1, 10, "pending"), (2, 1, "shipped")]
    store.dispose()


class _open_transaction:
    """A transaction on a connection of the test's own, committed when the block ends;
    calling it runs a statement in it."""

    def __init__(self, place: Place) -> None:
        self.place = place

    def __enter__(self) -> Any:
        if self.place.kind == "sqlite":
            import sqlite3

            self.conn: Any = sqlite3.connect(self.place.database, isolation_level=None)
            self.conn.execute("BEGIN IMMEDIATE")
        else:
            import psycopg

            self.conn = psycopg.connect(self.place.database)
        return self.conn.execute

    def __exit__(self, *exc: object) -> None:
        if self.place.kind == "sqlite":
            self.conn.execute("COMMIT")
        else:
            self.conn.commit()
        self.conn.close()


def test_orders_held_before_the_feed_come_first_and_move_on_when_changed(
        place: Place) -> None:
    """A database of schema 7 (before the feed) brought to 8: its orders are all at
    position 0, the feed gives them from the beginning, and a change moves one on."""
    place.at_schema(7, "INSERT INTO orders (id, pet_id, quantity) VALUES (1, 1, 1), (2, 2, 1), "
                    "(3, 3, 1)")
    store = place.open()  # migrates to the current schema
    try:
        seen, cursor = _follow(store, None)
        assert [o["id"] for o in seen] == [1, 2, 3]
        orders.ship(store, 2, NOW)
        seen, _ = _follow(store, cursor)
        assert [(o["id"], o["status"]) for o in seen] == [(2, "shipped")]
        assert store.get_versioned_order(2) == (store.get_order(2), 2)
    finally:
        store.dispose()


def test_transactions_changing_orders_in_opposite_order_never_deadlock(
        place: Place, monkeypatch: pytest.MonkeyPatch) -> None:
    """A takes its position with order 1, then changes order 2; B changes order 2 in
    between, as a cancel can while an import runs. B must wait for A's position before it
    locks order 2 (on PostgreSQL a row lock held while waiting for the revision would be
    a deadlock: B holding 2 and waiting for A, A waiting for 2)."""
    store = place.open()
    _seed(store, 2)
    _, cursor = _follow(store, None)
    patient = open_store(Settings(database=place.database, busy_timeout_ms=1000))
    failures: list[BaseException] = []

    def change_two() -> None:
        try:
            orders.ship(patient, 2, NOW)
        except BaseException as exc:
            failures.append(exc)

    with _open_transaction(place) as a:
        a("UPDATE orders SET quantity = 10 WHERE id = 1")
        writer = threading.Thread(target=change_two)
        with place.writers_waiting(monkeypatch) as waiting:
            writer.start()
            wait_until(waiting, message="B never began to wait for A's position")
        a("UPDATE orders SET quantity = 20 WHERE id = 2")
    writer.join(10)
    patient.dispose()
    assert failures == []
    seen, _ = _follow(store, cursor)
    assert [(o["id"], o.get("quantity"), o["status"]) for o in seen] == [
        (1, 10, "pending"), (2, 20, "shipped")]
    store.dispose()
