"""The PostgreSQL store, through psycopg 3 and its connection pool: with its writes of
orders (postgres_writes.py) and backups (pg_dump.py), the only modules that import psycopg,
and only when a PostgreSQL database is configured.

For a shop that runs several copies of the service behind a proxy, all sharing one
database. It keeps the SQLite store's schema, versions and rules
(app/core/storage/sqlite.py): the same migrations (postgres_schema.py and
sqlite_schema.py), the same conditional cancel in one statement, the same revision counter
raised by triggers on every change to the orders, from whichever host. Backups are
pg_dump's (pg_dump.py).

Connections come from a pool per process (psycopg_pool), in autocommit mode: a request's
single statement needs no BEGIN and COMMIT round trips; the few writes of several
statements open a transaction of their own; the moves and placing of orders that a
worker's threads make at the same moment share one transaction and one commit
(postgres_writes.py), each answered once that commit is made. Every connection commits
synchronously (an acknowledged cancel survives a crash of the database's machine, as D15
asks of SQLite) and waits at most the busy timeout for a row lock. A database that cannot
be reached, that drops its connections (a restart, a failover) or refuses to write (a
standby) raises StoreUnavailable, the 503 of D15; the pool replaces broken connections by
itself.

Every wait is bounded (D41, postgres_links.py): a connection's making, the pool's wait, each
statement (on the server) and each call (a watchdog closes a connection whose call has had
no answer a second after the statement timeout); a link that went silent fails calls at
once until it answers again (postgres_pool.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

import psycopg
from psycopg import errors as pq_errors

from app.core.config import Settings
from app.core.errors import (
    DuplicateKey,
    DuplicateOrder,
    DuplicatePet,
    StoreUnavailable,
)
from app.core.storage import pg_dump
from app.core.storage.console_statements import ConsoleStatements
from app.core.storage.day_statements import DayStatements
from app.core.storage.group_commit import GroupCommit, Write
from app.core.storage.postgres_imports import (
    COPY_INCOMING,
    COPY_INCOMING_PETS,
    INCOMING_ORDERS,
    INCOMING_PETS,
    INSERT_INCOMING,
    INSERT_INCOMING_PETS,
    INSERT_INCOMING_PETS_UPSERT,
    INSERT_INCOMING_UPSERT,
    first_duplicate,
)
from app.core.storage.postgres_links import Bound, Bounds
from app.core.storage.postgres_pool import UNAVAILABLE, Link, first_line
from app.core.storage.postgres_schema import MIGRATIONS, SCHEMA_VERSION
from app.core.storage.postgres_writes import (
    IMPORT_LOCK,
    ORDER_JSON,
    Move,
    Place,
    run_batch,
)
from app.core.storage.records import ApiKey, Changes, OrderMove, Placed, Transition
from app.core.storage.statements import (
    KEY_COLUMNS,
    SqlStore,
    key_values,
    replayed,
)
from app.core.storage.stock_statements import (
    PET_JSON,
    STOCK_CONSTRAINTS,
    StockStatements,
    pet_values,
)
from app.core.storage.story_statements import StoryStatements
from app.core.storage.webhook_statements import WebhookStatements

P = ParamSpec("P")
T = TypeVar("T")

log = logging.getLogger(__name__)

# The key of the transaction-scoped advisory lock that serialises migrations (imports take
# postgres_writes.IMPORT_LOCK: they number orders and pets that come without an id).
MIGRATION_LOCK = 0x70657473_0001
KEY_LOCKS = 0x70657473  # the first number of a lock per API key
# An import's transaction: as long as it takes (an operator's command, not a request).
UNBOUNDED = "SET LOCAL statement_timeout = 0"
def _translate_errors(method: Callable[P, T]) -> Callable[P, T]:
    """Turn the database's operational failures into StoreUnavailable, the 503 of D15."""

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return method(*args, **kwargs)
        except UNAVAILABLE as exc:
            raise StoreUnavailable(f"PostgreSQL: {first_line(exc)}") from exc

    return wrapper


# The revision and the whole list in one statement, so one snapshot.
ORDERS_JSON = ("SELECT (SELECT value FROM revision), '[' || coalesce((SELECT "
               f"string_agg({ORDER_JSON}, ',' ORDER BY id) FROM orders), '') || ']'")
# The orders after an id, a page at a time (keyset on the primary key), and the page's
# last id.
ORDERS_JSON_PAGE = (f"SELECT string_agg({ORDER_JSON}, ',' ORDER BY id), max(id) FROM "
                    "(SELECT * FROM orders WHERE id > %s ORDER BY id LIMIT %s) AS page")
class PostgresStore(SqlStore, StockStatements, WebhookStatements, ConsoleStatements,
                    DayStatements, StoryStatements):
    """Orders and API keys in one PostgreSQL database, shared by every host."""

    PARAM = "%s"
    SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"  # a claim passes over endpoints being claimed
    # A key's endpoint creates take turns on an advisory lock of that key (each then counts
    # in a snapshot taken after the one before committed: READ COMMITTED). The two-number
    # form: its keys never meet the one-number locks above.
    KEY_LOCK = f"SELECT pg_advisory_xact_lock({KEY_LOCKS}, mod(%s, 2147483647)::int)"
    ORDER_JSON = ORDER_JSON
    PET_JSON = PET_JSON.format(quote="to_json")
    JSON_PARAM = "%s::jsonb"
    # Every writer of orders and pets takes the revision's row first (migrations 8, 10).
    LOCK_WRITERS = "SELECT FROM revision FOR UPDATE"
    TRUE, FALSE = "true", "false"
    local = False  # every read is a round trip

    def __init__(self, url: str, busy_timeout_ms: int = 1000, pool_size: int = 10,
                 bounds: Bounds | None = None) -> None:
        self.link = Link(url, bounds or Bounds(), busy_timeout_ms, pool_size)
        self.params, self.pool = self.link.params, self.link.pool
        self.bounds, self.watchdog = self.link.bounds, self.link.watchdog
        self.busy_timeout_ms = busy_timeout_ms
        self._migrated = False
        # The moves and placing of orders share their commits (postgres_writes.py).
        self._grouped: GroupCommit[Move | Place] = GroupCommit(self._commit)

    @classmethod
    def of(cls, url: str, settings: Settings) -> PostgresStore:
        """The store of url with the settings' pool size and bounds (D41)."""
        return cls(url, busy_timeout_ms=settings.busy_timeout_ms,
                   pool_size=settings.database_pool_size, bounds=Bounds.of(settings))

    # connections ---------------------------------------------------------------------

    @contextmanager
    def _connection(self, bounded: bool = True
                    ) -> Iterator[tuple[psycopg.Connection[tuple[Any, ...]], Bound]]:
        """A pooled connection and its call's bound (postgres_pool.py); brings the schema
        up to date first if the start could not (the database was down when this process
        began)."""
        if not self._migrated:
            self.migrate()
        with self.link.connection(bounded) as found:
            yield found

    def _call(self, work: Callable[[psycopg.Connection[tuple[Any, ...]]], T],
              retry: bool = True, bounded: bool = True) -> T:
        """work(connection) as Link.call runs it, on a schema brought up to date."""
        if not self._migrated:
            self.migrate()
        return self.link.call(work, retry, bounded)

    def _one(self, sql: str, params: tuple[Any, ...] = (),
             retry: bool = True) -> tuple[Any, ...] | None:
        return self._call(lambda conn: conn.execute(sql, params).fetchone(), retry)

    def _all(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._call(lambda conn: conn.execute(sql, params).fetchall())

    @_translate_errors
    def _write_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        # One statement in autocommit: a transaction of its own. Not repeated after a
        # broken connection: an insert may have been committed.
        return self._call(lambda conn: conn.execute(sql, params).fetchall(), retry=False)

    @_translate_errors
    def _write_batch(self, statements: Sequence[tuple[str, tuple[Any, ...]]]
                     ) -> list[list[tuple[Any, ...]]]:
        def work(conn: psycopg.Connection[tuple[Any, ...]]) -> list[list[tuple[Any, ...]]]:
            with conn.transaction():
                return [conn.execute(sql, params).fetchall() for sql, params in statements]

        return self._call(work, retry=False)

    @contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
        bound: Bound | None = None
        try:
            with self._connection() as (conn, bound), conn.transaction():
                yield conn
        except UNAVAILABLE as exc:
            raise self.link.noted(exc, bound) from exc
        self.link.rose()

    def _stock_check_failed(self, exc: BaseException) -> str | None:
        if isinstance(exc, pq_errors.CheckViolation):
            name = exc.diag.constraint_name
            return name if name in STOCK_CONSTRAINTS else None
        return None

    def _any_tag(self, tags: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
        return "pets.tags ?| %s::text[]", (list(tags),)

    def close(self) -> None:
        """Nothing to close per thread: connections go back to the pool after each call."""

    def dispose(self) -> None:
        """Close the pool and every connection in it, and check()'s own."""
        self.link.dispose()

    @_translate_errors
    def backup(self, target: str, progress: Callable[[str], None] | None = None) -> None:
        """Copy the live database to target with pg_dump (custom format, for pg_restore):
        one consistent snapshot even while the service writes (app/core/storage/pg_dump.py)."""
        pg_dump.dump(self.params, target, progress)

    def check(self) -> dict[str, str]:
        """Facts about a connection for the storage suite and /readyz (commit durability,
        lock wait), from a connection of its own, within a short bound; raises
        StoreUnavailable when the database does not answer, or answers read-only (a
        standby, as during a failover), since cancels would fail (Link.check)."""
        return self.link.check()

    # schema ----------------------------------------------------------------------------

    @_translate_errors
    def migrate(self) -> int:
        """Create or upgrade the schema; return the schema version now in force.

        Safe to run from several processes and hosts at once: each takes an advisory lock
        first, then reads and raises the version in the same transaction (PostgreSQL's
        DDL is transactional: a failed migration leaves the schema as it was).
        """
        with (self.pool.connection() as conn,
              self.watchdog.bounded(conn, self.bounds.call) as bound, conn.transaction()):
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            conn.execute("CREATE TABLE IF NOT EXISTS petstore_schema (version INTEGER NOT NULL)")
            row = conn.execute("SELECT version FROM petstore_schema").fetchone()
            version = 0 if row is None else int(row[0])
            if version < SCHEMA_VERSION:  # a migration may rewrite a large table: unbounded
                self.watchdog.release(bound)
                conn.execute("SET LOCAL statement_timeout = 0")
            for migration in MIGRATIONS[version:]:
                conn.execute(migration)
            if row is None:
                conn.execute("INSERT INTO petstore_schema VALUES (%s)", (SCHEMA_VERSION,))
            elif version < SCHEMA_VERSION:
                conn.execute("UPDATE petstore_schema SET version = %s", (SCHEMA_VERSION,))
        self._migrated = True
        return SCHEMA_VERSION

    # orders ----------------------------------------------------------------------------

    @_translate_errors
    def orders_json(self) -> tuple[int, bytes]:
        """Every order as the JSON array list_orders would give, and the revision it is
        of, read in one statement (so one snapshot)."""
        row = self._one(ORDERS_JSON)
        assert row is not None
        return int(row[0]), row[1].encode()

    @_translate_errors
    def orders_json_pages(self, page_size: int) -> tuple[int, Iterator[bytes]]:
        """Every order as orders_json gives them, in pieces of page_size orders, and the
        revision they are of: one read-only REPEATABLE READ transaction on a connection
        of its own (a slow download does not hold one of the pool's), held until the
        pieces run out or are closed. The pieces may be taken in any thread, one at a
        time. Writers go on meanwhile; they are not seen by this read."""
        if not self._migrated:
            self.migrate()
        self.link.refuse_if_down()
        conn = psycopg.connect(**self.params, autocommit=True)
        try:
            with self.watchdog.bounded(conn, self.bounds.call):
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                row = conn.execute("SELECT value FROM revision").fetchone()
            assert row is not None
        except BaseException:
            conn.close()
            raise
        return int(row[0]), self._pages(conn, page_size)

    @_translate_errors
    def _changes(self, after: tuple[int, int] | None, limit: int, of: str) -> Changes:
        """Up to limit orders or pets changed after the position (position, id), in the
        order of their last change, with the revision and the eras, in one statement (one
        snapshot)."""
        page, params = self._changes_page(after, of, ", NULL::bigint, NULL::text")
        # The revision's row first (its position NULL), then the page's: a UNION ALL costs
        # the server about a fifth less than the page joined to the revision's row did.
        rows = self._all(
            "SELECT NULL, NULL::bigint, NULL::bigint, value, (SELECT string_agg("
            "first_position || ' ' || era, ',' ORDER BY first_position) FROM feed_eras) "
            f"FROM revision UNION ALL ({page}) ORDER BY 2 NULLS FIRST, 3", (*params, limit))
        eras = [(int(first), era) for first, era in
                (item.split(" ") for item in (rows[0][4] or "").split(",") if item)]
        return Changes([row[:3] for row in rows[1:]], int(rows[0][3]), eras)

    @_translate_errors
    def begin_era(self, era: str) -> int:
        """Take a position and begin the era there (D26); return the position."""

        def work(conn: psycopg.Connection[tuple[Any, ...]]) -> int:
            with conn.transaction():
                row = conn.execute("UPDATE revision SET value = value + 1 RETURNING value"
                                   ).fetchone()
                assert row is not None
                conn.execute("INSERT INTO feed_eras VALUES (%s, %s)", (row[0], era))
                return int(row[0])

        return self._call(work, retry=False)

    @_translate_errors
    def _page(self, conn: psycopg.Connection[tuple[Any, ...]], after: int,
              size: int) -> tuple[str, int] | None:
        with self.watchdog.bounded(conn, self.bounds.call):
            row = conn.execute(ORDERS_JSON_PAGE, (after, size)).fetchone()
        assert row is not None
        return None if row[0] is None else (row[0], row[1])

    # what SqlStore builds on ------------------------------------------------------------

    @_translate_errors
    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        return self._all(sql, params)

    @_translate_errors
    def _transition(self, move: OrderMove) -> Transition:
        """Run a conditional UPDATE of one order, atomic on its own. Of concurrent calls, the
        first changes the order; the others find it no longer in the state they move it
        from and change nothing, and read it as it is then. The transaction may hold other
        writes of this process (postgres_writes.py)."""
        result: Transition = self._grouped.run(Move(move))
        return result

    @_translate_errors
    def place_order(self, new: dict[str, Any], api_key_id: int, idempotency_key: str,
                    fingerprint: str, now: str, catalogue_pets_only: bool = False) -> Placed:
        """Place a pending order (petId, quantity, shipDate) under an idempotency key, both
        in one transaction; or, when the key placed one before, replay that first answer
        (IdempotencyKeyReused when the key came with another request). With
        catalogue_pets_only, a new order for a pet a non-empty catalogue does not hold is
        PetNotInCatalogue, and the key is not kept. Placing holds the revision's row: a
        concurrent call with the same key, on any host, waits for it until this
        transaction ends, then replays what it committed; the same key twice in one
        transaction (postgres_writes.py) places once and replays once."""
        result = self._grouped.run(Place(new, api_key_id, idempotency_key, fingerprint, now,
                                         catalogue_pets_only))
        return result if isinstance(result, Placed) else replayed(result, fingerprint)

    def _commit(self, batch: list[Write[Move | Place]]) -> None:
        """GroupCommit's commit: the batch in one transaction (postgres_writes.py), repeated
        once on a fresh connection when the one it had was found broken: a move repeated
        finds its order moved on, a placing repeated finds its key and replays."""
        outcomes = self._call(functools.partial(
            run_batch, writes=[write.work for write in batch], unavailable=UNAVAILABLE))
        for write, outcome in zip(batch, outcomes, strict=True):
            if isinstance(outcome, Exception):
                write.error = outcome
            else:
                write.result = outcome

    @_translate_errors
    def _delete(self, sql: str, params: tuple[Any, ...]) -> int:
        return self._call(lambda conn: conn.execute(sql, params).rowcount)

    @_translate_errors
    def import_orders(self, orders: Iterable[dict[str, Any]], upsert: bool = False) -> int:
        """Insert (or with upsert, replace) the orders in one transaction; all or nothing.

        The rows are copied (COPY) into a temporary table, then moved into orders by one
        INSERT, so that the revision is raised once however many rows come: a statement
        per row would update the revision row once per row in one transaction, which
        PostgreSQL does in quadratic time (100,000 rows took two minutes). Pending orders
        hold units of their pets as placed ones do, counted by one statement trigger
        (migration 10): a tracked pet whose stock does not cover them fails the import, with
        StockShortfall naming the pet and how many units are missing."""
        ids: list[int] = []
        orders = list(orders)

        def work(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
            with conn.transaction():
                conn.execute(UNBOUNDED)
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (IMPORT_LOCK,))
                row = conn.execute("SELECT coalesce(max(id), 0) FROM orders").fetchone()
                top = int(row[0]) if row else 0
                conn.execute(INCOMING_ORDERS)
                with conn.cursor() as cursor, cursor.copy(COPY_INCOMING) as copy:
                    for position, order in enumerate(orders):
                        # An order without an id gets the largest id so far plus one, as
                        # SQLite numbers a row.
                        order_id = order.get("id")
                        order_id = top + 1 if order_id is None else int(order_id)
                        top = max(top, order_id)
                        ids.append(order_id)
                        copy.write_row((position, order_id, order.get("petId"),
                                        order.get("quantity"), order.get("shipDate"),
                                        bool(order.get("complete", False)),
                                        order.get("status", "pending")))
                conn.execute(INSERT_INCOMING_UPSERT if upsert else INSERT_INCOMING)

        try:
            self._call(work, retry=False, bounded=False)
        except pq_errors.UniqueViolation:
            raise DuplicateOrder(self._call(functools.partial(
                first_duplicate, table="orders", ids=ids))) from None
        except pq_errors.CheckViolation as exc:
            if self._stock_check_failed(exc) is None:
                raise
            numbered = [{**order, "id": order_id} for order, order_id in zip(orders, ids,
                                                                              strict=True)]
            raise self._shortfall(numbered, upsert) from None
        return len(ids)

    # pets -------------------------------------------------------------------------------

    @_translate_errors
    def import_pets(self, pets: Iterable[dict[str, Any]], upsert: bool = False) -> int:
        """Insert (or with upsert, update) pets in one transaction; all or nothing. Raises
        DuplicatePet for an id held already (without upsert), StockBelowReserved for a
        stock below what pending orders of the pet hold."""
        rows: list[dict[str, Any]] = []

        def work(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
            with conn.transaction():
                conn.execute(UNBOUNDED)
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (IMPORT_LOCK,))
                # and the revision's row, as a pet's writer takes it first: the largest id
                # read next is then the largest there is until this commits
                conn.execute(self.LOCK_WRITERS)
                row = conn.execute("SELECT coalesce(max(id), 0) FROM pets").fetchone()
                top = int(row[0]) if row else 0
                conn.execute(INCOMING_PETS)
                with conn.cursor() as cursor, cursor.copy(COPY_INCOMING_PETS) as copy:
                    for position, (pet, values) in enumerate(zip(pets_given, pet_values(
                            pets_given), strict=True)):
                        pet_id = top + 1 if values[0] is None else int(values[0])
                        top = max(top, pet_id)
                        rows.append({**pet, "id": pet_id})
                        copy.write_row((position, pet_id, *values[1:]))
                conn.execute(INSERT_INCOMING_PETS_UPSERT if upsert else INSERT_INCOMING_PETS)

        pets_given = list(pets)
        try:
            self._call(work, retry=False, bounded=False)
        except pq_errors.UniqueViolation:
            raise DuplicatePet(self._call(functools.partial(
                first_duplicate, table="pets", ids=[pet.get("id") for pet in pets_given]))
            ) from None
        except pq_errors.CheckViolation as exc:
            short = self._pets_short(rows) if self._stock_check_failed(exc) else None
            if short is None:
                raise
            raise short from None
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
        row = self._one(
            "INSERT INTO api_keys (prefix, digest, name, plan, per_minute, per_day, created_at, "
            f"scope, expires_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
            f"RETURNING {KEY_COLUMNS}",
            (prefix, digest, name, plan, per_minute, per_day, now, scope, expires_at),
            retry=False,  # a second insert of a key that was stored would be refused
        )
        assert row is not None
        return ApiKey(*row)

    @_translate_errors
    def _update_key(self, key_id: int, assignments: str, params: tuple[Any, ...]) -> ApiKey | None:
        row = self._one(f"UPDATE api_keys SET {assignments} WHERE id = %s RETURNING {KEY_COLUMNS}",
                        (*params, key_id))
        return None if row is None else ApiKey(*row)

    @_translate_errors
    def _write_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        def work(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
            with conn.transaction(), conn.cursor() as cursor:
                cursor.executemany(sql, rows)

        self._call(work)

    @_translate_errors
    def _insert_keys(self, keys: Sequence[ApiKey]) -> None:
        def work(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
            with conn.transaction():
                with conn.cursor() as cursor:
                    cursor.executemany(self._insert_key_statement,
                                       [key_values(key) for key in keys])
                # Ids given explicitly do not move the identity's sequence: move it past
                # them, or the next key created here would take an imported id.
                conn.execute("SELECT setval(pg_get_serial_sequence('api_keys', 'id'), "
                             "(SELECT max(id) FROM api_keys))")

        try:
            self._call(work, retry=False)
        except pq_errors.UniqueViolation as exc:
            raise DuplicateKey(f"A key's id or digest exists already ({first_line(exc)}).") \
                from None
