"""The shop at a glance (docs/console.md): each of the last DAYS UTC days' orders placed
and units shipped, and the pets running out, read from what the store keeps
(app/core/storage/day_statements.py), never counted over the orders at a visit."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from app.core.errors import InvalidParameter
from app.core.storage import Store
from app.core.storage.day_statements import LowPet

DAYS = 30
LOW_STOCK_MAX = 1_000_000_000  # a pet's stock's own bound (D32)
LOW_STOCK_SHOWN = 50  # the home page lists this many, and says how many more


@dataclass(frozen=True)
class Day:
    """One UTC day's figures; a day the store has none for is drawn as zero."""

    day: str  # YYYY-MM-DD
    placed: int
    shipped: int


@dataclass(frozen=True)
class LowStock:
    """The pets at or below the owner's threshold, fewest available first."""

    at: int
    pets: list[LowPet]
    total: int


def last_days(store: Store, today: dt.date, days: int = DAYS) -> list[Day]:
    """The days from days-1 before today to today, oldest first, each with its figures
    (zero where the store has none)."""
    first = today - dt.timedelta(days=days - 1)
    kept = {day: (placed, units) for day, placed, _, units
            in store.order_days(first.isoformat(), today.isoformat())}
    out = []
    for n in range(days):
        day = (first + dt.timedelta(days=n)).isoformat()
        placed, shipped = kept.get(day, (0, 0))
        out.append(Day(day, placed, shipped))
    return out


def low_stock(store: Store, limit: int = LOW_STOCK_SHOWN) -> LowStock:
    """The pets running out by the owner's threshold (up to limit of them)."""
    at = store.low_stock_at()
    pets, total = store.low_stock_pets(at, limit)
    return LowStock(at, pets, total)


def set_low_stock_at(store: Store, text: str) -> int:
    """Keep the owner's threshold, as a form writes it: a whole number of units from 0 to
    LOW_STOCK_MAX (a pet's stock's bounds) in plain ASCII digits; raises InvalidParameter
    naming "threshold" for anything else, and keeps nothing."""
    written = text.strip()
    units = int(written) if re.fullmatch(r"[0-9]{1,10}", written) else None
    if units is None or units > LOW_STOCK_MAX:
        raise InvalidParameter("threshold", "type", {"type": "integer", "minimum": 0,
                                                     "maximum": LOW_STOCK_MAX, "text": True})
    store.set_low_stock_at(units)
    return units
