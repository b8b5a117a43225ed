"""What the SQLite and PostgreSQL stores say alike to tell an order's story on its console
page (docs/console.md, "An order's page"), written once: the indexes its reads take
(migration 15), and the Store's two reads (StoryStatements), from what the store records
already: the order's row, its placing's idempotency key (D23) and the console's audit
lines about it (D35). Nothing is written on any path to tell it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from app.core.storage.console_statements import AUDIT_COLUMNS, AuditEntry
from app.core.storage.statements import ORDER_COLUMNS, order_fields

# An order's page (migration 15; docs/console.md, "An order's page"): its story is read
# from what the store records already, and these two indexes make each of those reads one
# lookup whatever the tables hold: the console's acts on the order (its audit lines, whose
# detail is "order <id>") and the placing's idempotency key (the placing key and time,
# kept KEYS_KEPT, D23). Nothing new is written on any path.
ORDER_STORY_SCHEMA = (
    "CREATE INDEX idx_console_audit_detail ON console_audit (detail, id)",
    "CREATE INDEX idx_idempotency_keys_order_id ON idempotency_keys (order_id)",
)
# The console's acts on an order that its story tells (board.py records each, done, with
# the detail "order <id>"; a refusal's detail says more, and changed nothing).
ORDER_ACTS = ("ship", "complete", "cancel")


@dataclass(frozen=True)
class OrderRecord:
    """What the store records of one order, for its page (D2, D23, D35): the order in the
    API's field names and its version (D25); when and by which API key or console user it
    was cancelled; and, while its idempotency key is kept (D23), when and by which key it
    was placed (None once forgotten, and for an order imported)."""

    order: dict[str, Any]
    version: int
    cancelled_at: str | None
    cancelled_by_key: int | None
    cancelled_by_user: int | None
    placed_at: str | None
    placed_by_key: int | None


class StoryStore(Protocol):
    """The reads of an order's page."""

    def order_record(self, order_id: int) -> OrderRecord | None:
        """What the store records of the order, for its page; None when there is none."""
        ...

    def order_acts(self, order_id: int) -> list[AuditEntry]:
        """The console's acts on the order that changed it (ORDER_ACTS), as the audit log
        keeps them, oldest first."""
        ...


class StoryStatements:
    """StoryStore's methods, the same SQL in both databases. A store gives PARAM and
    _rows (a read)."""

    PARAM: ClassVar[str]

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError


    def order_record(self, order_id: int) -> OrderRecord | None:
        """What the store records of the order, for its page; None when there is none. Two
        lookups of an index each: the order's row, and its placing's idempotency key."""
        p = self.PARAM
        rows = self._rows(f"SELECT {ORDER_COLUMNS}, version, cancelled_at, cancelled_by, "
                          f"cancelled_by_user FROM orders WHERE id = {p}", (order_id,))
        if not rows:
            return None
        row = rows[0]
        placing = self._rows(f"SELECT created_at, api_key_id FROM idempotency_keys "
                             f"WHERE order_id = {p} ORDER BY created_at LIMIT 1", (order_id,))
        placed_at, placed_by = placing[0] if placing else (None, None)
        return OrderRecord(order_fields(row[:6]), int(row[6]), row[7],
                           None if row[8] is None else int(row[8]),
                           None if row[9] is None else int(row[9]), placed_at,
                           None if placed_by is None else int(placed_by))

    def order_acts(self, order_id: int) -> list[AuditEntry]:
        """The console's acts on the order that changed it (ORDER_ACTS), as the audit log
        keeps them, oldest first: one range of its (detail, id) index."""
        p = self.PARAM
        rows = self._rows(f"SELECT {AUDIT_COLUMNS} FROM console_audit WHERE detail = {p} "
                          f"AND action IN ({', '.join([p] * len(ORDER_ACTS))}) ORDER BY id",
                          (f"order {order_id}", *ORDER_ACTS))
        return [AuditEntry(*row) for row in rows]
