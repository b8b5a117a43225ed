"""The SQLite store's schema: its migrations in order, each run once (sqlite.py's migrate),
as postgres_schema.py holds PostgreSQL's; a new migration goes at the end of both lists.
What both stores create alike is written once in statements.py and its siblings."""

from __future__ import annotations

from collections.abc import Callable

import sqlite_utils

from app.core.storage.console_statements import (
    CONSOLE_D36_SCHEMA,
    CONSOLE_FORMS_SCHEMA,
    CONSOLE_RECOVERY_SCHEMA,
    CONSOLE_ROLES_SCHEMA,
    CONSOLE_SCHEMA,
)
from app.core.storage.day_statements import ADD_TO_DAY, DAYS_FILLED, DAYS_SCHEMA
from app.core.storage.sqlite_stock import add_pet_feed_v18, add_stock_v10
from app.core.storage.statements import (
    FEED_SCHEMA,
    IDEMPOTENCY_KEYS,
    KEY_LIFECYCLE,
    LIST_INDEXES,
)
from app.core.storage.story_statements import ORDER_STORY_SCHEMA
from app.core.storage.webhook_statements import WEBHOOK_SCHEMA


def _create_schema_v1(db: sqlite_utils.Database) -> None:
    db["api_keys"].create(  # type: ignore[union-attr]
        {
            "id": int,
            "prefix": str,
            "digest": str,
            "name": str,
            "plan": str,
            "per_minute": int,
            "per_day": int,
            "created_at": str,
            "revoked_at": str,
        },
        pk="id",
        not_null={"prefix", "digest", "name", "plan", "created_at"},
    )
    db["api_keys"].create_index(["digest"], unique=True)  # type: ignore[union-attr]
    # sqlite-utils' create() has no CHECK constraints; the status rule is the database's
    # own guard against a bad import or a hand-edited row.
    db.execute(
        """
        CREATE TABLE orders (
            id INTEGER PRIMARY KEY,
            pet_id INTEGER,
            quantity INTEGER,
            ship_date TEXT,
            complete INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL DEFAULT 'pending'
                CHECK (status IN ('pending', 'shipped', 'cancelled')),
            cancelled_at TEXT,
            cancelled_by INTEGER REFERENCES api_keys(id)
        )
        """
    )
    db["orders"].create_index(["status"])  # type: ignore[union-attr]


def _add_bans_v2(db: sqlite_utils.Database) -> None:
    db["api_keys"].add_column("banned_until", str)  # type: ignore[union-attr]


def _add_pets_v3(db: sqlite_utils.Database) -> None:
    db["pets"].create({"id": int, "name": str}, pk="id", not_null={"name"})  # type: ignore[union-attr]


def _add_revision_v4(db: sqlite_utils.Database) -> None:
    """A counter that every change to the orders raises, whoever writes (the API, the CLI,
    another worker, a hand edit): lists cached by revision are never stale."""
    db.execute("CREATE TABLE revision (id INTEGER PRIMARY KEY CHECK (id = 1),"
               " value INTEGER NOT NULL)")
    db.execute("INSERT INTO revision VALUES (1, 0)")
    for event in ("INSERT", "UPDATE", "DELETE"):
        db.execute(f"CREATE TRIGGER orders_{event.lower()}_raises_revision AFTER {event} ON"
                   " orders BEGIN UPDATE revision SET value = value + 1; END")


def _add_list_indexes_v5(db: sqlite_utils.Database) -> None:
    """An index for each filter and sort of the v2 list (D19), so that every page is an
    index range: each ends with the id, the tie-break of every sort."""
    for statement in LIST_INDEXES:
        db.execute(statement)


def _add_key_lifecycle_v6(db: sqlite_utils.Database) -> None:
    """Expiry, scope, last use and rotation of keys (D21)."""
    for statement in KEY_LIFECYCLE:
        db.execute(statement)


def _add_versions_and_idempotency_keys_v7(db: sqlite_utils.Database) -> None:
    """Each order's version (D25), raised by any UPDATE that leaves it as it was (the
    service's own raise it themselves), and the idempotency keys of placed orders (D23)."""
    db.execute("ALTER TABLE orders ADD COLUMN version INTEGER NOT NULL DEFAULT 1")
    db.execute("CREATE TRIGGER orders_update_raises_version AFTER UPDATE ON orders "
               "FOR EACH ROW WHEN NEW.version = OLD.version "
               "BEGIN UPDATE orders SET version = OLD.version + 1 WHERE id = NEW.id; END")
    for statement in IDEMPOTENCY_KEYS:
        db.execute(statement)


def _add_positions_v8(db: sqlite_utils.Database) -> None:
    """Each order's position in the feed of changes (D26): every INSERT or UPDATE of an
    order, whoever makes it, raises the revision and gives the order that value, in its
    transaction (SQLite's write lock makes that commit order). The trigger of migration 7
    that raised a version is folded into the UPDATE's: one nested UPDATE sets both. An
    UPDATE that sets the position itself is that nested one, and takes none."""
    db.execute("ALTER TABLE orders ADD COLUMN position INTEGER NOT NULL DEFAULT 0")
    for old in ("orders_insert_raises_revision", "orders_update_raises_revision",
                "orders_update_raises_version"):
        db.execute(f"DROP TRIGGER {old}")
    db.execute("CREATE TRIGGER orders_insert_takes_position AFTER INSERT ON orders "
               "FOR EACH ROW BEGIN UPDATE revision SET value = value + 1; "
               "UPDATE orders SET position = (SELECT value FROM revision) WHERE id = NEW.id; "
               "END")
    db.execute("CREATE TRIGGER orders_update_takes_position AFTER UPDATE ON orders "
               "FOR EACH ROW WHEN NEW.position = OLD.position "
               "BEGIN UPDATE revision SET value = value + 1; "
               "UPDATE orders SET position = (SELECT value FROM revision), version = "
               "CASE WHEN NEW.version = OLD.version THEN OLD.version + 1 ELSE NEW.version END"
               " WHERE id = NEW.id; END")
    for statement in FEED_SCHEMA:
        db.execute(statement)
    db.execute("INSERT INTO feed_eras VALUES (0, lower(hex(randomblob(8))))")


def _add_webhooks_v9(db: sqlite_utils.Database) -> None:
    """Webhooks (D28): each order's kind of last change, which the UPDATE trigger of
    migration 8 now also writes ("changed" for an UPDATE that leaves it as it was), the
    endpoints and the log of attempts."""
    for statement in WEBHOOK_SCHEMA:
        db.execute(statement.format(id="INTEGER PRIMARY KEY"))
    db.execute("DROP TRIGGER orders_update_takes_position")
    db.execute("CREATE TRIGGER orders_update_takes_position AFTER UPDATE ON orders "
               "FOR EACH ROW WHEN NEW.position = OLD.position "
               "BEGIN UPDATE revision SET value = value + 1; "
               "UPDATE orders SET position = (SELECT value FROM revision), version = "
               "CASE WHEN NEW.version = OLD.version THEN OLD.version + 1 ELSE NEW.version END,"
               " last_change = CASE WHEN NEW.last_change = OLD.last_change THEN 'changed' "
               "ELSE NEW.last_change END WHERE id = NEW.id; END")


# The console's migration (D35). It is number 11 on main, after the stock's 10: a branch
# without the stock has it as its 10th; whoever merges keeps the two in that order.
def _add_console_v11(db: sqlite_utils.Database) -> None:
    """The console (D35): its users, sessions and audit log, and the user who cancelled an
    order from it."""
    for statement in CONSOLE_SCHEMA:
        db.execute(statement.format(id="INTEGER PRIMARY KEY"))


def _add_console_forms_v12(db: sqlite_utils.Database) -> None:
    """The console's forms that show a secret once, each taken by its key (D35)."""
    for statement in CONSOLE_FORMS_SCHEMA:
        db.execute(statement)


def _add_console_d36_v13(db: sqlite_utils.Database) -> None:
    """A user's throttle epoch and a session's pending TOTP secret (D36)."""
    for statement in CONSOLE_D36_SCHEMA:
        db.execute(statement)


def _add_console_roles_v14(db: sqlite_utils.Database) -> None:
    """A user's role, owner or staff; the users before it are owners (D38)."""
    for statement in CONSOLE_ROLES_SCHEMA:
        db.execute(statement)


def _add_order_story_v15(db: sqlite_utils.Database) -> None:
    """The indexes an order's page reads its story by (docs/console.md, "An order's
    page")."""
    for statement in ORDER_STORY_SCHEMA:
        db.execute(statement)


def _shipped_share(row: str, sign: str) -> str:
    """The statement that adds (sign "") or takes back (sign "-") a shipped order row's
    order and units on its shipDate's UTC day; nothing for a row that is not shipped."""
    return (f"INSERT INTO order_days (day, placed, orders_shipped, units_shipped) SELECT "
            f"substr({row}.ship_date, 1, 10), 0, {sign}1, {sign}coalesce({row}.quantity, 0) "
            f"WHERE {row}.status = 'shipped' AND {row}.ship_date IS NOT NULL{ADD_TO_DAY};")


def _add_order_days_v16(db: sqlite_utils.Database) -> None:
    """The home page's days (day_statements.py): each UTC day's orders placed
    and units shipped, and the count of pending orders, kept by these triggers in the
    transaction of whatever changes an order, filled once here from the orders held; and
    the owner's low-stock threshold. An UPDATE that leaves status, quantity and shipDate
    as they were (a complete, migration 8's nested UPDATE) fires nothing."""
    for statement in (*DAYS_SCHEMA, DAYS_FILLED):
        db.execute(statement)
    db.execute(f"""
        CREATE TRIGGER orders_insert_tallies_days AFTER INSERT ON orders FOR EACH ROW BEGIN
            INSERT INTO order_days (day, placed, orders_shipped, units_shipped)
                VALUES (strftime('%Y-%m-%d', 'now'), 1, 0, 0){ADD_TO_DAY};
            {_shipped_share("NEW", "")}
            UPDATE revision SET pending_orders = pending_orders + 1
                WHERE NEW.status = 'pending';
        END""")
    db.execute(f"""
        CREATE TRIGGER orders_update_tallies_days AFTER UPDATE OF status, quantity, ship_date
        ON orders FOR EACH ROW WHEN OLD.status IS NOT NEW.status
            OR OLD.quantity IS NOT NEW.quantity OR OLD.ship_date IS NOT NEW.ship_date BEGIN
            {_shipped_share("OLD", "-")}
            {_shipped_share("NEW", "")}
            UPDATE revision SET pending_orders = pending_orders
                + (NEW.status = 'pending') - (OLD.status = 'pending')
                WHERE OLD.status IS NOT NEW.status;
        END""")
    db.execute(f"""
        CREATE TRIGGER orders_delete_tallies_days AFTER DELETE ON orders FOR EACH ROW BEGIN
            {_shipped_share("OLD", "-")}
            UPDATE revision SET pending_orders = pending_orders - 1
                WHERE OLD.status = 'pending';
        END""")


def _add_console_recovery_codes_v17(db: sqlite_utils.Database) -> None:
    """The console users' recovery codes, as digests (D38)."""
    for statement in CONSOLE_RECOVERY_SCHEMA:
        db.execute(statement)


MIGRATIONS: tuple[Callable[[sqlite_utils.Database], None], ...] = (
    _create_schema_v1,
    _add_bans_v2,
    _add_pets_v3,
    _add_revision_v4,
    _add_list_indexes_v5,
    _add_key_lifecycle_v6,
    _add_versions_and_idempotency_keys_v7,
    _add_positions_v8,
    _add_webhooks_v9,
    add_stock_v10,
    _add_console_v11,
    _add_console_forms_v12,
    _add_console_d36_v13,
    _add_console_roles_v14,
    _add_order_story_v15,
    _add_order_days_v16,
    _add_console_recovery_codes_v17,
    add_pet_feed_v18,
)
SCHEMA_VERSION = len(MIGRATIONS)
