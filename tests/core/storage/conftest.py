"""The storage suites' fixtures: every test runs over each store (a SQLite file, and a
PostgreSQL database of its own where PETSTORE_TEST_POSTGRES_URL is set)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app.core.config import Settings
from app.core.storage import Store, open_store

BUSY_TIMEOUT_MS = 200


@dataclass
class Place:
    """The database under a store: its kind and PETSTORE_DATABASE value."""

    kind: str
    database: str

    def open(self) -> Store:
        """Another store over the same database, as another process would open."""
        return open_store(Settings(database=self.database, busy_timeout_ms=BUSY_TIMEOUT_MS))

    @contextmanager
    def holding_order_lock(self, order_id: int) -> Iterator[None]:
        """Another connection holds a write lock that cancelling order_id must wait for:
        SQLite's whole-database lock, or PostgreSQL's lock on the order's row."""
        with self._holding("SELECT id FROM orders WHERE id = %s FOR UPDATE", (order_id,)):
            yield

    @contextmanager
    def holding_writers(self) -> Iterator[None]:
        """Another connection (application_name "blocker") holds what every writer of the
        store waits for: SQLite's whole-database lock, or PostgreSQL's revision row."""
        with self._holding("SELECT FROM revision FOR UPDATE", ()):
            yield

    @contextmanager
    def holding_imports(self) -> Iterator[None]:
        """Another connection holds PostgreSQL's advisory lock on which imports and the
        placing of orders take turns (postgres_writes.IMPORT_LOCK); moves never take it."""
        from app.core.storage.postgres_writes import IMPORT_LOCK

        with self._holding("SELECT pg_advisory_xact_lock(%s)", (IMPORT_LOCK,)):
            yield

    @contextmanager
    def _holding(self, lock: str, params: tuple[Any, ...]) -> Iterator[None]:
        """SQLite's write lock, or on PostgreSQL the rows the lock statement locks, held by
        another connection until the block ends."""
        if self.kind == "sqlite":
            blocker = sqlite3.connect(self.database, isolation_level=None)
            blocker.execute("BEGIN IMMEDIATE")
            try:
                yield
            finally:
                blocker.execute("ROLLBACK")
                blocker.close()
            return
        import psycopg

        # A transaction, until the block ends.
        with psycopg.connect(self.database, application_name="blocker") as conn:
            conn.execute(lock, params)  # type: ignore[arg-type]
            yield
            conn.rollback()

    @contextmanager
    def writers_waiting(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], bool]]:
        """A check, for the block's length, that a writer of a store has begun to wait for
        the write lock a test holds, observed rather than slept for (issue 56). On
        PostgreSQL a backend of this database waits on a lock (pg_stat_activity). On SQLite,
        which shows no waiter, a connection opened in the block by another thread than the
        test's has begun its BEGIN IMMEDIATE: SQLite's trace callback fires as a statement
        starts, and with the lock held elsewhere that statement can only wait."""
        if self.kind == "postgresql":
            def waiting() -> bool:
                return bool(self.sql(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'")[0][0])

            yield waiting
            return
        begun = threading.Event()
        test_thread = threading.current_thread()
        real_connect = sqlite3.connect

        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = real_connect(*args, **kwargs)
            if threading.current_thread() is not test_thread:
                conn.set_trace_callback(
                    lambda statement: begun.set() if statement.startswith("BEGIN IMMEDIATE")
                    else None)
            return conn

        monkeypatch.setattr(sqlite3, "connect", connect)
        yield begun.is_set

    def sql(self, query: str) -> list[tuple[Any, ...]]:
        """Rows of a query run on a connection of the test's own."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.database) as conn:
                return conn.execute(query).fetchall()
        import psycopg

        with psycopg.connect(self.database) as conn:
            cursor = conn.execute(query)  # type: ignore[arg-type]
            return cursor.fetchall() if cursor.description else []

    def at_schema(self, version: int, *statements: str) -> None:
        """Make the database as the first version migrations left it, then run the
        statements on it (rows of that time), as an older release would have."""
        if self.kind == "sqlite":
            import sqlite_utils

            from app.core.storage import sqlite

            db = sqlite_utils.Database(self.database)
            for migration in sqlite.MIGRATIONS[:version]:
                migration(db)
            db.execute(f"PRAGMA user_version = {version}")
            for statement in statements:
                db.execute(statement)
            db.conn.commit()
            db.conn.close()
            return
        import psycopg

        from app.core.storage import postgres

        with psycopg.connect(self.database) as conn:
            for migration in postgres.MIGRATIONS[:version]:
                conn.execute(migration)  # type: ignore[arg-type]
            conn.execute("CREATE TABLE petstore_schema (version INTEGER NOT NULL)")
            conn.execute("INSERT INTO petstore_schema VALUES (%s)", (version,))
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def columns(self) -> dict[str, list[str]]:
        """Every table of the schema and its columns, in order."""
        if self.kind == "sqlite":
            tables = [t for (t,) in self.sql("SELECT name FROM sqlite_master WHERE type = "
                                            "'table' ORDER BY name")]
            return {t: [c[1] for c in self.sql(f"PRAGMA table_info({t})")] for t in tables}
        columns: dict[str, list[str]] = {}
        for table, column in self.sql(
            "SELECT table_name, column_name FROM information_schema.columns WHERE "
            "table_schema = 'public' AND table_name <> 'petstore_schema' "
            "ORDER BY table_name, ordinal_position"
        ):
            columns.setdefault(table, []).append(column)
        return columns


@pytest.fixture(params=["sqlite", "postgresql"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Place:
    if request.param == "sqlite":
        return Place("sqlite", str(tmp_path / "store.db"))
    return Place("postgresql", request.getfixturevalue("postgres_database"))


@pytest.fixture
def store(place: Place) -> Iterator[Store]:
    store = place.open()
    yield store
    store.dispose()
