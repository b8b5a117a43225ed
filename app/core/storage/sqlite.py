"""The SQLite store, through sqlite-utils: the only module that imports sqlite3.

Each thread gets its own connection (the handlers run in a thread pool under Connexion 3,
and a sqlite3 connection belongs to the thread that opened it). Every connection runs with
``synchronous=FULL`` in WAL mode, so an acknowledged write survives a machine crash, and
with a busy timeout of at most 1 s, after which the caller gets StoreUnavailable (503).
"""

from __future__ import annotations

import functools
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import orjson
import sqlite_utils

from app.core.errors import (
    DuplicateKey,
    DuplicateOrder,
    OutOfStock,
    PetNotInCatalogue,
    PetWithdrawn,
    StoreUnavailable,
)
from app.core.storage.console_statements import ConsoleStatements
from app.core.storage.day_statements import DayStatements
from app.core.storage.group_commit import GroupCommit, Savepoints
from app.core.storage.records import ApiKey, Changes, OrderMove, Placed, Transition
from app.core.storage.sqlite_schema import MIGRATIONS, SCHEMA_VERSION
from app.core.storage.sqlite_stock import PET_FOR_PLACING, SQLiteStock
from app.core.storage.statements import (
    FEED_ERAS,
    IDEMPOTENCY_FIND,
    NEW_ORDER_COLUMNS,
    PLACED_KIND,
    SqlStore,
    key_values,
    placed_order,
    replayed,
)
from app.core.storage.stock_statements import PET_JSON, StockStatements
from app.core.storage.story_statements import StoryStatements
from app.core.storage.webhook_statements import WebhookStatements

P = ParamSpec("P")
T = TypeVar("T")


def _translate_errors(method: Callable[P, T]) -> Callable[P, T]:
    """Turn the database's operational failures into StoreUnavailable, the 503 of D15."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(*args, **kwargs)
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite: {exc}") from exc

    return wrapper


# The whole list as JSON, built by SQLite: reading rows into Python dicts costs several
# times what encoding them does (docs/house/decisions.md, facts about the stack). Same
# fields and rules as order_fields (absent values left out); id is the rowid, so the scan
# is in id order.
# One order as list_orders gives it, as JSON text built by SQLite: no row objects, no dicts.
ORDER_JSON = """
    '{"id":' || id
    || coalesce(',"petId":' || pet_id, '')
    || coalesce(',"quantity":' || quantity, '')
    || CASE WHEN ship_date IS NULL THEN '' ELSE ',"shipDate":' || json_quote(ship_date) END
    || CASE WHEN complete THEN ',"complete":true' ELSE ',"complete":false' END
    || ',"status":' || json_quote(status) || '}'
"""
ORDERS_JSON = f"SELECT '[' || coalesce(group_concat({ORDER_JSON}, ','), '') || ']' FROM orders"
# The orders after an id, a page at a time (keyset on the rowid), and the last id of the page.
ORDERS_JSON_PAGE = (f"SELECT group_concat({ORDER_JSON}, ','), max(id) FROM "
                    "(SELECT * FROM orders WHERE id > ? ORDER BY id LIMIT ?)")


class SQLiteStore(SQLiteStock, SqlStore, StockStatements, WebhookStatements,
                  ConsoleStatements, DayStatements, StoryStatements):
    """Orders and API keys in one SQLite file."""

    PARAM = "?"
    SKIP_LOCKED = ""  # a claim holds the database's write lock: no row is held by another
    KEY_LOCK = None  # every write transaction holds the database's write lock
    ORDER_JSON = ORDER_JSON
    PET_JSON = PET_JSON.format(quote="json_quote")
    JSON_PARAM = "?"
    LOCK_WRITERS = None  # BEGIN IMMEDIATE holds the database's write lock
    TRUE, FALSE = "1", "0"
    local = True  # a file on this machine

    def __init__(self, path: str | Path, busy_timeout_ms: int = 1000) -> None:
        self.path = str(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._writing = threading.RLock()
        # The moves and placing of orders share their commits (group_commit.py).
        self._grouped: GroupCommit[Callable[[sqlite_utils.Database], Any]] = GroupCommit(
            Savepoints(lambda: self.db, lambda db, sql: db.conn.execute(sql), self._writing,
                       busy_timeout_ms / 1000, lambda: sqlite3.OperationalError(
                           "database is locked (by this process's writers)")))

    # connections ---------------------------------------------------------------------

    def _connect(self, any_thread: bool = False) -> sqlite_utils.Database:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(
            self.path,
            timeout=self.busy_timeout_ms / 1000,
            isolation_level=None,  # autocommit; transactions are explicit (BEGIN IMMEDIATE)
            check_same_thread=not any_thread,
        )
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
        conn.execute("PRAGMA synchronous = FULL")
        conn.execute("PRAGMA foreign_keys = ON")
        # The group commit's savepoints keep what each write changed in a sub-journal,
        # written to a temporary file by default: a place, whose triggers change the pet's
        # row and its feed index (D39) besides the order's, cost 70 us more a place that
        # way (docs/performance.md, "The catalogue in sync"). In memory it costs nothing
        # measurable; the service sorts nothing large (every list reads an index).
        conn.execute("PRAGMA temp_store = MEMORY")
        return sqlite_utils.Database(conn)

    @property
    def db(self) -> sqlite_utils.Database:
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = self._connect()
        return db

    @contextmanager
    def _write(self) -> Iterator[sqlite_utils.Database]:
        """One write transaction, taking the write lock up front so that it never has to
        be upgraded half-way (which could fail with SQLITE_BUSY regardless of timeout)."""
        db = self.db
        # The threads of one process queue here, in turn, rather than in SQLite's busy
        # handler, whose sleeps grow to 100 ms: under a steady load of writes from ten
        # threads, one that kept losing the race waited out the busy timeout (503).
        if not self._writing.acquire(timeout=self.busy_timeout_ms / 1000):
            raise sqlite3.OperationalError("database is locked (by this process's writers)")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            self._writing.release()

    def close(self) -> None:
        """Close this thread's connection."""
        db = getattr(self._local, "db", None)
        if db is not None:
            db.conn.close()
            self._local.db = None

    def dispose(self) -> None:
        """Close this thread's connection; those of other threads close with their threads."""
        self.close()

    @_translate_errors
    def backup(self, target: str, progress: Callable[[str], None] | None = None) -> None:
        """Copy the live database to target with SQLite's online backup API: a consistent
        copy even while the service writes, taken in steps so writers are not held up. On a
        large database, progress gets a line every 10,240 pages (about 40 MB)."""

        def step(_status: int, remaining: int, total: int) -> None:
            done = total - remaining
            if progress is not None and total > 10_000 and done % 10_240 == 0:
                progress(f"copied {done:,} of {total:,} pages")

        destination = sqlite3.connect(target)
        try:
            self.db.conn.backup(destination, pages=1024, progress=step)
            destination.execute("PRAGMA journal_mode = WAL")
        finally:
            destination.close()

    @_translate_errors
    def check(self) -> dict[str, str]:
        """Connection facts for the storage suite (journal mode, synchronous level, where
        temporary data goes)."""
        db = self.db
        return {
            "journal_mode": db.execute("PRAGMA journal_mode").fetchone()[0],
            "synchronous": str(db.execute("PRAGMA synchronous").fetchone()[0]),
            "busy_timeout": str(db.execute("PRAGMA busy_timeout").fetchone()[0]),
            "temp_store": str(db.execute("PRAGMA temp_store").fetchone()[0]),
        }

    # schema ----------------------------------------------------------------------------

    @_translate_errors
    def migrate(self) -> int:
        """Create or upgrade the schema; return the schema version now in force.

        Safe to run from several processes at once: the version is read and raised inside
        one write transaction.
        """
        db = self.db
        db.execute("PRAGMA journal_mode = WAL")
        with self._write():
            version = db.execute("PRAGMA user_version").fetchone()[0]
            for migration in MIGRATIONS[version:]:
                migration(db)
            if version < SCHEMA_VERSION:
                db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return SCHEMA_VERSION

    # orders ----------------------------------------------------------------------------

    @_translate_errors
    def orders_json(self) -> tuple[int, bytes]:
        """Every order as the JSON array list_orders would give, and the revision it is
        of, read in one transaction."""
        db = self.db
        db.execute("BEGIN")
        try:
            revision = db.execute("SELECT value FROM revision").fetchone()[0]
            body = db.execute(ORDERS_JSON).fetchone()[0]
        finally:
            db.execute("COMMIT")
        return int(revision), body.encode()

    @_translate_errors
    def orders_json_pages(self, page_size: int) -> tuple[int, Iterator[bytes]]:
        """Every order as orders_json gives them, in pieces of page_size orders, and the
        revision they are of: one read transaction on a connection of its own, held until
        the pieces run out or are closed. The pieces may be taken in any thread, one at
        a time. In WAL mode writers go on meanwhile; they are not seen by this read."""
        conn = self._connect(any_thread=True).conn
        try:
            conn.execute("BEGIN")
            revision = int(conn.execute("SELECT value FROM revision").fetchone()[0])
        except BaseException:
            conn.close()
            raise
        return revision, self._pages(conn, page_size)

    @_translate_errors
    def _changes(self, after: tuple[int, int] | None, limit: int, of: str) -> Changes:
        """Up to limit orders or pets changed after the position (position, id), in the
        order of their last change, with the revision and the eras, in one read
        transaction."""
        sql, params = self._changes_page(after, of)
        db = self.db
        db.execute("BEGIN")
        try:
            revision = db.execute("SELECT value FROM revision").fetchone()[0]
            eras = db.execute(FEED_ERAS).fetchall()
            rows = db.execute(sql, (*params, limit)).fetchall()
        finally:
            db.execute("COMMIT")
        return Changes(rows, int(revision), [(int(f), str(e)) for f, e in eras])

    @_translate_errors
    def begin_era(self, era: str) -> int:
        """Take a position and begin the era there (D26); return the position."""
        with self._write() as db:
            db.execute("UPDATE revision SET value = value + 1")
            first = int(db.execute("SELECT value FROM revision").fetchone()[0])
            db.execute("INSERT INTO feed_eras VALUES (?, ?)", (first, era))
        return first

    @_translate_errors
    def _page(self, conn: sqlite3.Connection, after: int, size: int) -> tuple[str, int] | None:
        body, last = conn.execute(ORDERS_JSON_PAGE, (after, size)).fetchone()
        return None if body is None else (body, last)

    # what SqlStore builds on ------------------------------------------------------------

    @_translate_errors
    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self.db.execute(sql, params).fetchall()

    @_translate_errors
    def _transition(self, move: OrderMove) -> Transition:
        update, params = move.statement(self.PARAM)

        def run(db: sqlite_utils.Database) -> tuple[bool, Any]:
            changed = db.execute(update, params).rowcount == 1
            return changed, db.execute(f"SELECT status, complete, version, {ORDER_JSON} "
                                       "FROM orders WHERE id = ?", (move.order_id,)).fetchone()

        changed, row = self._grouped.run(run)
        if row is None:
            return Transition(None, changed=False)
        return Transition(str(row[0]), changed, bool(row[1]), int(row[2]),
                          orjson.loads(row[3]))

    @_translate_errors
    def place_order(self, new: dict[str, Any], api_key_id: int, idempotency_key: str,
                    fingerprint: str, now: str, catalogue_pets_only: bool = False) -> Placed:
        """Place a pending order (petId, quantity, shipDate) under an idempotency key, both
        in one transaction; or, when the key placed one before, replay that first answer
        (IdempotencyKeyReused when the key came with another request). With
        catalogue_pets_only, a new order for a pet a non-empty catalogue does not hold is
        PetNotInCatalogue, and nothing is kept; so is a new order for a withdrawn pet
        (PetWithdrawn), or for more units of a tracked pet than are available (OutOfStock,
        D33): the pet is read in the transaction that inserts the order, under the
        database's write lock, so no other writer can take the units between the two, and
        pets_stock_covers_reserved would refuse the insert if one could. SQLite's write lock
        makes concurrent calls take turns: the first places, the others replay. The
        transaction may hold other writes of this process, each in its own savepoint
        (group_commit.py)."""
        pet_id, quantity = new["petId"], new["quantity"]

        def place(db: sqlite_utils.Database) -> Placed:
            row = db.execute(IDEMPOTENCY_FIND.format(p="?"),
                             (api_key_id, idempotency_key)).fetchone()
            if row is not None:
                return replayed(row, fingerprint)
            catalogue, withdrawn, available = db.execute(PET_FOR_PLACING,
                                                         (pet_id,)).fetchone()
            if withdrawn is None and catalogue_pets_only and catalogue:
                raise PetNotInCatalogue(pet_id)
            if withdrawn:
                raise PetWithdrawn(pet_id)
            if available is not None and available < quantity:
                raise OutOfStock(pet_id, quantity, available)
            cursor = db.execute(f"INSERT INTO orders ({NEW_ORDER_COLUMNS}, last_change) "
                                f"VALUES (?, ?, ?, {PLACED_KIND})",
                                (pet_id, quantity, new.get("shipDate")))
            order = placed_order(int(cursor.lastrowid or 0), new)
            db.execute("INSERT INTO idempotency_keys VALUES (?, ?, ?, ?, ?, 1, ?)",
                       (api_key_id, idempotency_key, fingerprint, order["id"],
                        orjson.dumps(order).decode(), now))
            return Placed(order, 1, replayed=False)

        return self._grouped.run(place)

    @_translate_errors
    def _delete(self, sql: str, params: tuple[Any, ...]) -> int:
        with self._write() as db:
            return int(db.execute(sql, params).rowcount)

    @_translate_errors
    def import_orders(self, orders: Iterable[dict[str, Any]], upsert: bool = False) -> int:
        """Insert (or with upsert, replace) the orders in one transaction; all or nothing.
        Pending orders hold units of their pets as placed ones do (the triggers of
        migration 10): one that a tracked pet's stock does not cover fails the import,
        with StockShortfall naming the pet and how many units are missing."""
        sql = ("INSERT INTO orders (id, pet_id, quantity, ship_date, complete, status) "
               "VALUES (?, ?, ?, ?, ?, ?)")
        if upsert:  # an UPDATE of the existing order, so that its version rises (D25)
            sql += (" ON CONFLICT (id) DO UPDATE SET pet_id = excluded.pet_id, quantity = "
                    "excluded.quantity, ship_date = excluded.ship_date, complete = "
                    "excluded.complete, status = excluded.status, cancelled_at = NULL, "
                    "cancelled_by = NULL, cancelled_by_user = NULL")
        rows = list(orders)
        ids = [order.get("id") for order in rows]
        if upsert and None not in ids and len(set(ids)) == len(ids):
            # Each row replaces its own order, so their order changes nothing but what is
            # held on the way: rows that hold nothing (which may release) go first, so that
            # the import fits when its whole does, as PostgreSQL's one statement does.
            rows.sort(key=lambda order: order.get("status", "pending") == "pending")
        short: dict[str, Any] | None = None  # the row whose pet's stock did not cover it
        try:
            with self._write() as db:
                for order in rows:
                    values = (
                        order.get("id"),
                        order.get("petId"),
                        order.get("quantity"),
                        order.get("shipDate"),
                        int(bool(order.get("complete", False))),
                        order.get("status", "pending"),
                    )
                    try:
                        db.execute(sql, values)
                    except sqlite3.IntegrityError as exc:
                        if "UNIQUE" in str(exc) and order.get("id") is not None:
                            raise DuplicateOrder(order["id"]) from None
                        if self._stock_check_failed(exc):
                            short = order
                        raise
        except sqlite3.IntegrityError:
            if short is None:
                raise
            raise self._shortfall(rows, upsert, short.get("petId")) from None
        return len(rows)

    # API keys --------------------------------------------------------------------------

    @_translate_errors
    def create_key(
        self,
        *,
        digest: str,
        prefix: str,
        name: str,
        plan: str,
        per_minute: int | None,
        per_day: int | None,
        now: str,
        scope: str = "write",
        expires_at: str | None = None,
    ) -> ApiKey:
        """Store a new key by its SHA-256 digest and return it."""
        with self._write() as db:
            cursor = db.execute(
                "INSERT INTO api_keys (prefix, digest, name, plan, per_minute, per_day, "
                "created_at, scope, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (prefix, digest, name, plan, per_minute, per_day, now, scope, expires_at),
            )
            key_id = cursor.lastrowid
        key = self.get_key(int(key_id or 0))
        assert key is not None
        return key

    @_translate_errors
    def _update_key(self, key_id: int, assignments: str, params: tuple[Any, ...]) -> ApiKey | None:
        with self._write() as db:
            db.execute(f"UPDATE api_keys SET {assignments} WHERE id = ?", (*params, key_id))
        return self.get_key(key_id)

    @_translate_errors
    def _write_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._write() as db:
            return db.execute(sql, params).fetchall()

    @_translate_errors
    def _write_batch(self, statements: Sequence[tuple[str, tuple[Any, ...]]]
                     ) -> list[list[tuple[Any, ...]]]:
        with self._write() as db:
            return [db.execute(sql, params).fetchall() for sql, params in statements]

    @_translate_errors
    def _write_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        with self._write() as db:
            db.conn.executemany(sql, rows)

    @_translate_errors
    def _insert_keys(self, keys: Sequence[ApiKey]) -> None:
        with self._write() as db:
            try:
                db.conn.executemany(self._insert_key_statement,
                                    [key_values(key) for key in keys])
            except sqlite3.IntegrityError as exc:
                if "UNIQUE" not in str(exc):
                    raise
                raise DuplicateKey(f"A key's id or digest exists already ({exc}).") from None
