"""The PostgreSQL store's imports of orders and pets: each copied (COPY) into a table of the
transaction's own, then moved into its table by one statement, so that the statement
triggers (the revision, and what orders hold of the pets' stock) run once per import, not
once per row: PostgreSQL updates one row many times in one transaction in quadratic time.
PostgresStore.import_orders and import_pets run them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg

# An import: its rows copied into a table of the transaction's own, in their order...
INCOMING_ORDERS = """
    CREATE TEMPORARY TABLE incoming_orders (
        position BIGINT NOT NULL, id BIGINT NOT NULL, pet_id BIGINT, quantity BIGINT,
        ship_date TEXT, complete BOOLEAN NOT NULL, status TEXT NOT NULL
    ) ON COMMIT DROP
"""
COPY_INCOMING = ("COPY incoming_orders (position, id, pet_id, quantity, ship_date, complete, "
                 "status) FROM STDIN")
# ... then inserted by one statement. With upsert, the last row of an id wins and replaces
# the stored order whole (its cancellation too), as SQLite's INSERT OR REPLACE does.
INSERT_INCOMING = ("INSERT INTO orders (id, pet_id, quantity, ship_date, complete, status) "
                   "SELECT id, pet_id, quantity, ship_date, complete, status "
                   "FROM incoming_orders ORDER BY position")
INSERT_INCOMING_UPSERT = (
    "INSERT INTO orders (id, pet_id, quantity, ship_date, complete, status) "
    "SELECT DISTINCT ON (id) id, pet_id, quantity, ship_date, complete, status "
    "FROM incoming_orders ORDER BY id, position DESC "
    "ON CONFLICT (id) DO UPDATE SET pet_id = excluded.pet_id, quantity = excluded.quantity, "
    "ship_date = excluded.ship_date, complete = excluded.complete, status = excluded.status, "
    "cancelled_at = NULL, cancelled_by = NULL, cancelled_by_user = NULL"
)
# An import of pets, as one of orders: copied into a table of the transaction's own, then
# inserted by one statement, so that the statement triggers that count the inventory's
# stock run once (migration 10). With upsert, the last row of an id wins; a pet updated
# keeps what it holds (reserved), its withdrawal and its version, which rises.
INCOMING_PETS = """
    CREATE TEMPORARY TABLE incoming_pets (
        position BIGINT NOT NULL, id BIGINT NOT NULL, name TEXT NOT NULL, category TEXT,
        tags JSONB NOT NULL, photo_urls JSONB NOT NULL, stock BIGINT
    ) ON COMMIT DROP
"""
COPY_INCOMING_PETS = ("COPY incoming_pets (position, id, name, category, tags, photo_urls, "
                      "stock) FROM STDIN")
INSERT_INCOMING_PETS = ("INSERT INTO pets (id, name, category, tags, photo_urls, stock) "
                        "SELECT id, name, category, tags, photo_urls, stock "
                        "FROM incoming_pets ORDER BY position")
INSERT_INCOMING_PETS_UPSERT = (
    "INSERT INTO pets (id, name, category, tags, photo_urls, stock) "
    "SELECT DISTINCT ON (id) id, name, category, tags, photo_urls, stock "
    "FROM incoming_pets ORDER BY id, position DESC "
    "ON CONFLICT (id) DO UPDATE SET name = excluded.name, category = excluded.category, "
    "tags = excluded.tags, photo_urls = excluded.photo_urls, stock = excluded.stock")


def first_duplicate(conn: psycopg.Connection[Any], table: str,
                     ids: Sequence[int | None]) -> int:
    """The first id of an import, in its order, that was in the table already or earlier
    in the import: the one SQLite's row-by-row insert would have stopped at."""
    given = [i for i in ids if i is not None]
    existing = {row[0] for row in conn.execute(
        f"SELECT id FROM {table} WHERE id = ANY(%s)", (given,)).fetchall()}
    seen: set[int] = set()
    for order_id in given:
        if order_id in existing or order_id in seen:
            return order_id
        seen.add(order_id)
    return given[-1] if given else 0
