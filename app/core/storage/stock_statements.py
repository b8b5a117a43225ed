"""What the SQLite and PostgreSQL stores say alike about the catalogue and its stock
(D32-D34), written once: the checks and figures of migration 10, a pet's JSON and status as
the database builds them, and the Store's pet methods (StockStatements). Each store gives
the placeholder, a pet's JSON in its dialect, a write transaction, how it names a broken
check, and how it finds a pet by its tags. docs/house/stock.md says how the stock is kept
true."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import orjson

from app.core.errors import (
    IdempotencyKeyReused,
    InvalidParameter,
    PetNotFound,
    PreconditionFailed,
    StockBelowReserved,
    StockNotTracked,
    StockShortfall,
)
from app.core.storage.records import STOCK_MAX, PetQuery, PetWrite
from app.core.storage.statements import IDEMPOTENCY_FIND

# D32-D34 (migration 10 of both stores): what a pet holds besides its name, the units its
# pending orders hold (reserved), whether it was withdrawn, and its version; the checks
# that keep the stock true whoever writes (docs/house/stock.md); and, on the revision's
# row, the inventory's figures, kept by the same triggers that keep the pets' reservations
# (D34: answered from what the store keeps, never a scan of the orders).
PET_CONSTRAINTS = (
    "CONSTRAINT pets_stock_range CHECK (stock BETWEEN 0 AND 1000000000)",
    "CONSTRAINT pets_reserved_not_negative CHECK (reserved >= 0)",
    # NULL (not tracked) passes: the one rule that makes overselling impossible (D33)
    "CONSTRAINT pets_stock_covers_reserved CHECK (reserved <= stock)",
)
STOCK_CONSTRAINTS = ("pets_stock_range", "pets_reserved_not_negative",
                     "pets_stock_covers_reserved")
INVENTORY_COLUMNS = ("pending_units", "shipped_units", "cancelled_units", "stock_on_hand",
                     "stock_reserved", "stock_available")
# The inventory's figures counted anew from the orders and the pets' stock, never from
# what the triggers keep (the migration that adds them, and `petstore pets check`).
_HELD_OF_TRACKED = ("(SELECT coalesce(sum(orders.quantity), 0) FROM orders JOIN pets ON "
                    "pets.id = orders.pet_id WHERE orders.status = 'pending' AND "
                    "pets.stock IS NOT NULL{})")
INVENTORY_COUNTED = (
    "SELECT (SELECT coalesce(sum(quantity), 0) FROM orders WHERE status = 'pending'), "
    "(SELECT coalesce(sum(quantity), 0) FROM orders WHERE status = 'shipped'), "
    "(SELECT coalesce(sum(quantity), 0) FROM orders WHERE status = 'cancelled'), "
    "(SELECT coalesce(sum(stock), 0) FROM pets), "
    + _HELD_OF_TRACKED.format("") + ", "
    "(SELECT coalesce(sum(stock), 0) FROM pets WHERE NOT withdrawn) - "
    + _HELD_OF_TRACKED.format(" AND NOT pets.withdrawn"))
# Each pet's reservation beside the units its pending orders hold, where they differ.
RESERVATIONS_DIFFERING = (
    "SELECT pets.id, pets.reserved, coalesce(held.units, 0) FROM pets LEFT JOIN "
    "(SELECT pet_id, sum(quantity) AS units FROM orders WHERE status = 'pending' "
    "GROUP BY pet_id) AS held ON held.pet_id = pets.id "
    "WHERE pets.reserved <> coalesce(held.units, 0) ORDER BY pets.id")
# A pet's status, derived (D32): the database says it, so a list filtered by status and
# the pets it answers agree.
PET_STATUS = ("CASE WHEN withdrawn THEN 'withdrawn' "
              "WHEN stock IS NULL OR stock > reserved THEN 'available' "
              "WHEN reserved > 0 THEN 'pending' ELSE 'sold' END")
# What a pet has available to order, one figure wherever it is read (D37): what its stock
# has beyond the units pending orders hold, absent when its stock is not tracked (any
# number), and 0 once it is withdrawn, tracked or not (it takes no new order), as the
# inventory's `available` leaves it out. Its stock and reserved stay shown as they are.
PET_AVAILABLE = ("CASE WHEN withdrawn THEN ',\"available\":0' "
                 "ELSE ',\"available\":' || (stock - reserved) END")
# One pet as getPet answers it, built by the database, its members in the API's order:
# id, name, category (absent when none), tags, photoUrls, stock (absent when not
# tracked), reserved, available (PET_AVAILABLE), status. {quote} is the dialect's function
# that gives a text as a JSON string.
PET_JSON = """
    '{{"id":' || id || ',"name":' || {quote}(name)
    || CASE WHEN category IS NULL THEN '' ELSE ',"category":' || {quote}(category) END
    || ',"tags":' || CAST(tags AS TEXT) || ',"photoUrls":' || CAST(photo_urls AS TEXT)
    || coalesce(',"stock":' || stock, '') || ',"reserved":' || reserved
    || coalesce(""" + PET_AVAILABLE + """, '')
    || ',"status":"' || """ + PET_STATUS + """ || '"}}'
"""
PET_WRITABLE = ("name", "category", "tags", "photo_urls", "stock")


def replayed_pet(row: tuple[Any, ...], fingerprint: str) -> PetWrite:
    """The first answer of an idempotency key that wrote a pet (its row holds the pet's id,
    JSON and version where an order's key holds the order's), for a request with this
    fingerprint; raises IdempotencyKeyReused when the key came with another request (of
    another operation too: each operation's fingerprint is its own, app.core.pets)."""
    if row[0] != fingerprint:
        raise IdempotencyKeyReused("request")
    return PetWrite(orjson.loads(row[1]), int(row[2]), replayed=True)


def _pet_values(pet: dict[str, Any]) -> tuple[Any, ...]:
    """A pet to store (API names) as the values of (id, name, category, tags, photo_urls,
    stock), its lists as JSON text."""
    return (pet.get("id"), pet["name"], pet.get("category"),
            orjson.dumps(list(pet.get("tags") or [])).decode(),
            orjson.dumps(list(pet.get("photoUrls") or [])).decode(), pet.get("stock"))


def pet_values(pets: Iterable[dict[str, Any]]) -> Iterator[tuple[Any, ...]]:
    """Each pet to store as the values of (id, name, category, tags, photo_urls, stock)."""
    return (_pet_values(pet) for pet in pets)



# One past the largest id a pet has or an order names (both by index: the pets' key and
# idx_orders_pet_id), for a pet the API adds. When that largest is the largest id there is
# (an order for pet 9223372036854775807, placed before the shop had a catalogue), the
# smallest id past one that no pet has and no order names: no id past it exists, and one
# plus it overflowed (SQLite: a datatype mismatch, PostgreSQL: bigint out of range).
ID_MAX = 2**63 - 1
NEW_PET_ID = (
    f"(SELECT CASE WHEN top < {ID_MAX} THEN top + 1 ELSE ("
    "SELECT min(free) FROM (SELECT 1 AS free UNION ALL SELECT id + 1 FROM pets "
    f"WHERE id < {ID_MAX} UNION ALL SELECT pet_id + 1 FROM orders "
    f"WHERE pet_id < {ID_MAX}) AS c "
    "WHERE free NOT IN (SELECT id FROM pets) "
    "AND free NOT IN (SELECT pet_id FROM orders WHERE pet_id IS NOT NULL)) END "
    "FROM (SELECT max(used) AS top FROM (SELECT coalesce(max(id), 0) AS used FROM pets "
    "UNION ALL SELECT coalesce(max(pet_id), 0) FROM orders) AS ids) AS largest)"
)

class StockStatements:
    """The Store methods of the catalogue and its stock whose SQL is the same in both
    databases."""

    PARAM: ClassVar[str]
    TRUE: ClassVar[str]
    FALSE: ClassVar[str]

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    PET_JSON: ClassVar[str]
    """An SQL expression: one pet's JSON, as getPet answers it, built by the database."""
    JSON_PARAM: ClassVar[str]
    """The placeholder of a stored list (tags, photoUrls), as JSON text."""
    LOCK_WRITERS: ClassVar[str | None]
    """A statement that waits for, and holds to the transaction's end, what every writer
    of orders and pets holds (PostgreSQL's revision row); None where the transaction
    holds it from its start (SQLite's BEGIN IMMEDIATE)."""

    def _transaction(self) -> AbstractContextManager[Any]:
        """A write transaction, committed when the block ends (rolled back when it
        raises), on a connection whose execute(sql, params) gives a cursor (fetchone,
        fetchall, rowcount); the database's unavailability raises StoreUnavailable."""
        raise NotImplementedError

    def _stock_check_failed(self, exc: BaseException) -> str | None:
        """The name of the stock's CHECK constraint (STOCK_CONSTRAINTS) exc says a
        statement broke, or None when it says something else."""
        raise NotImplementedError

    def _any_tag(self, tags: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
        """A condition true for a pet that has any of the tags, and its parameters."""
        raise NotImplementedError

    def get_versioned_pet(self, pet_id: int) -> tuple[dict[str, Any], int] | None:
        """The pet with this id as getPet answers it (D32) and its version, or None."""
        found = self.pet_json(pet_id)
        return (orjson.loads(found[0]), found[1]) if found else None

    def pet_json(self, pet_id: int) -> tuple[str, int] | None:
        """The pet with this id as getPet answers it, as JSON text built by the database,
        and its version, read together; None when there is no such pet."""
        rows = self._rows(f"SELECT {self.PET_JSON}, version FROM pets WHERE id = {self.PARAM}",
                          (pet_id,))
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def pet_version(self, pet_id: int) -> int | None:
        """The pet's version (D32), or None when there is no such pet."""
        rows = self._rows(f"SELECT version FROM pets WHERE id = {self.PARAM}", (pet_id,))
        return int(rows[0][0]) if rows else None

    def page_pets(self, query: PetQuery, after: int | None,
                  limit: int) -> list[tuple[str, int]]:
        """Up to limit pets the query selects, by id, after that id (keyset), as (the
        pet's JSON, its id)."""
        p = self.PARAM
        filters: list[str] = []
        params: list[Any] = []
        if query.statuses:
            filters.append(f"({PET_STATUS}) IN ({', '.join([p] * len(query.statuses))})")
            params += query.statuses
        else:  # withdrawn pets only when asked for by name (D32)
            filters.append("NOT withdrawn")
        if query.tags:
            condition, tag_params = self._any_tag(query.tags)
            filters.append(condition)
            params += tag_params
        if query.category is not None:
            filters.append(f"category = {p}")
            params.append(query.category)
        if after is not None:
            filters.append(f"id > {p}")
            params.append(after)
        return [(str(text), int(pet_id)) for text, pet_id in self._rows(
            f"SELECT {self.PET_JSON}, id FROM pets WHERE {' AND '.join(filters)} "
            f"ORDER BY id LIMIT {p}", (*params, limit))]

    def inventory(self) -> dict[str, int]:
        """The inventory's figures as the store keeps them (D34), read in one statement:
        units of orders by status (pending_units, shipped_units, cancelled_units) and,
        over the pets whose stock is tracked, stock_on_hand, stock_reserved and
        stock_available (which leaves withdrawn pets out)."""
        row = self._rows(f"SELECT {', '.join(INVENTORY_COLUMNS)} FROM revision")[0]
        return {name: int(value) for name, value in zip(INVENTORY_COLUMNS, row, strict=True)}

    def inventory_counted(self) -> dict[str, int]:
        """The inventory's figures counted anew from every order and pet (a scan: for
        `petstore pets check`, never for a request)."""
        row = self._rows(INVENTORY_COUNTED)[0]
        return {name: int(value) for name, value in zip(INVENTORY_COLUMNS, row, strict=True)}

    def reservations_differing(self) -> list[tuple[int, int, int]]:
        """Every pet whose reservation differs from the units its pending orders hold, as
        (id, reserved, held), by id; empty when every reservation is true (D33)."""
        return [(int(a), int(b), int(c)) for a, b, c in self._rows(RESERVATIONS_DIFFERING)]

    def _written_pet(self, tx: Any, pet_id: int) -> PetWrite:
        row = tx.execute(f"SELECT {self.PET_JSON}, version FROM pets WHERE id = {self.PARAM}",
                         (pet_id,)).fetchall()[0]
        return PetWrite(orjson.loads(row[0]), int(row[1]))

    def _keep_key(self, tx: Any, api_key_id: int, idempotency_key: str, fingerprint: str,
                  pet_id: int, written: PetWrite, now: str) -> None:
        """Keep an idempotency key with the pet write's first answer, in its transaction."""
        marks = ", ".join([self.PARAM] * 7)
        tx.execute(f"INSERT INTO idempotency_keys VALUES ({marks})",
                   (api_key_id, idempotency_key, fingerprint, pet_id,
                    orjson.dumps(written.pet).decode(), written.version, now))

    def _first_answer(self, tx: Any, api_key_id: int, idempotency_key: str,
                      fingerprint: str) -> PetWrite | None:
        """The first answer of the key (IdempotencyKeyReused for another request's), or
        None when the key is new; after the writers' lock, so that the key cannot be taken
        meanwhile by a placing or another pet write."""
        if self.LOCK_WRITERS:
            tx.execute(self.LOCK_WRITERS, ())
        row = tx.execute(IDEMPOTENCY_FIND.format(p=self.PARAM),
                         (api_key_id, idempotency_key)).fetchone()
        return None if row is None else replayed_pet(row, fingerprint)

    def add_pet(self, pet: dict[str, Any], api_key_id: int, idempotency_key: str,
                fingerprint: str, now: str) -> PetWrite:
        """Add a pet (name, category, tags, photoUrls, stock: checked already) under an
        idempotency key, both in one transaction; or, when the key wrote before, replay
        its first answer (IdempotencyKeyReused when it came with another request). The
        pet's id is one past the largest any pet has or any order names: orders imported
        before the catalogue may name pets it does not hold, and a new pet must not take
        their units as its own reservation."""
        p, j = self.PARAM, self.JSON_PARAM
        with self._transaction() as tx:
            first = self._first_answer(tx, api_key_id, idempotency_key, fingerprint)
            if first is not None:
                return first
            pet_id = int(tx.execute(
                "INSERT INTO pets (id, name, category, tags, photo_urls, stock) VALUES "
                f"({NEW_PET_ID}, {p}, {p}, {j}, {j}, {p}) "
                "RETURNING id", _pet_values(pet)[1:]).fetchall()[0][0])
            written = self._written_pet(tx, pet_id)
            self._keep_key(tx, api_key_id, idempotency_key, fingerprint, pet_id, written, now)
            return written

    def update_pet(self, pet_id: int, changes: dict[str, Any],
                   version: int | None = None) -> PetWrite:
        """Set some of the pet's writable columns (PET_WRITABLE; tags and photo_urls as
        lists) in one conditional write, only from that version when one is named (If-Match,
        D25, D32). Raises PetNotFound, PreconditionFailed (with the current version), or
        StockBelowReserved when the stock would fall below what pending orders hold."""
        p = self.PARAM
        columns = [column for column in PET_WRITABLE if column in changes]
        if not columns:  # nothing to change: the pet as it is, if at that version
            found = self.pet_json(pet_id)
            if found is None:
                raise PetNotFound(pet_id)
            if version is not None and found[1] != version:
                raise PreconditionFailed(pet_id, found[1], "Pet")
            return PetWrite(orjson.loads(found[0]), found[1])
        assignments = ", ".join(
            f"{c} = {self.JSON_PARAM if c in ('tags', 'photo_urls') else p}" for c in columns)
        values = [orjson.dumps(changes[c]).decode() if c in ("tags", "photo_urls")
                  else changes[c] for c in columns]
        where = f"id = {p}" + (f" AND version = {p}" if version is not None else "")
        params = (*values, pet_id, *((version,) if version is not None else ()))
        try:
            with self._transaction() as tx:
                if tx.execute(f"UPDATE pets SET {assignments} WHERE {where}",
                              params).rowcount == 0:
                    current = tx.execute(f"SELECT version FROM pets WHERE id = {p}",
                                         (pet_id,)).fetchone()
                    if current is None:
                        raise PetNotFound(pet_id)
                    raise PreconditionFailed(pet_id, int(current[0]), "Pet")
                return self._written_pet(tx, pet_id)
        except Exception as exc:
            if self._stock_check_failed(exc) is None or changes.get("stock") is None:
                raise
            held = self._rows(f"SELECT reserved FROM pets WHERE id = {p}", (pet_id,))
            raise StockBelowReserved(pet_id, int(changes["stock"]),
                                     int(held[0][0]) if held else 0) from None

    def adjust_stock(self, pet_id: int, delta: int, api_key_id: int, idempotency_key: str,
                     fingerprint: str, now: str) -> PetWrite:
        """Add delta units to the pet's stock (a receipt, or with a negative delta a
        write-off) in one conditional write, under an idempotency key kept in the same
        transaction; or replay the key's first answer. Raises PetNotFound,
        StockNotTracked, StockBelowReserved (below what pending orders hold, or below 0;
        param delta), or InvalidParameter naming delta past the most a stock holds; each
        keeps nothing, the key included."""
        p = self.PARAM
        with self._transaction() as tx:
            first = self._first_answer(tx, api_key_id, idempotency_key, fingerprint)
            if first is not None:
                return first
            moved = tx.execute(
                f"UPDATE pets SET stock = stock + {p} WHERE id = {p} AND stock IS NOT NULL "
                f"AND stock + {p} >= reserved AND stock + {p} <= {STOCK_MAX}",
                (delta, pet_id, delta, delta)).rowcount
            if moved == 0:
                row = tx.execute(f"SELECT stock, reserved FROM pets WHERE id = {p}",
                                 (pet_id,)).fetchone()
                if row is None:
                    raise PetNotFound(pet_id)
                if row[0] is None:
                    raise StockNotTracked(pet_id)
                if int(row[0]) + delta > STOCK_MAX:
                    raise InvalidParameter("delta", "stock_max", {"maximum": STOCK_MAX})
                raise StockBelowReserved(pet_id, int(row[0]) + delta, int(row[1]), "delta")
            written = self._written_pet(tx, pet_id)
            self._keep_key(tx, api_key_id, idempotency_key, fingerprint, pet_id, written, now)
            return written

    def withdraw_pet(self, pet_id: int) -> bool:
        """Mark the pet withdrawn (once: again changes nothing, not even its version);
        whether there is such a pet."""
        p = self.PARAM
        with self._transaction() as tx:
            if tx.execute(f"UPDATE pets SET withdrawn = {self.TRUE} WHERE id = {p} "
                          f"AND withdrawn = {self.FALSE}", (pet_id,)).rowcount:
                return True
            return tx.execute(f"SELECT 1 FROM pets WHERE id = {p}",
                              (pet_id,)).fetchone() is not None

    def restore_pet(self, pet_id: int) -> bool:
        """Bring a withdrawn pet back into the catalogue: it takes orders again, with the
        stock and the reservation it has now (both kept while it was withdrawn); whether it
        was withdrawn (a pet that was not is left as it is, its version too). Raises
        PetNotFound."""
        p = self.PARAM
        with self._transaction() as tx:
            if tx.execute(f"UPDATE pets SET withdrawn = {self.FALSE} WHERE id = {p} "
                          f"AND withdrawn = {self.TRUE}", (pet_id,)).rowcount:
                return True
            if tx.execute(f"SELECT 1 FROM pets WHERE id = {p}", (pet_id,)).fetchone() is None:
                raise PetNotFound(pet_id)
            return False

    def _held_by_pending(self, pet_ids: Sequence[int]) -> dict[int, int]:
        """The units the pending orders of each of these pets hold (0 for none)."""
        held = dict.fromkeys(pet_ids, 0)
        for start in range(0, len(pet_ids), 500):  # under either database's parameter limit
            chunk = tuple(pet_ids[start:start + 500])
            for pet_id, units in self._rows(
                    "SELECT pet_id, sum(quantity) FROM orders WHERE status = 'pending' "
                    f"AND pet_id IN ({', '.join([self.PARAM] * len(chunk))}) "
                    "GROUP BY pet_id", chunk):
                held[int(pet_id)] = int(units or 0)
        return held

    def _pets_short(self, pets: Sequence[dict[str, Any]]) -> StockBelowReserved | None:
        """The first pet of an import, in its order, whose stock is below what pending
        orders hold, as the exception its import raises; None when none is."""
        tracked = [pet for pet in pets if pet.get("id") is not None
                   and pet.get("stock") is not None]
        held = self._held_by_pending([int(pet["id"]) for pet in tracked])
        for pet in tracked:
            if int(pet["stock"]) < held[int(pet["id"])]:
                return StockBelowReserved(int(pet["id"]), int(pet["stock"]),
                                          held[int(pet["id"])])
        return None

    def _shortfall(self, orders: Sequence[dict[str, Any]], upsert: bool,
                   failed_pet: int | None = None) -> StockShortfall:
        """What an import of orders that a pet's stock did not cover raises: the first pet,
        by id, whose pending orders would hold more than its stock has, and by how many
        units (the triggers' arithmetic, done again over the import and the pets as they
        are without it). failed_pet is the pet whose check failed, for when the import as
        a whole fits (rows taken one by one, a later one releasing units)."""
        incoming: dict[Any, dict[str, Any]] = {}
        for number, order in enumerate(orders):  # with upsert the last row of an id wins
            key = order["id"] if upsert and order.get("id") is not None else ("row", number)
            incoming[key] = order
        replaced: dict[int, tuple[Any, ...]] = {}
        ids = [key for key in incoming if not isinstance(key, tuple)]
        for start in range(0, len(ids), 500):
            chunk = tuple(ids[start:start + 500])
            for row in self._rows("SELECT id, pet_id, quantity, status FROM orders WHERE id "
                                  f"IN ({', '.join([self.PARAM] * len(chunk))})", chunk):
                replaced[int(row[0])] = row
        held: dict[int, int] = {}
        taken: dict[int, int] = {}
        for key, order in incoming.items():
            old = replaced.get(key) if not isinstance(key, tuple) else None
            if old is not None and old[3] == "pending" and old[1] is not None:
                held[old[1]] = held.get(old[1], 0) - int(old[2] or 0)
                if order.get("status") == "shipped":  # shipping takes them out
                    taken[old[1]] = taken.get(old[1], 0) + int(old[2] or 0)
            pet_id = order.get("petId")
            if order.get("status", "pending") == "pending" and pet_id is not None:
                held[pet_id] = held.get(pet_id, 0) + int(order.get("quantity") or 0)
                if old is not None and old[3] == "shipped":  # back from shipped: returned
                    taken[pet_id] = taken.get(pet_id, 0) - int(order.get("quantity") or 0)
        for pet_id in sorted(set(held) | set(taken)):
            rows = self._rows(f"SELECT stock, reserved FROM pets WHERE id = {self.PARAM}",
                              (pet_id,))
            if not rows or rows[0][0] is None:
                continue
            short = (int(rows[0][1]) + held.get(pet_id, 0)) - (int(rows[0][0])
                                                               - taken.get(pet_id, 0))
            if short > 0:
                return StockShortfall(pet_id, short)
        return StockShortfall(failed_pet if failed_pet is not None else 0, 0)

