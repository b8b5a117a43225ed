"""What the SQLite and PostgreSQL stores say alike, written once.

Both stores hold the same tables (the same migrations, in each one's dialect), so the
reads, the conditional writes and the key updates are the same SQL; only the placeholder
differs (``?`` for sqlite3, ``%s`` for psycopg). SqlStore writes them with the store's
PARAM and leaves six things to each store, each turning the database's failures into
StoreUnavailable: running a read (_rows), a conditional order write in one transaction
(_transition), a key update (_update_key), one statement over many rows in one
transaction (_write_many), an insert of keys with their ids (_insert_keys), and one page of
the streamed list (_page).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

import orjson

from app.core.errors import DuplicateKey, IdempotencyKeyReused
from app.core.storage.records import (
    KEY_FIELDS,
    ORDER_STATUSES,
    ApiKey,
    Changes,
    OrderMove,
    OrderQuery,
    Placed,
    Position,
    Transition,
)

ORDER_COLUMNS = "id, pet_id, quantity, ship_date, complete, status"
KEY_COLUMNS = ", ".join(KEY_FIELDS)  # ApiKey(*row) for a row of them
# D21's key lifecycle (migration 6 of both stores): expiry, scope, last use, and the secret
# a rotation replaced, kept until its grace ends and looked up like the current one.
KEY_LIFECYCLE = (
    "ALTER TABLE api_keys ADD COLUMN expires_at TEXT",
    "ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'write'"
    " CHECK (scope IN ('read', 'write'))",
    "ALTER TABLE api_keys ADD COLUMN last_used_at TEXT",
    "ALTER TABLE api_keys ADD COLUMN previous_digest TEXT",
    "ALTER TABLE api_keys ADD COLUMN previous_until TEXT",
    "CREATE UNIQUE INDEX idx_api_keys_previous_digest ON api_keys (previous_digest)",
)
# The v2 list's indexes (migration 5 of both stores): one for each filter and sort, each
# ending with the id, the tie-break of every sort, so that a page is one index range. The
# orders without a shipDate, last in both shipDate sorts, have a partial index of their
# own. (status, id) replaces the index on status alone.
LIST_INDEXES = (
    "DROP INDEX idx_orders_status",
    "CREATE INDEX idx_orders_status_id ON orders (status, id)",
    "CREATE INDEX idx_orders_pet_id ON orders (pet_id, id)",
    "CREATE INDEX idx_orders_complete_id ON orders (complete, id)",
    "CREATE INDEX idx_orders_ship_date_id ON orders (ship_date, id)",
    "CREATE INDEX idx_orders_undated_id ON orders (id) WHERE ship_date IS NULL",
)


# D22-D25 (migration 7 of both stores): each order's version, which every change to it
# raises (the service's own UPDATEs raise it themselves, and a trigger of each store raises
# it for any other UPDATE that leaves it as it was: an upsert import, a hand edit); and the
# idempotency keys of placed orders, each with the request's fingerprint and the first
# answer (the order as placed, at its first version), written in the order's transaction.
IDEMPOTENCY_KEYS = (
    "CREATE TABLE idempotency_keys ("
    " api_key_id BIGINT NOT NULL,"
    " idempotency_key TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL,"
    " order_id BIGINT NOT NULL,"
    " order_json TEXT NOT NULL,"
    " order_version BIGINT NOT NULL,"
    " created_at TEXT NOT NULL,"
    " PRIMARY KEY (api_key_id, idempotency_key))",
    "CREATE INDEX idx_idempotency_keys_created_at ON idempotency_keys (created_at)",
)
IDEMPOTENCY_FIND = ("SELECT fingerprint, order_json, order_version FROM idempotency_keys "
                    "WHERE api_key_id = {p} AND idempotency_key = {p}")
NEW_ORDER_COLUMNS = "pet_id, quantity, ship_date"
# A shop that keeps a pets catalogue (one pet or more) takes orders only for its pets: an
# order nobody can fill is refused when it is placed, not found later. True when the
# catalogue is not empty and does not hold the pet: two lookups of the pets table's primary
# key, in the placing transaction.
PET_OUTSIDE_CATALOGUE = ("SELECT EXISTS (SELECT 1 FROM pets) "
                         "AND NOT EXISTS (SELECT 1 FROM pets WHERE id = {p})")
# A placed order's last change is its placing (D28; migration 9 adds the column).
PLACED_KIND = "'placed'"

# D26 (migration 8 of both stores): each order's position, the revision its last change
# took, so that the feed of changed orders is one range of an index, in commit order. Each
# store's triggers give it (SQLite a position a row; PostgreSQL one a transaction, taken
# with the revision row's lock, held until commit, so that positions are given in commit
# order even when transactions on several hosts overlap). Orders held before it are all at
# position 0. The eras: each start of the service takes a position and begins an era
# there, so that a cursor from a backup restored to an earlier point (whose positions
# after the restore mean other changes) names an era this database does not have there.
FEED_SCHEMA = (
    "CREATE INDEX idx_orders_position_id ON orders (position, id)",
    "CREATE TABLE feed_eras (first_position BIGINT PRIMARY KEY, era TEXT NOT NULL)",
)
FEED_ERAS = "SELECT first_position, era FROM feed_eras ORDER BY first_position"


def replayed(row: tuple[Any, ...], fingerprint: str) -> Placed:
    """The first answer of an idempotency key, for a request with this fingerprint; raises
    IdempotencyKeyReused when the key came with another request."""
    if row[0] != fingerprint:
        raise IdempotencyKeyReused()
    return Placed(orjson.loads(row[1]), int(row[2]), replayed=True)


def placed_order(order_id: int, new: dict[str, Any]) -> dict[str, Any]:
    """A new order (petId, quantity, shipDate) as the store holds it once placed."""
    return order_fields((order_id, new["petId"], new["quantity"], new.get("shipDate"),
                         False, "pending"))


def key_values(key: ApiKey) -> tuple[Any, ...]:
    """A key's values in the order of KEY_COLUMNS, for an INSERT."""
    return tuple(getattr(key, field) for field in KEY_FIELDS)


def _shown(value: Any) -> str:
    """An id, or the first characters of a digest: enough to find it, short to read."""
    return f"{value[:12]}..." if isinstance(value, str) and len(value) > 12 else str(value)


def order_fields(row: tuple[Any, ...]) -> dict[str, Any]:
    """A row of ORDER_COLUMNS in the API's field names, absent values left out (D1)."""
    order_id, pet_id, quantity, ship_date, complete, status = row
    order: dict[str, Any] = {"id": order_id}
    if pet_id is not None:
        order["petId"] = pet_id
    if quantity is not None:
        order["quantity"] = quantity
    if ship_date is not None:
        order["shipDate"] = ship_date
    order["complete"] = bool(complete)
    order["status"] = status
    return order


class SqlStore:
    """The Store methods whose SQL is the same in both databases."""

    PARAM: ClassVar[str]
    """The driver's placeholder for a parameter."""
    ORDER_JSON: ClassVar[str]
    """An SQL expression: one order's JSON, as list_orders gives it, built by the database."""
    PET_JSON: ClassVar[str]
    """An SQL expression: one pet's JSON, as getPet answers it (stock_statements)."""
    TRUE: ClassVar[str]
    FALSE: ClassVar[str]
    """The dialect's literals of the complete column (1 and 0, or true and false)."""

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Every row the query gives."""
        raise NotImplementedError

    def _changes(self, after: tuple[int, int] | None, limit: int, of: str) -> Changes:
        """A page of the feed of orders or of pets, read in one snapshot."""
        raise NotImplementedError

    def _transition(self, move: OrderMove) -> Transition:
        """Run a conditional UPDATE of one order (its condition names the state it moves
        from); read the order's status, complete flag and version afterwards in the same
        transaction, to say what it is now and, when nothing changed, why."""
        raise NotImplementedError

    def _update_key(self, key_id: int, assignments: str, params: tuple[Any, ...]) -> ApiKey | None:
        """Run UPDATE api_keys SET assignments for the key; the key as it is now, or None."""
        raise NotImplementedError

    def _write_many(self, sql: str, rows: list[tuple[Any, ...]]) -> None:
        """Run one statement for each row, all in one transaction."""
        raise NotImplementedError

    def _delete(self, sql: str, params: tuple[Any, ...]) -> int:
        """Run one DELETE; how many rows it removed."""
        raise NotImplementedError

    def _insert_keys(self, keys: Sequence[ApiKey]) -> None:
        """Insert the keys with their ids (_insert_key_statement) in one transaction, all
        or nothing, so that the ids the store gives later follow them; a unique index
        refusing one raises DuplicateKey."""
        raise NotImplementedError

    @property
    def _insert_key_statement(self) -> str:
        """An INSERT of one key with every column, its id included."""
        return (f"INSERT INTO api_keys ({KEY_COLUMNS}) "
                f"VALUES ({', '.join([self.PARAM] * len(KEY_FIELDS))})")

    def _page(self, conn: Any, after: int, size: int) -> tuple[str, int] | None:
        """On conn, the JSON of up to size orders whose ids follow after, comma-separated,
        and the last one's id; None past the end."""
        raise NotImplementedError

    def _pages(self, conn: Any, page_size: int) -> Iterator[bytes]:
        """The whole list as a JSON array, page_size orders a piece, read on conn (a
        connection of this read's own, in one transaction), closed when the pieces run out
        or the generator is closed."""
        try:
            yield b"["
            after, separator = -(2**63), b""
            while True:
                page = self._page(conn, after, page_size)
                if page is None:
                    break
                body, after = page
                yield separator + body.encode()
                separator = b","
            yield b"]"
        finally:
            conn.close()

    def _one_value(self, sql: str) -> int:
        return int(self._rows(sql)[0][0])

    # orders -----------------------------------------------------------------------------

    def list_orders(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every order (or those with one status), by id, in the API's field names."""
        sql = f"SELECT {ORDER_COLUMNS} FROM orders"
        params: tuple[Any, ...] = ()
        if status is not None:
            sql += f" WHERE status = {self.PARAM}"
            params = (status,)
        return [order_fields(row) for row in self._rows(sql + " ORDER BY id", params)]

    def get_order(self, order_id: int) -> dict[str, Any] | None:
        """The order with this id, in the API's field names, or None."""
        rows = self._rows(f"SELECT {ORDER_COLUMNS} FROM orders WHERE id = {self.PARAM}",
                          (order_id,))
        return order_fields(rows[0]) if rows else None

    def get_versioned_order(self, order_id: int) -> tuple[dict[str, Any], int] | None:
        """The order with this id and its version (D25), read together, or None."""
        rows = self._rows(f"SELECT {ORDER_COLUMNS}, version FROM orders "
                          f"WHERE id = {self.PARAM}", (order_id,))
        return (order_fields(rows[0][:-1]), int(rows[0][-1])) if rows else None

    def page_orders(self, query: OrderQuery, after: Position | None,
                    limit: int) -> list[tuple[str, str | None, int, int]]:
        """Up to limit orders the query selects, in its sort, after the position (keyset: each
        step is an index range, never OFFSET), as (JSON, shipDate, id, version) in page
        order."""
        p = self.PARAM
        filters: list[str] = []
        params: list[Any] = []
        if query.statuses:
            filters.append(f"status IN ({', '.join([p] * len(query.statuses))})")
            params += query.statuses
        for condition, value in ((f"pet_id = {p}", query.pet_id),
                                 (f"complete = {p}", query.complete),
                                 (f"ship_date >= {p}", query.ship_from),
                                 (f"ship_date < {p}", query.ship_to)):
            if value is not None:
                filters.append(condition)
                params.append(value)
        later = "<" if query.sort.startswith("-") else ">"
        direction = "DESC" if query.sort.startswith("-") else "ASC"
        # Each step: its own conditions, their parameters, its ORDER BY. Orders without a
        # shipDate come after every dated one in both directions (D19), so the shipDate
        # sorts walk the dated orders by (ship_date, id), then the others by id.
        steps: list[tuple[list[str], tuple[Any, ...], str]] = []
        if query.sort in ("id", "-id"):
            steps.append(([f"id {later} {p}"] if after else [],
                          (after.id,) if after else (), f"id {direction}"))
        else:
            if after is None or after.ship_date is not None:
                steps.append(
                    (["ship_date IS NOT NULL"]
                     + ([f"(ship_date, id) {later} ({p}, {p})"] if after else []),
                     (after.ship_date, after.id) if after else (),
                     f"ship_date {direction}, id {direction}"))
            resume = after is not None and after.ship_date is None
            steps.append((["ship_date IS NULL"] + ([f"id {later} {p}"] if resume else []),
                          (after.id,) if resume and after else (), f"id {direction}"))
        rows: list[tuple[str, str | None, int, int]] = []
        for conditions, step_params, order_by in steps:
            where = " AND ".join(filters + conditions)
            rows += self._rows(
                f"SELECT {self.ORDER_JSON}, ship_date, id, version FROM orders"
                f"{' WHERE ' + where if where else ''} ORDER BY {order_by} LIMIT {p}",
                (*params, *step_params, limit - len(rows)))
            if len(rows) >= limit:
                break
        return rows

    def _changes_page(self, after: tuple[int, int] | None, of: str = "orders",
                      more: str = "") -> tuple[str, tuple[Any, ...]]:
        """The SELECT of a page of a feed (of "orders", D26, or "pets", D39) after a
        position (its limit the last parameter), its columns the item's JSON, position and
        id (then more, when given), and its parameters but the limit: a range of the
        table's (position, id) index."""
        p = self.PARAM
        where = f" WHERE (position, id) > ({p}, {p})" if after else ""
        json = self.ORDER_JSON if of == "orders" else self.PET_JSON
        return (f"SELECT {json}, position, id{more} FROM {of}{where} "
                f"ORDER BY position, id LIMIT {p}", after or ())

    def order_changes(self, after: tuple[int, int] | None, limit: int) -> Changes:
        """Up to limit orders changed after the position (position, id), or from the
        beginning, in the order of their last change (D26), with the revision and the eras,
        all read in one snapshot."""
        return self._changes(after, limit, "orders")

    def pet_changes(self, after: tuple[int, int] | None, limit: int) -> Changes:
        """Up to limit pets changed after the position (position, id), or from the
        beginning, in the order of their last change (D39), with the revision and the eras,
        all read in one snapshot."""
        return self._changes(after, limit, "pets")

    def revision(self) -> int:
        """A number that every change to the orders raises, from any process or host."""
        return self._one_value("SELECT value FROM revision")

    def count_orders(self) -> int:
        """How many orders the store holds, whatever their status."""
        return self._one_value("SELECT count(*) FROM orders")

    def count_by_status(self) -> dict[str, int]:
        """How many orders each status holds (every status present, 0 where none)."""
        counts = dict.fromkeys(ORDER_STATUSES, 0)
        for status, count in self._rows("SELECT status, count(*) FROM orders GROUP BY status"):
            counts[str(status)] = int(count)
        return counts

    def cancel_order(self, order_id: int, key_id: int | None, now: str,
                     version: int | None = None, user_id: int | None = None) -> Transition:
        """Cancel the order if it is pending (and at version, when given), in one
        conditional write, recording when and by which key (or console user, D35). Of many
        concurrent calls, exactly one reports changed."""
        by_user = (("cancelled_by_user", user_id),) if user_id is not None else ()
        return self._transition(OrderMove(
            order_id, "status = 'cancelled', last_change = 'cancelled'",
            (("cancelled_at", now), ("cancelled_by", key_id), *by_user),
            "status = 'pending'", version))

    def ship_order(self, order_id: int, ship_date: str,
                   version: int | None = None) -> Transition:
        """Mark the order shipped on ship_date if it is pending (and at version, when
        given), in one conditional write."""
        return self._transition(OrderMove(
            order_id, "status = 'shipped', last_change = 'shipped'",
            (("ship_date", ship_date),), "status = 'pending'", version))

    def complete_order(self, order_id: int, version: int | None = None) -> Transition:
        """Mark the order complete if it is shipped and not yet complete (and at version,
        when given), in one conditional write."""
        return self._transition(OrderMove(
            order_id, f"complete = {self.TRUE}, last_change = 'completed'", (),
            f"status = 'shipped' AND complete = {self.FALSE}", version))

    def order_version(self, order_id: int) -> int | None:
        """The order's version (D25), or None when there is no such order."""
        rows = self._rows(f"SELECT version FROM orders WHERE id = {self.PARAM}", (order_id,))
        return int(rows[0][0]) if rows else None

    def purge_idempotency_keys(self, before: str) -> int:
        """Forget the idempotency keys made before this time; how many went."""
        return self._delete(f"DELETE FROM idempotency_keys WHERE created_at < {self.PARAM}",
                            (before,))

    # pets -------------------------------------------------------------------------------

    def list_pets(self) -> list[dict[str, Any]]:
        """Every pet, by id: {"id", "name"}."""
        return [{"id": pet_id, "name": name}
                for pet_id, name in self._rows("SELECT id, name FROM pets ORDER BY id")]

    def get_pet(self, pet_id: int) -> dict[str, Any] | None:
        """The pet with this id, or None."""
        rows = self._rows(f"SELECT id, name FROM pets WHERE id = {self.PARAM}", (pet_id,))
        return {"id": rows[0][0], "name": rows[0][1]} if rows else None

    # API keys ---------------------------------------------------------------------------

    def _keys_where(self, condition: str, params: tuple[Any, ...]) -> list[ApiKey]:
        rows = self._rows(f"SELECT {KEY_COLUMNS} FROM api_keys WHERE {condition} ORDER BY id",
                          params)
        return [ApiKey(*row) for row in rows]

    def find_key(self, digest: str) -> ApiKey | None:
        """The key whose full digest this is, now or (after a rotation) before; revoked,
        expired or past its grace alike. None when there is none."""
        p = self.PARAM
        found = self._keys_where(f"digest = {p} OR previous_digest = {p}", (digest, digest))
        return found[0] if found else None

    def key_digests(self) -> set[str]:
        """Every digest that may open a key: each unrevoked key's, and the one before its
        last rotation (whose grace check_key judges)."""
        rows = self._rows("SELECT digest, previous_digest FROM api_keys "
                          "WHERE revoked_at IS NULL")
        return {value for row in rows for value in row if value}

    def get_key(self, key_id: int) -> ApiKey | None:
        """The key with this id, or None."""
        found = self._keys_where(f"id = {self.PARAM}", (key_id,))
        return found[0] if found else None

    def list_keys(self) -> list[ApiKey]:
        """Every key, by id."""
        rows = self._rows(f"SELECT {KEY_COLUMNS} FROM api_keys ORDER BY id")
        return [ApiKey(*row) for row in rows]

    def set_plan(
        self, key_id: int, plan: str, per_minute: int | None, per_day: int | None
    ) -> ApiKey | None:
        """Move the key to another plan (enterprise keys carry their own numbers)."""
        p = self.PARAM
        return self._update_key(
            key_id, f"plan = {p}, per_minute = {p}, per_day = {p}", (plan, per_minute, per_day)
        )

    def ban_key(self, key_id: int, until: str) -> ApiKey | None:
        """Ban the key until the given time (ISO 8601 UTC)."""
        return self._update_key(key_id, f"banned_until = {self.PARAM}", (until,))

    def unban_key(self, key_id: int) -> ApiKey | None:
        """Lift the key's ban, if any."""
        return self._update_key(key_id, "banned_until = NULL", ())

    def revoke_key(self, key_id: int, now: str) -> ApiKey | None:
        """Mark the key revoked (once; a second call keeps the first time) and return it."""
        return self._update_key(key_id, f"revoked_at = coalesce(revoked_at, {self.PARAM})", (now,))

    def set_expiry(self, key_id: int, expires_at: str | None) -> ApiKey | None:
        """Make the key expire at that time (ISO 8601 UTC), or never (None)."""
        return self._update_key(key_id, f"expires_at = {self.PARAM}", (expires_at,))

    def set_scope(self, key_id: int, scope: str) -> ApiKey | None:
        """Give the key the scope read (GET only) or write (everything)."""
        return self._update_key(key_id, f"scope = {self.PARAM}", (scope,))

    def rotate_key(self, key_id: int, digest: str, prefix: str,
                   previous_until: str) -> ApiKey | None:
        """Give the key a new secret (its digest and prefix); the secret it had keeps
        working until previous_until, and one kept from an earlier rotation stops now."""
        p = self.PARAM
        # The right-hand sides read the row as it was (SQL's SET), in both databases.
        return self._update_key(
            key_id,
            f"previous_digest = digest, previous_until = {p}, digest = {p}, prefix = {p}",
            (previous_until, digest, prefix))

    def renew_key_secret(self, key_id: int, digest: str, prefix: str) -> ApiKey | None:
        """Put a new secret (its digest and prefix) in place of the key's current one,
        leaving a rotation's old secret and its grace as they are."""
        p = self.PARAM
        return self._update_key(key_id, f"digest = {p}, prefix = {p}", (digest, prefix))

    def _first_held(self, columns: tuple[str, ...], values: Sequence[Any]) -> Any:
        """One of the values that a column of api_keys holds already, or None."""
        for start in range(0, len(values), 500):  # under either database's parameter limit
            chunk = tuple(values[start:start + 500])
            marks = ", ".join([self.PARAM] * len(chunk))
            found = self._rows(
                f"SELECT {', '.join(columns)} FROM api_keys WHERE "
                + " OR ".join(f"{column} IN ({marks})" for column in columns) + " LIMIT 1",
                chunk * len(columns))
            if found:
                return next(value for value in found[0] if value in chunk)
        return None

    def touch_keys(self, uses: dict[int, str]) -> None:
        """Record when keys were last used (key id -> ISO 8601 UTC), never moving a time
        back: one transaction for all of them."""
        p = self.PARAM
        self._write_many(
            f"UPDATE api_keys SET last_used_at = {p} WHERE id = {p} "
            f"AND (last_used_at IS NULL OR last_used_at < {p})",
            [(when, key_id, when) for key_id, when in sorted(uses.items())])

    def import_keys(self, keys: Sequence[ApiKey]) -> int:
        """Store keys exported from another store (digests and metadata, never a secret),
        keeping their ids; all or nothing. Raises DuplicateKey when an id or a digest is
        here already, or twice among them."""
        ids = [key.id for key in keys]
        digests = [d for key in keys for d in (key.digest, key.previous_digest) if d]
        for name, values in (("id", list(ids)), ("digest", list(digests))):
            seen: set[Any] = set()
            for value in values:
                if value in seen:
                    raise DuplicateKey(f"The {name} {_shown(value)} appears twice among "
                                       "the keys.")
                seen.add(value)
        held = self._first_held(("id",), ids)
        if held is not None:
            raise DuplicateKey(f"A key with the id {held} exists already.")
        held = self._first_held(("digest", "previous_digest"), digests)
        if held is not None:
            raise DuplicateKey(f"A key with the digest {_shown(held)} exists already.")
        if keys:
            self._insert_keys(keys)
        return len(keys)

