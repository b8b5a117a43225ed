"""The PostgreSQL store's schema: its migrations, in order, each run once in a transaction
of its own by PostgresStore.migrate (app/core/storage/postgres.py). They keep the SQLite
store's tables, versions and rules (app/core/storage/sqlite_schema.py); what both share is
written once in statements.py. A new migration goes at the end of MIGRATIONS here and of
the SQLite store's list, with the same number."""

from __future__ import annotations

from app.core.storage.console_statements import (
    CONSOLE_D36_SCHEMA,
    CONSOLE_FORMS_SCHEMA,
    CONSOLE_RECOVERY_SCHEMA,
    CONSOLE_ROLES_SCHEMA,
    CONSOLE_SCHEMA,
)
from app.core.storage.day_statements import ADD_TO_DAY, DAYS_FILLED, DAYS_SCHEMA
from app.core.storage.pet_feed_statements import PET_CHANGE_KIND, PET_FEED_SCHEMA
from app.core.storage.statements import (
    FEED_SCHEMA,
    IDEMPOTENCY_KEYS,
    KEY_LIFECYCLE,
    LIST_INDEXES,
)
from app.core.storage.stock_statements import (
    INVENTORY_COLUMNS,
    INVENTORY_COUNTED,
    PET_CONSTRAINTS,
)
from app.core.storage.story_statements import ORDER_STORY_SCHEMA
from app.core.storage.webhook_statements import WEBHOOK_SCHEMA

# The row trigger's function of migration 8 (each order's position, its version raised),
# which migration 9 replaces with one that also writes the kind of the last change.
_TAKE_POSITION = """take_order_position() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        held text := current_setting('petstore.position', true);
        mine text := pg_current_xact_id()::text || ':';
        taken bigint;
    BEGIN
        IF TG_OP = 'UPDATE' AND NEW.version = OLD.version THEN
            NEW.version := OLD.version + 1;
        END IF;{last_change}
        IF held LIKE mine || '%' THEN
            taken := substr(held, length(mine) + 1)::bigint;
        ELSE
            UPDATE revision SET value = value + 1 RETURNING value INTO taken;
            PERFORM set_config('petstore.position', mine || taken, true);
        END IF;
        NEW.position := taken;
        RETURN NEW;
    END $$"""
_LAST_CHANGE = """
        IF TG_OP = 'UPDATE' AND NEW.last_change = OLD.last_change THEN
            NEW.last_change := 'changed';
        END IF;"""



# D33, D34 (migration 10): what an order holds, kept per statement. Each statement that
# changes orders (a placing, a move, an import of a million rows, a hand edit) runs one of
# these once, with every row it changed in its transition tables: per pet, one UPDATE of
# the pet (reserved, and for shipping the stock), and one of the revision's row (the
# inventory's figures). A row trigger would update a pet once per order, and PostgreSQL
# updates a row many times in one transaction in quadratic time (each update walks the
# row's chain of versions): 20,000 pending orders of one pet took 18 s that way.
# A statement whose orders name one pet (a placing, a move: the hot paths) updates it with
# plain values, the cheapest UPDATE there is; one of many pets groups them. The pets' own
# statement triggers stand aside for an UPDATE made here (WHEN pg_trigger_depth() = 0):
# the revision is locked already, and each pet row this UPDATE returns says what its
# change moved of the stock's figures.
_HOLD_STOCK = """
    CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        first_pet bigint; last_pet bigint; units_held bigint; units_taken bigint;
        pending_delta bigint; shipped_delta bigint; cancelled_delta bigint;
        on_hand_delta bigint := 0; reserved_delta bigint := 0; available_delta bigint := 0;
        tracked boolean; gone boolean;{declare}
    BEGIN{fast}
        SELECT min(pet_id), max(pet_id), coalesce(sum(held), 0), coalesce(sum(taken), 0)
            INTO first_pet, last_pet, units_held, units_taken
            FROM ({moved}) AS moved WHERE pet_id IS NOT NULL AND quantity_known;
        IF first_pet = last_pet THEN
            IF units_held <> 0 OR units_taken <> 0 THEN
                UPDATE pets SET reserved = reserved + units_held,
                    stock = stock - units_taken, version = version + 1 WHERE id = first_pet
                    RETURNING stock IS NOT NULL, withdrawn INTO tracked, gone;
                IF tracked THEN
                    on_hand_delta := -units_taken;
                    reserved_delta := units_held;
                    available_delta := CASE WHEN gone THEN 0
                                            ELSE -units_taken - units_held END;
                END IF;
            END IF;
        ELSIF first_pet IS NOT NULL THEN
            WITH per_pet AS (
                SELECT pet_id, sum(held)::bigint AS held, sum(taken)::bigint AS taken
                FROM ({moved}) AS moved WHERE pet_id IS NOT NULL AND quantity_known
                GROUP BY pet_id HAVING sum(held) <> 0 OR sum(taken) <> 0),
            pets_moved AS (
                UPDATE pets SET reserved = reserved + per_pet.held,
                    stock = stock - per_pet.taken, version = version + 1
                FROM per_pet WHERE pets.id = per_pet.pet_id
                RETURNING pets.stock IS NOT NULL AS tracked, pets.withdrawn, per_pet.held,
                    per_pet.taken)
            SELECT coalesce(sum(-pets_moved.taken) FILTER (WHERE pets_moved.tracked), 0),
                coalesce(sum(pets_moved.held) FILTER (WHERE pets_moved.tracked), 0),
                coalesce(sum(-pets_moved.taken - pets_moved.held)
                         FILTER (WHERE pets_moved.tracked AND NOT pets_moved.withdrawn), 0)
                INTO on_hand_delta, reserved_delta, available_delta FROM pets_moved;
        END IF;
        SELECT coalesce(sum(units) FILTER (WHERE status = 'pending'), 0),
            coalesce(sum(units) FILTER (WHERE status = 'shipped'), 0),
            coalesce(sum(units) FILTER (WHERE status = 'cancelled'), 0)
            INTO pending_delta, shipped_delta, cancelled_delta FROM ({units}) AS units;
        IF pending_delta <> 0 OR shipped_delta <> 0 OR cancelled_delta <> 0
                OR on_hand_delta <> 0 OR reserved_delta <> 0 OR available_delta <> 0 THEN
            UPDATE revision SET pending_units = pending_units + pending_delta,
                shipped_units = shipped_units + shipped_delta,
                cancelled_units = cancelled_units + cancelled_delta,
                stock_on_hand = stock_on_hand + on_hand_delta,
                stock_reserved = stock_reserved + reserved_delta,
                stock_available = stock_available + available_delta;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER {name} AFTER {event} ON orders REFERENCING {tables}
        FOR EACH STATEMENT EXECUTE FUNCTION {name}();
"""
# Each order's units, with their sign: + for the rows a statement leaves, - for those it
# replaced or removed.
_UNITS = "SELECT status, {sign}quantity AS units FROM {rows}"
_HELD = ("SELECT pet_id, {sign}quantity AS held, 0 AS taken, quantity IS NOT NULL AS "
         "quantity_known FROM {rows} WHERE status = 'pending'")
# Shipping takes out of the stock what the order held; a shipped order put back to pending
# (by hand) returns its units first.
_SHIPPED = (" UNION ALL SELECT b.pet_id, 0, b.quantity, b.quantity IS NOT NULL "
            "FROM before_rows b JOIN after_rows a ON a.id = b.id "
            "WHERE b.status = 'pending' AND a.status = 'shipped'"
            " UNION ALL SELECT a.pet_id, 0, -a.quantity, a.quantity IS NOT NULL "
            "FROM before_rows b JOIN after_rows a ON a.id = b.id "
            "WHERE b.status = 'shipped' AND a.status = 'pending'")


def _hold_stock(name: str, event: str, tables: str, moved: str, units: str,
                declare: str = "", fast: str = "") -> str:
    return _HOLD_STOCK.format(name=name, event=event, tables=tables, moved=moved,
                              units=units, declare=declare, fast=fast)


# An UPDATE of one order (a cancel, a ship, a complete: the moves) is worked out from its
# two rows with plain values: what it held is released from its pet (shipping takes the
# units out of the stock too), what it holds now is held (a shipped order put back to
# pending returns its units first), and a change that moves none of that (a complete, a
# ship date) touches no pet and no figure.
# An INSERT whose pending orders name one pet at most (a placing) is counted in one read of
# its rows.
_ONE_PET = """
        SELECT min(pet_id) FILTER (WHERE holds), max(pet_id) FILTER (WHERE holds),
                coalesce(sum(quantity) FILTER (WHERE holds), 0),
                coalesce(sum(quantity) FILTER (WHERE status = 'pending'), 0),
                coalesce(sum(quantity) FILTER (WHERE status = 'shipped'), 0),
                coalesce(sum(quantity) FILTER (WHERE status = 'cancelled'), 0)
            INTO first_pet, last_pet, units_held, pending_delta, shipped_delta,
                cancelled_delta
            FROM (SELECT pet_id, quantity, status, status = 'pending' AND pet_id IS NOT NULL
                         AND quantity IS NOT NULL AS holds FROM after_rows) AS inserted;
        IF first_pet IS NULL OR first_pet = last_pet THEN
            IF units_held <> 0 THEN
                UPDATE pets SET reserved = reserved + units_held, version = version + 1
                    WHERE id = first_pet
                    RETURNING stock IS NOT NULL, withdrawn INTO tracked, gone;
                IF tracked THEN
                    reserved_delta := units_held;
                    available_delta := CASE WHEN gone THEN 0 ELSE -units_held END;
                END IF;
            END IF;
            IF pending_delta <> 0 OR shipped_delta <> 0 OR cancelled_delta <> 0 THEN
                UPDATE revision SET pending_units = pending_units + pending_delta,
                    shipped_units = shipped_units + shipped_delta,
                    cancelled_units = cancelled_units + cancelled_delta,
                    stock_reserved = stock_reserved + reserved_delta,
                    stock_available = stock_available + available_delta;
            END IF;
            RETURN NULL;
        END IF;"""
_ONE_MOVE_DECLARE = """
        moves int; old_pet bigint; old_units bigint; old_status text;
        new_pet bigint; new_units bigint; new_status text;"""
_ONE_MOVE = """
        SELECT count(*), min(b.pet_id), min(b.quantity), min(b.status), min(a.pet_id),
                min(a.quantity), min(a.status)
            INTO moves, old_pet, old_units, old_status, new_pet, new_units, new_status
            FROM before_rows b JOIN after_rows a ON a.id = b.id;
        IF moves = 1 AND (SELECT count(*) FROM after_rows) = 1 THEN
            IF old_status = new_status AND old_pet IS NOT DISTINCT FROM new_pet
                    AND old_units IS NOT DISTINCT FROM new_units THEN
                RETURN NULL;
            END IF;
            IF old_status = 'pending' AND old_pet IS NOT NULL AND old_units IS NOT NULL THEN
                units_taken := CASE WHEN new_status = 'shipped' THEN old_units ELSE 0 END;
                UPDATE pets SET reserved = reserved - old_units, stock = stock - units_taken,
                    version = version + 1 WHERE id = old_pet
                    RETURNING stock IS NOT NULL, withdrawn INTO tracked, gone;
                IF tracked THEN
                    on_hand_delta := -units_taken;
                    reserved_delta := -old_units;
                    available_delta := CASE WHEN gone THEN 0
                                            ELSE old_units - units_taken END;
                END IF;
            END IF;
            tracked := false;
            IF new_status = 'pending' AND new_pet IS NOT NULL AND new_units IS NOT NULL THEN
                units_taken := CASE WHEN old_status = 'shipped' THEN -new_units ELSE 0 END;
                UPDATE pets SET reserved = reserved + new_units, stock = stock - units_taken,
                    version = version + 1 WHERE id = new_pet
                    RETURNING stock IS NOT NULL, withdrawn INTO tracked, gone;
                IF tracked THEN
                    on_hand_delta := on_hand_delta - units_taken;
                    reserved_delta := reserved_delta + new_units;
                    available_delta := available_delta + CASE WHEN gone THEN 0
                                                         ELSE -units_taken - new_units END;
                END IF;
            END IF;
            UPDATE revision SET
                pending_units = pending_units
                    + CASE WHEN new_status = 'pending' THEN coalesce(new_units, 0) ELSE 0 END
                    - CASE WHEN old_status = 'pending' THEN coalesce(old_units, 0) ELSE 0 END,
                shipped_units = shipped_units
                    + CASE WHEN new_status = 'shipped' THEN coalesce(new_units, 0) ELSE 0 END
                    - CASE WHEN old_status = 'shipped' THEN coalesce(old_units, 0) ELSE 0 END,
                cancelled_units = cancelled_units
                    + CASE WHEN new_status = 'cancelled' THEN coalesce(new_units, 0) ELSE 0 END
                    - CASE WHEN old_status = 'cancelled' THEN coalesce(old_units, 0) ELSE 0 END,
                stock_on_hand = stock_on_hand + on_hand_delta,
                stock_reserved = stock_reserved + reserved_delta,
                stock_available = stock_available + available_delta;
            RETURN NULL;
        END IF;"""


# The pets' side: the revision's row is locked before any pet's (as every writer of
# orders does, migration 8), a pet's version and the revision are raised by any change
# that leaves its version as it was (an order's trigger raises the version itself, and
# the revision was raised by the order), a new pet holds what pending orders that name
# its id hold already, and the inventory's stock figures follow a change made to pets
# directly (one made by an order's trigger is counted there).
_PETS = """
    CREATE FUNCTION take_revision() RETURNS bigint LANGUAGE plpgsql AS $$
    DECLARE
        held text := current_setting('petstore.position', true);
        mine text := pg_current_xact_id()::text || ':';
        taken bigint;
    BEGIN
        IF held LIKE mine || '%' THEN
            RETURN substr(held, length(mine) + 1)::bigint;
        END IF;
        UPDATE revision SET value = value + 1 RETURNING value INTO taken;
        PERFORM set_config('petstore.position', mine || taken, true);
        RETURN taken;
    END $$;
    CREATE TRIGGER pets_lock_revision BEFORE INSERT OR UPDATE OR DELETE ON pets
        FOR EACH STATEMENT WHEN (pg_trigger_depth() = 0)
        EXECUTE FUNCTION lock_orders_revision();
    CREATE FUNCTION pet_takes_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            NEW.reserved := (SELECT coalesce(sum(quantity), 0) FROM orders
                             WHERE pet_id = NEW.id AND status = 'pending');
        ELSE
            NEW.version := OLD.version + 1;
        END IF;
        PERFORM take_revision();
        RETURN NEW;
    END $$;
    CREATE TRIGGER pets_insert_takes_version BEFORE INSERT ON pets
        FOR EACH ROW EXECUTE FUNCTION pet_takes_version();
    CREATE TRIGGER pets_update_takes_version BEFORE UPDATE ON pets
        FOR EACH ROW WHEN (NEW.version = OLD.version) EXECUTE FUNCTION pet_takes_version();
    CREATE FUNCTION pets_deleted_take_revision() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM take_revision();
        RETURN NULL;
    END $$;
    CREATE TRIGGER pets_delete_takes_revision AFTER DELETE ON pets
        FOR EACH STATEMENT EXECUTE FUNCTION pets_deleted_take_revision();
""" + "".join(
    f"""
    CREATE FUNCTION pets_count_stock_{event.lower()}() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE revision SET stock_on_hand = stock_on_hand + s.on_hand,
            stock_reserved = stock_reserved + s.reserved,
            stock_available = stock_available + s.available
        FROM (SELECT coalesce(sum(sign * stock), 0) AS on_hand,
                  coalesce(sum(sign * reserved) FILTER (WHERE stock IS NOT NULL), 0)
                      AS reserved,
                  coalesce(sum(sign * (stock - reserved)) FILTER (WHERE NOT withdrawn), 0)
                      AS available
              FROM ({shares}) AS shares) AS s
        WHERE s.on_hand <> 0 OR s.reserved <> 0 OR s.available <> 0;
        RETURN NULL;
    END $$;
    CREATE TRIGGER pets_count_stock_{event.lower()} AFTER {event} ON pets
        REFERENCING {tables} FOR EACH STATEMENT WHEN (pg_trigger_depth() = 0)
        EXECUTE FUNCTION pets_count_stock_{event.lower()}();
    """ for event, tables, shares in (
        ("INSERT", "NEW TABLE AS after_rows",
         "SELECT 1 AS sign, stock, reserved, withdrawn FROM after_rows"),
        ("UPDATE", "OLD TABLE AS before_rows NEW TABLE AS after_rows",
         "SELECT 1 AS sign, stock, reserved, withdrawn FROM after_rows UNION ALL "
         "SELECT -1, stock, reserved, withdrawn FROM before_rows"),
        ("DELETE", "OLD TABLE AS before_rows",
         "SELECT -1 AS sign, stock, reserved, withdrawn FROM before_rows"),
    ))

_STOCK = (
    "ALTER TABLE pets ADD COLUMN category TEXT, "
    "ADD COLUMN tags JSONB NOT NULL DEFAULT '[]', "
    "ADD COLUMN photo_urls JSONB NOT NULL DEFAULT '[]', "
    "ADD COLUMN stock BIGINT, "
    "ADD COLUMN reserved BIGINT NOT NULL DEFAULT 0, "
    "ADD COLUMN withdrawn BOOLEAN NOT NULL DEFAULT false, "
    "ADD COLUMN version BIGINT NOT NULL DEFAULT 1, "
    + ", ".join(f"ADD {constraint}" for constraint in PET_CONSTRAINTS) + ";\n"
    "UPDATE pets SET reserved = held.units FROM (SELECT pet_id, sum(quantity) AS units "
    "FROM orders WHERE status = 'pending' GROUP BY pet_id) AS held "
    "WHERE pets.id = held.pet_id;\n"
    "ALTER TABLE revision "
    + ", ".join(f"ADD COLUMN {column} BIGINT NOT NULL DEFAULT 0"
                for column in INVENTORY_COLUMNS) + ";\n"
    f"UPDATE revision SET ({', '.join(INVENTORY_COLUMNS)}) = ({INVENTORY_COUNTED});\n"
    + _hold_stock("orders_insert_holds_stock", "INSERT", "NEW TABLE AS after_rows",
                  _HELD.format(sign="", rows="after_rows"),
                  _UNITS.format(sign="", rows="after_rows"), fast=_ONE_PET)
    + _hold_stock("orders_update_moves_stock", "UPDATE",
                  "OLD TABLE AS before_rows NEW TABLE AS after_rows",
                  _HELD.format(sign="-", rows="before_rows") + " UNION ALL "
                  + _HELD.format(sign="", rows="after_rows") + _SHIPPED,
                  _UNITS.format(sign="", rows="after_rows") + " UNION ALL "
                  + _UNITS.format(sign="-", rows="before_rows"),
                  _ONE_MOVE_DECLARE, _ONE_MOVE)
    + _hold_stock("orders_delete_releases_stock", "DELETE", "OLD TABLE AS before_rows",
                  _HELD.format(sign="-", rows="before_rows"),
                  _UNITS.format(sign="-", rows="before_rows"))
    + _PETS
)

# The home page's days (day_statements.py), kept per statement as the stock is
# (migration 10): each statement that changes orders adds, from its transition tables, the
# orders it inserted to the UTC day of its transaction, the shipped orders it leaves and
# their units to their shipDate's day (less those of the shipped rows it replaced or removed),
# and the change in pending orders to the revision's row, which every writer of orders has
# locked already (migration 8; each of these triggers' names sorts after the triggers that
# lock or raise it). A statement that moves nothing they count (a complete) writes nothing.
_SHIPPED_ROWS = ("SELECT substr(ship_date, 1, 10) AS day, {sign}1 AS orders, "
                 "{sign}coalesce(quantity, 0) AS units "
                 "FROM {rows} WHERE status = 'shipped' AND ship_date IS NOT NULL")
_PENDING_ROWS = "(SELECT count(*) FROM {rows} WHERE status = 'pending')"
_TALLY_DAYS = """
    CREATE FUNCTION orders_{event}_tallies_days() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO order_days (day, placed, orders_shipped, units_shipped)
            SELECT day, sum(placed), sum(orders), sum(units) FROM ({counted}) AS counted
            GROUP BY day HAVING sum(placed) <> 0 OR sum(orders) <> 0
                OR sum(units) <> 0{add_to_day};
        UPDATE revision SET pending_orders = pending_orders + moved.n
            FROM (SELECT {pending} AS n) AS moved WHERE moved.n <> 0;
        RETURN NULL;
    END $$;
    CREATE TRIGGER orders_{event}_tallies_days AFTER {event} ON orders REFERENCING {tables}
        FOR EACH STATEMENT EXECUTE FUNCTION orders_{event}_tallies_days();
"""
_PLACED_TODAY = ("SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, "
                 "count(*) AS placed, 0 AS orders, 0 AS units FROM after_rows")


def _tally(event: str, tables: str, shipped: list[str], pending: str,
           placed: str = "") -> str:
    """The function and statement trigger that count one event's rows: the orders placed
    (an INSERT's), the shipped units of each kind of row, the change in pending orders."""
    counted = " UNION ALL ".join(
        ([placed] if placed else [])
        + [f"SELECT day, 0{' AS placed' if not placed and i == 0 else ''}, orders, units "
           f"FROM ({rows}) AS shipped_{i}" for i, rows in enumerate(shipped)])
    return _TALLY_DAYS.format(event=event, tables=tables, counted=counted,
                              pending=pending, add_to_day=ADD_TO_DAY)


_DAYS = (";\n".join(DAYS_SCHEMA) + ";\n" + DAYS_FILLED + ";\n"
         + _tally("insert", "NEW TABLE AS after_rows",
                  [_SHIPPED_ROWS.format(sign="", rows="after_rows")],
                  _PENDING_ROWS.format(rows="after_rows"), _PLACED_TODAY)
         + _tally("update", "OLD TABLE AS before_rows NEW TABLE AS after_rows",
                  [_SHIPPED_ROWS.format(sign="", rows="after_rows"),
                   _SHIPPED_ROWS.format(sign="-", rows="before_rows")],
                  _PENDING_ROWS.format(rows="after_rows") + " - "
                  + _PENDING_ROWS.format(rows="before_rows"))
         + _tally("delete", "OLD TABLE AS before_rows",
                  [_SHIPPED_ROWS.format(sign="-", rows="before_rows")],
                  "-" + _PENDING_ROWS.format(rows="before_rows")))

MIGRATIONS: tuple[str, ...] = (
    # 1: keys and orders. Times are ISO 8601 text, as in SQLite, so that every value comes
    # back exactly as it was written.
    """
    CREATE TABLE api_keys (
        id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
        prefix TEXT NOT NULL,
        digest TEXT NOT NULL,
        name TEXT NOT NULL,
        plan TEXT NOT NULL,
        per_minute BIGINT,
        per_day BIGINT,
        created_at TEXT NOT NULL,
        revoked_at TEXT
    );
    CREATE UNIQUE INDEX idx_api_keys_digest ON api_keys (digest);
    CREATE TABLE orders (
        id BIGINT PRIMARY KEY,
        pet_id BIGINT,
        quantity BIGINT,
        ship_date TEXT,
        complete BOOLEAN NOT NULL DEFAULT false,
        status TEXT NOT NULL DEFAULT 'pending'
            CHECK (status IN ('pending', 'shipped', 'cancelled')),
        cancelled_at TEXT,
        cancelled_by BIGINT REFERENCES api_keys (id)
    );
    CREATE INDEX idx_orders_status ON orders (status);
    """,
    # 2: bans
    "ALTER TABLE api_keys ADD COLUMN banned_until TEXT",
    # 3: pets
    "CREATE TABLE pets (id BIGINT PRIMARY KEY, name TEXT NOT NULL)",
    # 4: the revision, raised once by every statement that changes orders (whoever runs
    # it: a host of the service, the CLI, a hand edit), in the same transaction, so that
    # a list read with its revision in one snapshot is never labelled with another's.
    # Statement triggers with transition tables: a conditional UPDATE that changed no row
    # raises nothing, and an import of a million rows raises it once, not a million times.
    """
    CREATE TABLE revision (id INTEGER PRIMARY KEY CHECK (id = 1), value BIGINT NOT NULL);
    INSERT INTO revision VALUES (1, 0);
    CREATE FUNCTION raise_orders_revision() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'TRUNCATE' THEN  -- has no transition table to look at
            UPDATE revision SET value = value + 1;
        ELSIF EXISTS (SELECT FROM changed) THEN
            UPDATE revision SET value = value + 1;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER orders_insert_raises_revision AFTER INSERT ON orders
        REFERENCING NEW TABLE AS changed
        FOR EACH STATEMENT EXECUTE FUNCTION raise_orders_revision();
    CREATE TRIGGER orders_update_raises_revision AFTER UPDATE ON orders
        REFERENCING NEW TABLE AS changed
        FOR EACH STATEMENT EXECUTE FUNCTION raise_orders_revision();
    CREATE TRIGGER orders_delete_raises_revision AFTER DELETE ON orders
        REFERENCING OLD TABLE AS changed
        FOR EACH STATEMENT EXECUTE FUNCTION raise_orders_revision();
    CREATE TRIGGER orders_truncate_raises_revision AFTER TRUNCATE ON orders
        FOR EACH STATEMENT EXECUTE FUNCTION raise_orders_revision();
    """,
    # 5: an index for each filter and sort of the v2 list (D19)
    ";\n".join(LIST_INDEXES),
    # 6: expiry, scope, last use and rotation of keys (D21)
    ";\n".join(KEY_LIFECYCLE),
    # 7: each order's version (D25), raised by any UPDATE that leaves it as it was (the
    # service's own raise it themselves: an upsert import, a hand edit), and the
    # idempotency keys of placed orders (D23)
    """
    ALTER TABLE orders ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
    CREATE FUNCTION raise_order_version() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF NEW.version = OLD.version THEN
            NEW.version := OLD.version + 1;
        END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER orders_update_raises_version BEFORE UPDATE ON orders
        FOR EACH ROW EXECUTE FUNCTION raise_order_version();
    """ + ";\n".join(IDEMPOTENCY_KEYS),
    # 8: each order's position in the feed of changes (D26). A transaction's first change
    # to an order raises the revision, whose row stays locked until the transaction ends,
    # and every order the transaction writes takes that value (kept for the transaction,
    # tagged with its id). A concurrent writer waits on that lock, so it takes a higher
    # position and commits later: positions are given in commit order, on any number of
    # hosts, and a reader that sees a position sees every lower one. (A sequence or a
    # timestamp would not be: see the Marten failures.) Every statement that may
    # insert or update orders locks the revision's row before it touches an order (a
    # statement trigger; the value is raised only when a row changes, so a refused
    # conditional change leaves it alone): a writer holding order 2 while it waited for
    # the revision, held by one waiting for order 2, would be a deadlock. The revision is
    # raised once a transaction, so the statement triggers of migration 4 go for INSERT
    # and UPDATE; DELETE and TRUNCATE keep theirs. The version trigger of migration 7 is
    # folded into the row trigger.
    """
    ALTER TABLE orders ADD COLUMN position BIGINT NOT NULL DEFAULT 0;
    DROP TRIGGER orders_insert_raises_revision ON orders;
    DROP TRIGGER orders_update_raises_revision ON orders;
    DROP TRIGGER orders_update_raises_version ON orders;
    DROP FUNCTION raise_order_version();
    CREATE FUNCTION lock_orders_revision() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        PERFORM FROM revision FOR UPDATE;
        RETURN NULL;
    END $$;
    CREATE FUNCTION """ + _TAKE_POSITION.format(last_change="") + """;
    CREATE TRIGGER orders_lock_revision BEFORE INSERT OR UPDATE ON orders
        FOR EACH STATEMENT EXECUTE FUNCTION lock_orders_revision();
    CREATE TRIGGER orders_take_position BEFORE INSERT OR UPDATE ON orders
        FOR EACH ROW EXECUTE FUNCTION take_order_position();
    """ + ";\n".join(FEED_SCHEMA)
    + ";\nINSERT INTO feed_eras VALUES "
      "(0, left(md5(random()::text || clock_timestamp()::text), 16))",
    # 9: webhooks (D28): each order's kind of last change, which the row trigger of
    # migration 8 now also writes ("changed" for an UPDATE that leaves it as it was), the
    # endpoints and the log of attempts.
    ";\n".join(statement.format(id="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
               for statement in WEBHOOK_SCHEMA) + """;
    CREATE OR REPLACE FUNCTION """ + _TAKE_POSITION.format(last_change=_LAST_CHANGE),
    # 10: the catalogue and its stock (D32-D34, docs/house/stock.md): what a pet holds, the
    # checks that keep its stock true, each pet's reservation counted once from its
    # pending orders and from then on kept by the orders' statement triggers, the
    # inventory's figures on the revision's row, and the pets' own triggers.
    _STOCK,
    # 11: the console (D35): its users, sessions and audit log, and the user who cancelled
    # an order from it.
    ";\n".join(statement.format(id="BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY")
               for statement in CONSOLE_SCHEMA),
    # 12: the console's forms that show a secret once, each taken by its key (D35).
    ";\n".join(CONSOLE_FORMS_SCHEMA),
    # 13: a user's throttle epoch and a session's pending TOTP secret (D36).
    ";\n".join(CONSOLE_D36_SCHEMA),
    # 14: a user's role, owner or staff; the users before it are owners (D38).
    ";\n".join(CONSOLE_ROLES_SCHEMA),
    # 15: the indexes an order's page reads its story by (docs/console.md, "An order's
    # page").
    ";\n".join(ORDER_STORY_SCHEMA),
    # 16: the home page's days (docs/console.md): each UTC day's orders placed and units
    # shipped, the count of pending orders, and the owner's low-stock threshold.
    _DAYS,
    # 17: the console users' recovery codes, as digests (D38).
    ";\n".join(CONSOLE_RECOVERY_SCHEMA),
    # 18: the feed of changed pets (D39): each pet's position and the kind of its last
    # change, given to every row an INSERT or UPDATE of pets writes, whoever writes it (an
    # order's statement trigger too), before the row is stored: the transaction's
    # position (take_revision, migration 10: the revision's row locked until it ends, so
    # positions are given in commit order) and PET_CHANGE_KIND ("created" for a new pet).
    ";\n".join(PET_FEED_SCHEMA) + """;
    CREATE FUNCTION pet_takes_position() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        NEW.position := take_revision();
        IF TG_OP = 'INSERT' THEN
            NEW.last_change := 'created';
        ELSE
            NEW.last_change := """ + PET_CHANGE_KIND + """;
        END IF;
        RETURN NEW;
    END $$;
    CREATE TRIGGER pets_take_position BEFORE INSERT OR UPDATE ON pets
        FOR EACH ROW EXECUTE FUNCTION pet_takes_position()""",
)
SCHEMA_VERSION = len(MIGRATIONS)
