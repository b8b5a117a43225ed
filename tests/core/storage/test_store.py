"""One storage suite, run over every store through a parametrised fixture: a SQLite file
and a PostgreSQL database of the test's own (PETSTORE_TEST_POSTGRES_URL; skipped with the
reason where it is unset, required in CI).

The few facts that only one kind of database has (WAL and a checkpoint for SQLite, a
session's settings for PostgreSQL) are asked through Place, the test's handle on the
database under the store.
"""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.core import keys
from app.core.errors import DuplicateOrder, DuplicatePet, StoreUnavailable
from app.core.storage import Store, postgres, sqlite
from tests.core.storage.conftest import BUSY_TIMEOUT_MS, Place
from tests.support import postgres_databases

NOW = "2026-01-01T00:00:00Z"


def _key(store: Store, name: str = "k") -> int:
    new = keys.generate_key()
    key = store.create_key(
        digest=new.digest, prefix=new.prefix, name=name, plan="free",
        per_minute=None, per_day=None, now=NOW,
    )
    return key.id


def test_every_connection_commits_durably_and_bounds_its_wait_for_locks(
    store: Store, place: Place
) -> None:
    """D15 on every connection, in every thread: SQLite in WAL mode with synchronous=FULL;
    PostgreSQL with synchronous_commit on. Both wait at most the busy timeout for a lock."""
    facts: list[dict[str, str]] = []

    def read() -> None:
        facts.append(store.check())
        store.close()

    threads = [threading.Thread(target=read) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    facts.append(store.check())
    assert len(facts) == 4
    for fact in facts:
        if place.kind == "sqlite":
            assert fact["journal_mode"] == "wal"
            assert fact["synchronous"] == "2"  # FULL
            assert int(fact["busy_timeout"]) == BUSY_TIMEOUT_MS
            assert fact["temp_store"] == "2"  # MEMORY: the savepoints' sub-journals
        else:
            assert fact["synchronous_commit"] == "on"
            assert fact["lock_timeout"] == f"{BUSY_TIMEOUT_MS}ms"


def test_both_stores_have_the_same_schema_and_migrations(store: Store, place: Place) -> None:
    assert len(sqlite.MIGRATIONS) == len(postgres.MIGRATIONS) == sqlite.SCHEMA_VERSION
    assert place.columns() == {
        "api_keys": ["id", "prefix", "digest", "name", "plan", "per_minute", "per_day",
                     "created_at", "revoked_at", "banned_until", "expires_at", "scope",
                     "last_used_at", "previous_digest", "previous_until"],
        "console_audit": ["id", "at", "user_name", "address", "action", "detail"],
        "console_forms": ["form_key", "made_id", "created_at"],
        "console_recovery_codes": ["user_id", "digest", "created_at", "used_at"],
        "console_sessions": ["digest", "user_id", "token", "stage", "created_at", "seen_at",
                             "pending_totp_secret"],
        "console_users": ["id", "name", "password_hash", "must_change_password",
                          "totp_secret", "totp_last_step", "disabled_at", "created_at",
                          "last_sign_in_at", "throttle_epoch", "role"],
        "feed_eras": ["first_position", "era"],
        "idempotency_keys": ["api_key_id", "idempotency_key", "fingerprint", "order_id",
                             "order_json", "order_version", "created_at"],
        "order_days": ["day", "placed", "orders_shipped", "units_shipped"],
        "orders": ["id", "pet_id", "quantity", "ship_date", "complete", "status",
                   "cancelled_at", "cancelled_by", "version", "position", "last_change",
                   "cancelled_by_user"],
        "pets": ["id", "name", "category", "tags", "photo_urls", "stock", "reserved",
                 "withdrawn", "version", "position", "last_change"],
        "revision": ["id", "value", "pending_units", "shipped_units", "cancelled_units",
                     "stock_on_hand", "stock_reserved", "stock_available",
                     "pending_orders"],
        "shop_settings": ["id", "low_stock_at"],
        "webhook_attempts": ["id", "endpoint_id", "webhook_id", "type", "attempt", "status",
                             "duration_ms", "response", "error", "attempted_at"],
        "webhook_endpoints": ["id", "api_key_id", "url", "types", "description", "enabled",
                              "disabled_reason", "secret", "previous_secret",
                              "previous_until", "position", "order_id", "lease_owner",
                              "lease_until", "attempt", "next_attempt_at", "created_at",
                              "place_of"],
        "webhook_pets_seen": ["endpoint_id", "pet_id", "was_orderable", "was_withdrawn"],
    }


def test_migrate_is_idempotent_and_reports_the_version(store: Store) -> None:
    store.import_orders([{"id": 1, "status": "pending"}])
    assert store.migrate() == sqlite.SCHEMA_VERSION
    assert store.migrate() == sqlite.SCHEMA_VERSION
    assert store.count_orders() == 1


def test_orders_come_back_by_id_in_api_names_without_nulls(store: Store) -> None:
    store.import_orders([
        {"id": 2, "petId": 5, "quantity": 3, "shipDate": NOW, "complete": True,
         "status": "shipped"},
        {"id": 1, "status": "pending"},
    ])
    assert store.list_orders() == [
        {"id": 1, "complete": False, "status": "pending"},
        {"id": 2, "petId": 5, "quantity": 3, "shipDate": NOW, "complete": True,
         "status": "shipped"},
    ]
    assert [o["id"] for o in store.list_orders("shipped")] == [2]


def test_import_assigns_ids_when_rows_have_none(store: Store) -> None:
    """The largest id so far plus one, as SQLite numbers a row."""
    assert store.import_orders([{"status": "pending"}, {"status": "pending"}]) == 2
    assert [o["id"] for o in store.list_orders()] == [1, 2]
    assert store.import_orders([{}, {"id": 10}, {}, {"id": 4}, {}]) == 5
    assert [o["id"] for o in store.list_orders()] == [1, 2, 3, 4, 10, 11, 12]


def test_import_is_all_or_nothing_on_a_duplicate_id(store: Store) -> None:
    store.import_orders([{"id": 5, "status": "pending"}])
    with pytest.raises(DuplicateOrder) as info:
        store.import_orders([{"id": 6, "status": "pending"}, {"id": 5, "status": "shipped"}])
    assert info.value.order_id == 5
    with pytest.raises(DuplicateOrder) as info:
        store.import_orders([{"id": 8}, {"id": 7}, {"id": 8}, {"id": 5}])
    assert info.value.order_id == 8, "the first id the import repeats, in its order"
    assert [o["id"] for o in store.list_orders()] == [5]
    assert store.list_orders()[0]["status"] == "pending"


def test_import_with_upsert_replaces_existing_orders(store: Store) -> None:
    store.import_orders([{"id": 5, "status": "pending"}])
    store.import_orders([{"id": 5, "status": "shipped", "shipDate": NOW}], upsert=True)
    assert store.list_orders() == [
        {"id": 5, "shipDate": NOW, "complete": False, "status": "shipped"}
    ]
    store.import_orders([{"id": 6, "quantity": 1}, {"id": 6, "quantity": 2}, {}], upsert=True)
    assert store.list_orders()[1:] == [
        {"id": 6, "quantity": 2, "complete": False, "status": "pending"},  # the last wins
        {"id": 7, "complete": False, "status": "pending"},
    ]


def test_cancel_moves_only_a_pending_order(store: Store) -> None:
    key_id = _key(store)
    store.import_orders([
        {"id": 1, "status": "pending"}, {"id": 2, "status": "shipped"},
        {"id": 3, "status": "cancelled"},
    ])
    first = store.cancel_order(1, key_id, NOW)
    assert (first.status, first.changed) == ("cancelled", True)
    again = store.cancel_order(1, key_id, NOW)
    assert (again.status, again.changed) == ("cancelled", False)
    shipped = store.cancel_order(2, key_id, NOW)
    assert (shipped.status, shipped.changed) == ("shipped", False)
    missing = store.cancel_order(99, key_id, NOW)
    assert (missing.status, missing.changed) == (None, False)
    assert [o["status"] for o in store.list_orders()] == ["cancelled", "shipped", "cancelled"]


def test_concurrent_cancels_of_one_order_record_one_cancellation(store: Store) -> None:
    store.import_orders([{"id": 1, "status": "pending"}])
    key_ids = [_key(store, f"k{i}") for i in range(8)]
    barrier = threading.Barrier(len(key_ids))

    def cancel(key_id: int) -> bool:
        barrier.wait()
        try:
            return store.cancel_order(1, key_id, NOW).changed
        finally:
            store.close()

    with ThreadPoolExecutor(len(key_ids)) as pool:
        changed = list(pool.map(cancel, key_ids))
    assert changed.count(True) == 1
    assert store.list_orders()[0]["status"] == "cancelled"


def test_a_steady_load_of_writes_from_ten_threads_never_waits_out_the_busy_timeout(
    store: Store,
) -> None:
    """Ten handler threads cancelling distinct orders as fast as they can: every cancel
    succeeds. (SQLite's busy handler alone let one thread lose the lock for longer than
    the busy timeout, and its request was answered 503.)"""
    threads, each = 10, 150
    store.import_orders([{"id": i, "status": "pending"} for i in range(1, threads * each + 1)])
    barrier = threading.Barrier(threads)

    def cancel_many(first: int) -> list[bool]:
        barrier.wait()
        try:
            return [store.cancel_order(order_id, None, NOW).changed
                    for order_id in range(first, first + each)]
        finally:
            store.close()

    with ThreadPoolExecutor(threads) as pool:
        results = list(pool.map(cancel_many, range(1, threads * each + 1, each)))
    assert all(all(changed) for changed in results)
    assert store.count_by_status()["cancelled"] == threads * each


def test_ship_and_cancel_exclude_each_other(store: Store) -> None:
    store.import_orders([{"id": 1, "status": "pending"}])
    shipped = store.ship_order(1, NOW)
    assert (shipped.status, shipped.changed) == ("shipped", True)
    assert store.cancel_order(1, None, NOW).status == "shipped"
    store.import_orders([{"id": 2, "status": "pending"}])
    store.cancel_order(2, None, NOW)
    refused = store.ship_order(2, NOW)
    assert (refused.status, refused.changed) == ("cancelled", False)


def test_keys_are_found_by_full_digest_only(store: Store) -> None:
    new = keys.generate_key()
    created = store.create_key(
        digest=new.digest, prefix=new.prefix, name="shop", plan="enterprise",
        per_minute=5, per_day=50, now=NOW,
    )
    assert store.find_key(new.digest) == created
    assert (created.plan, created.per_minute, created.per_day) == ("enterprise", 5, 50)
    assert store.find_key(new.prefix) is None
    assert store.find_key(keys.digest(new.prefix)) is None
    assert store.find_key(new.secret) is None, "the secret itself is never stored"


def test_revoke_keeps_the_first_revocation_time(store: Store) -> None:
    key_id = _key(store)
    first = store.revoke_key(key_id, NOW)
    assert first is not None and first.revoked_at == NOW and not first.active
    second = store.revoke_key(key_id, "2027-01-01T00:00:00Z")
    assert second is not None and second.revoked_at == NOW
    assert store.revoke_key(999, NOW) is None
    assert [k.id for k in store.list_keys()] == [key_id]


def test_a_lock_held_past_the_busy_timeout_is_store_unavailable(
    store: Store, place: Place
) -> None:
    store.import_orders([{"id": 1, "status": "pending"}])
    with place.holding_order_lock(1):
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.cancel_order(1, None, NOW)
        assert time.monotonic() - started < 5, "gave up after the busy timeout, not a hang"
    assert store.cancel_order(1, None, NOW).changed, "recovers once the lock is gone"


def test_backup_is_consistent_while_another_connection_writes(
    store: Store, place: Place, tmp_path: Path
) -> None:
    store.import_orders({"id": i, "status": "pending"} for i in range(1, 2001))
    imported = store.revision()
    stop = threading.Event()

    def write() -> None:
        writer = place.open()
        order_id = 1
        while not stop.is_set() and order_id <= 2000:
            writer.cancel_order(order_id, None, NOW)
            order_id += 1
        writer.dispose()

    thread = threading.Thread(target=write)
    thread.start()
    try:
        store.backup(str(tmp_path / "copy.db"))
    finally:
        stop.set()
        thread.join()
    if place.kind == "sqlite":
        copy = Place("sqlite", str(tmp_path / "copy.db"))
        assert copy.sql("PRAGMA integrity_check") == [("ok",)]
        assert copy.sql("SELECT count(*) FROM orders") == [(2000,)]
        return
    with postgres_databases(place.database) as create:  # pg_restore into a new database
        copy = Place("postgresql", create())
        subprocess.run(["pg_restore", "--no-owner", f"--dbname={copy.database}",
                        str(tmp_path / "copy.db")], check=True, capture_output=True)
        assert copy.sql("SELECT count(*) FROM orders") == [(2000,)]
        cancelled = copy.sql("SELECT count(*) FROM orders WHERE status = 'cancelled'")[0][0]
        assert copy.sql("SELECT value FROM revision")[0][0] == imported + cancelled, (
            "the revision and the orders are of one snapshot")
        restored = copy.open()
        assert restored.migrate() == sqlite.SCHEMA_VERSION
        assert len(restored.list_orders()) == 2000
        restored.dispose()


def test_count_by_status_names_every_status(store: Store) -> None:
    assert store.count_by_status() == {"pending": 0, "shipped": 0, "cancelled": 0}
    store.import_orders([{"id": 1, "status": "pending"}, {"id": 2, "status": "shipped"},
                         {"id": 3, "status": "shipped"}])
    assert store.count_by_status() == {"pending": 1, "shipped": 2, "cancelled": 0}


def test_pets_are_stored_all_or_nothing(store: Store) -> None:
    assert store.import_pets([{"id": 1, "name": "Rex"}, {"name": "Tom"}]) == 2
    assert store.list_pets() == [{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}]
    assert store.get_pet(2) == {"id": 2, "name": "Tom"} and store.get_pet(9) is None
    with pytest.raises(DuplicatePet):
        store.import_pets([{"id": 3, "name": "New"}, {"id": 1, "name": "Again"}])
    assert [p["id"] for p in store.list_pets()] == [1, 2]


def test_every_kind_of_change_to_the_orders_raises_the_revision(store: Store) -> None:
    seen = [store.revision()]

    def changed() -> None:
        now = store.revision()
        assert now > seen[-1]
        seen.append(now)

    store.import_orders([{"id": 1}, {"id": 2}, {"id": 3}])
    changed()
    store.cancel_order(1, None, NOW)
    changed()
    store.ship_order(2, NOW)
    changed()
    store.import_orders([{"id": 3, "quantity": 5}], upsert=True)
    changed()
    store.cancel_order(2, None, NOW)  # refused: shipped
    assert store.revision() == seen[-1], "a refused change leaves the revision alone"
    _key(store)
    assert store.revision() == seen[-1], "keys are not orders"


def test_orders_json_is_the_list_encoded_with_its_revision(store: Store) -> None:
    import json

    assert store.orders_json() == (store.revision(), b"[]")
    store.import_orders([
        {"id": 7, "petId": 3, "quantity": 2, "shipDate": '2026-01-01T00:00:00Z'},
        {"id": 2}, {"id": 40, "status": "shipped", "complete": True},
    ])
    store.cancel_order(2, None, NOW)
    revision, body = store.orders_json()
    assert revision == store.revision()
    assert json.loads(body) == store.list_orders()
    assert [list(o) for o in json.loads(body)] == [list(o) for o in store.list_orders()], (
        "same fields in the same order")


def test_orders_json_pages_are_the_same_list_from_one_snapshot_in_any_thread(
    store: Store,
) -> None:
    """The pieces of a streamed list join into exactly orders_json's body. They are taken
    in different threads, and a change made half-way is not in them."""
    import json

    assert b"".join(store.orders_json_pages(10)[1]) == b"[]"
    store.import_orders([{"id": i, "petId": i % 5, "quantity": i % 3 or None}
                         for i in range(1, 251)])
    store.cancel_order(17, None, NOW)
    revision, body = store.orders_json()
    for shipped, page_size in enumerate((1, 7, 250, 1000), start=18):
        started, pieces = store.orders_json_pages(page_size)
        assert started == revision
        taken = [next(pieces)]
        store.ship_order(shipped, NOW)  # after the read began: not in this list
        with ThreadPoolExecutor(3) as pool:
            while (piece := pool.submit(next, pieces, None).result()) is not None:
                taken.append(piece)
        assert b"".join(taken) == body, page_size
        assert json.loads(b"".join(taken))[shipped - 1]["status"] == "pending"
        revision, body = store.orders_json()  # the next round starts from the new list


def test_a_stream_closed_half_way_ends_its_read(store: Store, place: Place) -> None:
    """A client that leaves half-way: the read transaction ends with it. In SQLite a
    checkpoint can then reset the WAL (a read still open would keep it from doing so); in
    PostgreSQL the stream's connection is gone (one left idle in its transaction would
    hold back vacuum)."""
    store.import_orders([{"id": i} for i in range(1, 101)])
    _, pieces = store.orders_json_pages(10)
    next(pieces), next(pieces)
    pieces.close()  # type: ignore[attr-defined]
    store.cancel_order(1, None, NOW)
    if place.kind == "sqlite":
        with sqlite3.connect(place.database) as conn:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0
    else:
        assert place.sql("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                         "current_database() AND state LIKE 'idle in transaction%'") == [(0,)]


def test_a_revision_is_raised_by_hand_edits_too(store: Store, place: Place) -> None:
    """A change made outside the service (an operator's UPDATE, DELETE or, in PostgreSQL,
    TRUNCATE) also raises the revision, so no host serves a list cached before it."""
    store.import_orders([{"id": 1}, {"id": 2}])
    before = store.revision()
    place.sql("UPDATE orders SET quantity = 3 WHERE id = 1")
    assert store.revision() > before
    before = store.revision()
    place.sql("DELETE FROM orders WHERE id = 2")
    assert store.revision() > before
    if place.kind == "postgresql":
        before = store.revision()
        place.sql("TRUNCATE orders")
        assert store.revision() > before
    assert store.orders_json()[0] == store.revision()
