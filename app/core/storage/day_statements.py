"""The shop's days, as the console's home page draws them (docs/console.md): what both
stores keep alike, written once.

Each UTC day's orders placed and units shipped live in order_days, one row a day, kept by
each store's triggers on orders in the transaction of whatever writes them (either API
version, the console, the CLI, an import, a hand edit), as the inventory's figures are
(D34): the home page reads 30 rows, never the orders. An order counts as placed on the
UTC day the store inserted it (a cancel takes nothing back: it was placed); it and its
units count as shipped on the UTC day of its shipDate (stored as UTC,
"YYYY-MM-DDTHH:MM:SSZ", so its first ten characters) while it is shipped: a shipDate
moved, or an order put back to pending by hand, moves or takes them back. The count of
pending orders sits beside the inventory's units on the revision's row. The owner's
low-stock threshold is one row of shop_settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

LOW_STOCK_DEFAULT = 5  # units available at or below which a pet is running out

# The migration's tables (the same text in both stores), and the revision's new column.
DAYS_SCHEMA = (
    "CREATE TABLE order_days (day TEXT PRIMARY KEY, placed BIGINT NOT NULL DEFAULT 0,"
    " orders_shipped BIGINT NOT NULL DEFAULT 0, units_shipped BIGINT NOT NULL DEFAULT 0)",
    "CREATE TABLE shop_settings (id INTEGER PRIMARY KEY CHECK (id = 1),"
    f" low_stock_at BIGINT NOT NULL DEFAULT {LOW_STOCK_DEFAULT}"
    " CHECK (low_stock_at BETWEEN 0 AND 1000000000))",
    "INSERT INTO shop_settings (id) VALUES (1)",
    "ALTER TABLE revision ADD COLUMN pending_orders BIGINT NOT NULL DEFAULT 0",
    "UPDATE revision SET pending_orders = (SELECT count(*) FROM orders "
    "WHERE status = 'pending')",
)
# The days of the orders held before the migration. Their units shipped, from their
# shipDate. Their placing: the store kept no time of it, but for the orders placed under an
# idempotency key still kept (D23: a day's), whose row holds the time; a pet's key holds a
# pet, whose JSON has no "complete" member (an order's always has one).
DAYS_FILLED = (
    "INSERT INTO order_days (day, placed, orders_shipped, units_shipped) "
    "SELECT day, sum(placed), sum(shipped), sum(units) FROM ("
    " SELECT substr(k.created_at, 1, 10) AS day, count(*) AS placed, 0 AS shipped,"
    " 0 AS units FROM idempotency_keys k JOIN orders o ON o.id = k.order_id"
    " WHERE k.order_json LIKE '%\"complete\":%' GROUP BY substr(k.created_at, 1, 10)"
    " UNION ALL"
    " SELECT substr(ship_date, 1, 10), 0, count(*), coalesce(sum(quantity), 0) FROM orders"
    " WHERE status = 'shipped' AND ship_date IS NOT NULL"
    " GROUP BY substr(ship_date, 1, 10)"
    ") AS counted GROUP BY day"
)
# The one way a day's figures grow (or shrink), upserted: SQLite and PostgreSQL both say
# ON CONFLICT ... DO UPDATE with excluded.
ADD_TO_DAY = (" ON CONFLICT (day) DO UPDATE SET placed = order_days.placed + excluded.placed,"
              " orders_shipped = order_days.orders_shipped + excluded.orders_shipped,"
              " units_shipped = order_days.units_shipped + excluded.units_shipped")


@dataclass(frozen=True)
class LowPet:
    """A tracked pet, not withdrawn, with few units available."""

    id: int
    name: str
    stock: int
    reserved: int
    available: int


class DaysStore(Protocol):
    """The Store's methods for the home page's picture (docs/console.md)."""

    def order_days(self, first: str, last: str) -> list[tuple[str, int, int, int]]:
        """(day, orders placed, orders shipped, units shipped) of each UTC day from first
        to last (YYYY-MM-DD, both included) that the store has figures for, by day."""
        ...

    def low_stock_at(self) -> int:
        """The owner's threshold: a pet with this many units available, or fewer, is
        running out."""
        ...

    def set_low_stock_at(self, units: int) -> None:
        """Keep the owner's threshold (0 to 1,000,000,000, as a pet's stock)."""
        ...

    def low_stock_pets(self, at: int, limit: int) -> tuple[list[LowPet], int]:
        """Up to limit of the tracked pets, not withdrawn, with at most `at` units
        available, fewest first (then by id), and how many there are in all."""
        ...


class DayStatements:
    """DaysStore's methods, the same SQL in both databases. A store gives PARAM, _rows
    and _write_rows (as ConsoleStatements has them)."""

    PARAM: ClassVar[str]

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def order_days(self, first: str, last: str) -> list[tuple[str, int, int, int]]:
        """(day, orders placed, orders shipped, units shipped) of each UTC day from first
        to last that the store has figures for: one range of order_days' primary key."""
        p = self.PARAM
        return [(str(day), int(placed), int(orders), int(units))
                for day, placed, orders, units in self._rows(
                    f"SELECT day, placed, orders_shipped, units_shipped FROM order_days "
                    f"WHERE day >= {p} AND day <= {p} ORDER BY day", (first, last))]

    def low_stock_at(self) -> int:
        """The owner's low-stock threshold."""
        return int(self._rows("SELECT low_stock_at FROM shop_settings")[0][0])

    def set_low_stock_at(self, units: int) -> None:
        """Keep the owner's low-stock threshold."""
        self._write_rows(f"UPDATE shop_settings SET low_stock_at = {self.PARAM} "
                         "RETURNING low_stock_at", (units,))

    def low_stock_pets(self, at: int, limit: int) -> tuple[list[LowPet], int]:
        """The pets running out, fewest units available first, and their number: a read
        of the catalogue's pets (a shop's hundreds or thousands), never of its orders."""
        p = self.PARAM
        running_out = ("FROM pets WHERE stock IS NOT NULL AND NOT withdrawn "
                       f"AND stock - reserved <= {p}")
        rows = self._rows(f"SELECT id, name, stock, reserved, stock - reserved {running_out} "
                          f"ORDER BY stock - reserved, id LIMIT {p}", (at, limit))
        total = int(self._rows(f"SELECT count(*) {running_out}", (at,))[0][0])
        return [LowPet(int(i), str(n), int(s), int(r), int(a)) for i, n, s, r, a in rows], total
