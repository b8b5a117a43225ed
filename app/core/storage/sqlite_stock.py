"""The SQLite store's side of the catalogue and its stock (D32-D34), kept true by the
database (docs/house/stock.md): its migration 10, tenth of sqlite_schema.py's
MIGRATIONS (PostgreSQL's is in postgres_schema.py), and what SQLiteStore gives
stock_statements.StockStatements (SQLiteStock)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import sqlite_utils

from app.core.errors import DuplicatePet, StockBelowReserved, StoreUnavailable
from app.core.storage.pet_feed_statements import PET_CHANGE_KIND, PET_FEED_SCHEMA
from app.core.storage.records import ORDER_STATUSES
from app.core.storage.stock_statements import (
    INVENTORY_COLUMNS,
    INVENTORY_COUNTED,
    PET_CONSTRAINTS,
    STOCK_CONSTRAINTS,
    pet_values,
)


def _units(*rows: str) -> str:
    """The assignments that add each order row's units to the inventory's count of its
    status (D34), or take them away for a row written -OLD: NEW, or NEW and -OLD."""
    return ", ".join(
        f"{status}_units = {status}_units" + "".join(
            f" {'-' if row.startswith('-') else '+'} ({row.lstrip('-')}.status = '{status}')"
            f" * coalesce({row.lstrip('-')}.quantity, 0)" for row in rows)
        for status in ORDER_STATUSES)


def _stock_counts(*rows: str) -> str:
    """The assignments that add each pet row's share of the inventory's stock figures
    (D34), or take it away for a row written -OLD: only a tracked pet counts, and a
    withdrawn one is not available."""
    shares = {
        "stock_on_hand": "coalesce({r}.stock, 0)",
        "stock_reserved": "CASE WHEN {r}.stock IS NULL THEN 0 ELSE {r}.reserved END",
        "stock_available": "CASE WHEN {r}.stock IS NULL OR {r}.withdrawn THEN 0 "
                           "ELSE {r}.stock - {r}.reserved END",
    }
    return ", ".join(
        f"{column} = {column}" + "".join(
            f" {'-' if row.startswith('-') else '+'} " + share.format(r=row.lstrip("-"))
            for row in rows)
        for column, share in shares.items())


def add_stock_v10(db: sqlite_utils.Database) -> None:
    """The catalogue and its stock (D32-D34, docs/house/stock.md). The pets table is made
    anew with what a pet holds and the checks that keep its stock true (SQLite adds no
    CHECK to an existing table); each pet's reservation is counted from its pending
    orders once, here, and from then on kept by the triggers below, in the transaction of
    whatever changes an order (the API, the group commit, an import, the CLI, a hand edit):
    an order that holds units it may not is refused by pets_stock_covers_reserved, so
    nothing can oversell. The inventory's figures live on the revision's row, kept by the
    same triggers. A pet's version is raised by every change to it: by the order triggers
    themselves, and by pets_update_raises_version (which also raises the revision, so that
    answers kept about pets are refreshed) for any other UPDATE that leaves it as it was."""
    db.execute(f"""
        CREATE TABLE pets_v10 (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            category TEXT,
            tags TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags)),
            photo_urls TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(photo_urls)),
            stock INTEGER,
            reserved INTEGER NOT NULL DEFAULT 0,
            withdrawn INTEGER NOT NULL DEFAULT 0 CHECK (withdrawn IN (0, 1)),
            version INTEGER NOT NULL DEFAULT 1,
            {", ".join(PET_CONSTRAINTS)}
        )""")
    db.execute("INSERT INTO pets_v10 (id, name, reserved) SELECT id, name, (SELECT "
               "coalesce(sum(quantity), 0) FROM orders WHERE pet_id = pets.id AND status = "
               "'pending') FROM pets")
    db.execute("DROP TABLE pets")
    db.execute("ALTER TABLE pets_v10 RENAME TO pets")
    for column in INVENTORY_COLUMNS:
        db.execute(f"ALTER TABLE revision ADD COLUMN {column} INTEGER NOT NULL DEFAULT 0")
    db.execute(f"UPDATE revision SET ({', '.join(INVENTORY_COLUMNS)}) = ({INVENTORY_COUNTED})")
    # The orders' side: what an order holds, released, or shipped. Units held are the
    # quantity of a pending order; an order with no pet or no quantity holds none. An
    # INSERT's are folded into migration 8's trigger, which raises the revision (and now
    # counts the units in the same UPDATE of its row): one statement fewer on the
    # placing path.
    db.execute("DROP TRIGGER orders_insert_takes_position")
    db.execute(f"""
        CREATE TRIGGER orders_insert_takes_position AFTER INSERT ON orders FOR EACH ROW
        BEGIN
            UPDATE revision SET value = value + 1, {_units("NEW")};
            UPDATE orders SET position = (SELECT value FROM revision) WHERE id = NEW.id;
            UPDATE pets SET reserved = reserved + NEW.quantity, version = version + 1
                WHERE id = NEW.pet_id AND NEW.status = 'pending'
                AND NEW.quantity IS NOT NULL;
        END""")
    # An UPDATE that moves an order out of pending releases what it held (shipping takes
    # those units out of the stock as well); one into pending holds (a shipped order put
    # back, by hand, returns its units to the stock first). Changing the pet or the
    # quantity of a pending order is both. The position trigger's nested UPDATE sets none
    # of these columns, so it is not counted twice.
    db.execute(f"""
        CREATE TRIGGER orders_update_moves_stock AFTER UPDATE OF status, pet_id, quantity
        ON orders FOR EACH ROW WHEN OLD.status IS NOT NEW.status
            OR OLD.pet_id IS NOT NEW.pet_id OR OLD.quantity IS NOT NEW.quantity BEGIN
            UPDATE revision SET {_units("NEW", "-OLD")};
            UPDATE pets SET reserved = reserved - OLD.quantity,
                stock = stock - CASE WHEN NEW.status = 'shipped' THEN OLD.quantity ELSE 0 END,
                version = version + 1
                WHERE id = OLD.pet_id AND OLD.status = 'pending'
                AND OLD.quantity IS NOT NULL;
            UPDATE pets SET reserved = reserved + NEW.quantity,
                stock = stock + CASE WHEN OLD.status = 'shipped' THEN NEW.quantity ELSE 0 END,
                version = version + 1
                WHERE id = NEW.pet_id AND NEW.status = 'pending'
                AND NEW.quantity IS NOT NULL;
        END""")
    db.execute(f"""
        CREATE TRIGGER orders_delete_releases_stock AFTER DELETE ON orders FOR EACH ROW BEGIN
            UPDATE revision SET {_units("-OLD")};
            UPDATE pets SET reserved = reserved - OLD.quantity, version = version + 1
                WHERE id = OLD.pet_id AND OLD.status = 'pending'
                AND OLD.quantity IS NOT NULL;
        END""")
    # The pets' side: the inventory's stock figures, the version and the revision.
    db.execute(f"""
        CREATE TRIGGER pets_update_counts_stock AFTER UPDATE OF stock, reserved, withdrawn
        ON pets FOR EACH ROW WHEN OLD.stock IS NOT NULL OR NEW.stock IS NOT NULL BEGIN
            UPDATE revision SET {_stock_counts("NEW", "-OLD")};
        END""")
    db.execute("""
        CREATE TRIGGER pets_update_raises_version AFTER UPDATE ON pets FOR EACH ROW
        WHEN NEW.version = OLD.version BEGIN
            UPDATE revision SET value = value + 1;
            UPDATE pets SET version = OLD.version + 1 WHERE id = NEW.id;
        END""")
    # A new pet holds what pending orders that name its id hold already (an import of
    # pets after their orders), and the stock must cover it.
    db.execute(f"""
        CREATE TRIGGER pets_insert_counts_stock AFTER INSERT ON pets FOR EACH ROW BEGIN
            UPDATE revision SET value = value + 1, {_stock_counts("NEW")};
            UPDATE pets SET reserved = ({HELD_BY_NEW}), version = version + 1
                WHERE id = NEW.id AND reserved <> ({HELD_BY_NEW});
        END""")
    db.execute(f"""
        CREATE TRIGGER pets_delete_counts_stock AFTER DELETE ON pets FOR EACH ROW BEGIN
            UPDATE revision SET value = value + 1, {_stock_counts("-OLD")};
        END""")


def add_pet_feed_v18(db: sqlite_utils.Database) -> None:
    """The feed of changed pets (D39): each pet's position and the kind of its last
    change. Any UPDATE of a pet, whoever makes it (the API, an order's trigger, the
    console, an import, a hand edit), raises the revision and gives the pet that value with
    the kind (PET_CHANGE_KIND), in its transaction (SQLite's write lock makes that commit
    order); its version is raised too when the UPDATE left it as it was (the trigger it
    replaces, pets_update_raises_version). An UPDATE that sets the position itself is
    the nested one, and takes none. A new pet takes its position in the trigger that
    counts its stock, the kind "created"."""
    db.execute("DROP TRIGGER pets_update_raises_version")
    db.execute("DROP TRIGGER pets_insert_counts_stock")
    for statement in PET_FEED_SCHEMA:
        db.execute(statement)
    db.execute(f"""
        CREATE TRIGGER pets_update_takes_position AFTER UPDATE ON pets FOR EACH ROW
        WHEN NEW.position = OLD.position BEGIN
            UPDATE revision SET value = value + 1;
            UPDATE pets SET position = (SELECT value FROM revision),
                version = CASE WHEN NEW.version = OLD.version THEN OLD.version + 1
                               ELSE NEW.version END,
                last_change = {PET_CHANGE_KIND} WHERE id = NEW.id;
        END""")
    db.execute(f"""
        CREATE TRIGGER pets_insert_counts_stock AFTER INSERT ON pets FOR EACH ROW BEGIN
            UPDATE revision SET value = value + 1, {_stock_counts("NEW")};
            UPDATE pets SET reserved = ({HELD_BY_NEW}),
                version = version + (reserved <> ({HELD_BY_NEW})),
                position = (SELECT value FROM revision), last_change = 'created'
                WHERE id = NEW.id;
        END""")


HELD_BY_NEW = ("SELECT coalesce(sum(quantity), 0) FROM orders WHERE pet_id = NEW.id "
               "AND status = 'pending'")


# What placing an order needs to know of its pet, in one statement: whether the shop keeps a
# catalogue at all, and the pet's withdrawn flag and available units (NULL when the
# catalogue does not hold it; the units NULL when its stock is not tracked).
PET_FOR_PLACING = ("SELECT EXISTS (SELECT 1 FROM pets), pets.withdrawn, "
                   "pets.stock - pets.reserved FROM (SELECT 1) LEFT JOIN pets ON pets.id = ?")
UPSERT_PETS = (" ON CONFLICT (id) DO UPDATE SET name = excluded.name, category = "
               "excluded.category, tags = excluded.tags, photo_urls = excluded.photo_urls, "
               "stock = excluded.stock")


class SQLiteStock:
    """SQLiteStore's part in the pet methods that both stores share, and its import of
    pets."""

    def _write(self) -> AbstractContextManager[sqlite_utils.Database]:
        raise NotImplementedError

    @contextmanager
    def _transaction(self) -> Iterator[sqlite_utils.Database]:
        try:
            with self._write() as db:
                yield db
        except sqlite3.OperationalError as exc:
            raise StoreUnavailable(f"SQLite: {exc}") from exc

    def _stock_check_failed(self, exc: BaseException) -> str | None:
        if isinstance(exc, sqlite3.IntegrityError):
            return next((name for name in STOCK_CONSTRAINTS if name in str(exc)), None)
        return None

    def _any_tag(self, tags: Sequence[str]) -> tuple[str, tuple[Any, ...]]:
        return (f"EXISTS (SELECT 1 FROM json_each(pets.tags) WHERE json_each.value IN "
                f"({', '.join('?' * len(tags))}))", tuple(tags))

    def import_pets(self, pets: Iterable[dict[str, Any]], upsert: bool = False) -> int:
        """Insert (or with upsert, update) pets in one transaction; all or nothing. Raises
        DuplicatePet for an id held already (without upsert), StockBelowReserved for a
        stock below what pending orders of the pet hold."""
        sql = ("INSERT INTO pets (id, name, category, tags, photo_urls, stock) "
               "VALUES (?, ?, ?, ?, ?, ?)" + (UPSERT_PETS if upsert else ""))
        count = 0
        with self._transaction() as db:
            for values in pet_values(pets):
                try:
                    db.execute(sql, values)
                except sqlite3.IntegrityError as exc:
                    if "UNIQUE" in str(exc):
                        raise DuplicatePet(values[0]) from None
                    if self._stock_check_failed(exc) is None:
                        raise
                    held = db.execute("SELECT coalesce(sum(quantity), 0) FROM orders "
                                      "WHERE pet_id = ? AND status = 'pending'",
                                      (values[0],)).fetchone()[0]
                    raise StockBelowReserved(values[0] or 0, values[5], int(held)) from None
                count += 1
        return count
