"""The PostgreSQL store's writes of orders, grouped: the moves (cancel, ship,
complete) and the placing of orders that arrive together on a worker share one transaction
and one commit (group_commit.py), sent in pipelines (psycopg's pipeline mode).

Why: every change of an order holds the revision's row until its transaction ends, so that
the feed's positions follow commit order (D26). Committed one by one, writes took turns on
that row, one flush of the WAL each, and a worker's writes stayed below a hand-written
endpoint's over a plain table, whose commits PostgreSQL flushes together.

A batch is one transaction in one round trip: the imports' lock (when it places an
order: imports and placing number orders alike), the revision's row, then the writes in
the order they arrived, a run of writes of one kind in one statement (statements: the
stock's trigger then runs once for the run, not once a write), all sent at once in one
pipeline, whose Sync commits them. The revision's row is held from its statement to the
end of the commit, and no client round trip happens while it is held. A move is its
conditional UPDATE, which also reads the order when it changes nothing; a placing inserts
the order and its idempotency key's row unless the key is there (committed, or placed
earlier in this very batch: the same key twice places once and replays once) or the
shop's catalogue refuses the pet, and otherwise reads the key's first answer for a replay.

The transaction takes one position for every order it changes; positions stay in commit
order. With the revision's row taken first, no other writer's change to an order, nor its
placing under a key, can commit while the batch runs: each statement's snapshot shows the
orders and the keys as they are, and a placing never waits for a key (the same key on
another host waits for the revision, then replays). Every writer takes the imports' lock
before the revision, and the revision before any order or key, so batches of several
hosts do not deadlock one another. (While hosts are upgraded one by one, one still on a
release before this claims a key before the revision: the same key placed at that moment
on both hosts is a deadlock, which PostgreSQL breaks by failing one side: a 503 for its
whole batch.)

There are no savepoints: a statement that fails aborts the rest of its pipeline anyway. A
statement of several writes that fails runs the batch again with each write in its own
statement. A write whose own statement fails (a database error that is not the store's
unavailability) is answered with that error, the transaction is rolled back, and the
others run again in a new one without it; nothing of the first was kept, so running them
again is running them.
A refused placing (PetNotInCatalogue, PetWithdrawn, OutOfStock) fails no statement: it
simply inserts nothing, and says why.
Any other failure (a lock not had in the busy timeout, a read-only standby, the commit) is
the transaction's, and raises: GroupCommit fails every write of the batch with it. The
store repeats a batch whose connection was found broken once, on a fresh one (PostgresStore
._call): a move repeated finds its order moved on and changes nothing, a placing repeated
finds its key and replays.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson
import psycopg

from app.core.errors import OutOfStock, PetNotInCatalogue, PetWithdrawn, StoreUnavailable
from app.core.storage.psycopg_internals import forget_prepared
from app.core.storage.records import OrderMove, Placed, Transition
from app.core.storage.statements import NEW_ORDER_COLUMNS, PET_OUTSIDE_CATALOGUE, PLACED_KIND

# The key of the transaction-scoped advisory lock on which imports and placing take turns:
# both number the orders that come without an id (the largest id plus one).
IMPORT_LOCK = 0x70657473_0002
# One order as list_orders gives it, as JSON text built by PostgreSQL: the same fields,
# order and bytes as the SQLite store's ORDER_JSON (absent values left out, D1).
ORDER_JSON = """
    '{"id":' || id
    || coalesce(',"petId":' || pet_id, '')
    || coalesce(',"quantity":' || quantity, '')
    || coalesce(',"shipDate":' || to_json(ship_date), '')
    || CASE WHEN complete THEN ',"complete":true' ELSE ',"complete":false' END
    || ',"status":' || to_json(status) || '}'
"""
# A new order and its idempotency key's row (the first answer: the order as the list
# gives it, at version 1), unless the key is there, the shop's catalogue refuses the pet,
# the pet is withdrawn, or its stock is tracked and has fewer units available than asked
# for (D33); its id as SQLite gives ids (the largest plus one, under the imports' lock).
# Then either that answer with no fingerprint (placed), or the key's first answer (a
# replay), or a refusal ('!withdrawn' or '!out_of_stock' with the units available), or no
# row (refused by the catalogue). The batch holds the revision's row, which every writer
# of orders and pets takes first, so the pet read here is the pet the order is inserted
# against: the insert's trigger (migration 10) holds the units, and the stock's CHECK
# would refuse it were that not so.
PLACE_ORDER = (
    "WITH pet AS (SELECT withdrawn, stock - reserved AS available FROM pets "
    "WHERE id = %(pet)s), "
    f"placed AS (INSERT INTO orders (id, {NEW_ORDER_COLUMNS}, last_change) "
    "SELECT coalesce(max(id), 0) + 1, %(pet)s::bigint, %(quantity)s::bigint, "
    f"%(ship_date)s::text, {PLACED_KIND} "
    "FROM orders HAVING NOT EXISTS (SELECT FROM idempotency_keys WHERE api_key_id = %(key_id)s "
    "AND idempotency_key = %(key)s){catalogue} "  # replaced below
    "AND NOT EXISTS (SELECT FROM pet WHERE withdrawn OR available < %(quantity)s) "
    f"RETURNING id, {ORDER_JSON} AS order_json), "
    "claimed AS (INSERT INTO idempotency_keys SELECT %(key_id)s::bigint, %(key)s::text, "
    "%(fingerprint)s::text, id, order_json, 1, %(now)s::text "
    "FROM placed RETURNING order_json) "
    "SELECT NULL, order_json, 1 FROM claimed UNION ALL "
    "SELECT fingerprint, order_json, order_version FROM idempotency_keys "
    "WHERE api_key_id = %(key_id)s AND idempotency_key = %(key)s "
    "AND NOT EXISTS (SELECT FROM placed) UNION ALL "
    "SELECT CASE WHEN withdrawn THEN '!withdrawn' ELSE '!out_of_stock' END, "
    "available::text, NULL FROM pet WHERE (withdrawn OR available < %(quantity)s) "
    "AND NOT EXISTS (SELECT FROM placed) AND NOT EXISTS (SELECT FROM idempotency_keys "
    "WHERE api_key_id = %(key_id)s AND idempotency_key = %(key)s)"
)
PLACE_ANY_PET = PLACE_ORDER.replace("{catalogue}", "")
PLACE_CATALOGUE_PET = PLACE_ORDER.replace(
    "{catalogue}", f" AND NOT ({PET_OUTSIDE_CATALOGUE.format(p='%(pet)s')})")
# Orders for one pet, placed in one statement (statements): each as PLACE_ORDER places it,
# in the order they came (n), each under an idempotency key of its own. Placing in turn is
# kept exactly: the stock a placing finds is what the ones before it left, so the units
# are walked through in order (walk) and a placing that finds too few is refused with what
# was left for it, while a smaller one after it may still fit. The new orders' ids follow
# in that order from the largest id. One row per placing, by n, as PLACE_ORDER's row; none
# for a pet the catalogue refuses. Each key is looked up on its own, by the table's key
# (LATERAL, kept a subquery by its LIMIT): joined to the JSON's rows, the planner took the
# keys' table for the few rows of statistics it had (none, before the first ANALYZE) and
# scanned it whole, a longer scan with every order placed.
PLACE_ORDERS = (
    "WITH RECURSIVE asked AS (SELECT * FROM jsonb_to_recordset(%(rows)s::jsonb) AS "
    "asked(n int, quantity bigint, ship_date text, key_id bigint, key text, "
    "fingerprint text, now text)), "
    "pet AS (SELECT withdrawn, stock - reserved AS available FROM pets WHERE id = %(pet)s), "
    "kept AS (SELECT asked.n, k.* FROM asked CROSS JOIN LATERAL (SELECT fingerprint, "
    "order_json, order_version FROM idempotency_keys WHERE api_key_id = asked.key_id "
    "AND idempotency_key = asked.key LIMIT 1) AS k), "
    "fresh AS (SELECT row_number() OVER (ORDER BY n) AS turn, asked.* FROM asked "
    "WHERE n NOT IN (SELECT n FROM kept) AND NOT ({outside})), "
    "walk AS (SELECT 0::bigint AS turn, NULL::int AS n, NULL::bigint AS quantity, "
    "NULL::boolean AS fits, (SELECT available FROM pet) AS left_after, "
    "NULL::bigint AS left_before "
    "UNION ALL SELECT fresh.turn, fresh.n, fresh.quantity, fits.fits, "
    "CASE WHEN fits.fits THEN walk.left_after - fresh.quantity ELSE walk.left_after END, "
    "walk.left_after FROM walk JOIN fresh ON fresh.turn = walk.turn + 1, "
    "LATERAL (SELECT NOT coalesce((SELECT withdrawn FROM pet), false) "
    "AND coalesce(walk.left_after >= fresh.quantity, true) AS fits) AS fits), "
    "numbered AS (SELECT fresh.*, (SELECT coalesce(max(id), 0) FROM orders) "
    "+ row_number() OVER (ORDER BY fresh.n) AS id FROM fresh "
    "JOIN walk ON walk.n = fresh.n AND walk.fits), "
    f"placed AS (INSERT INTO orders (id, {NEW_ORDER_COLUMNS}, last_change) "
    f"SELECT id, %(pet)s::bigint, quantity, ship_date, {PLACED_KIND} FROM numbered "
    f"ORDER BY id RETURNING id, {ORDER_JSON} AS order_json), "
    "claimed AS (INSERT INTO idempotency_keys SELECT numbered.key_id, numbered.key, "
    "numbered.fingerprint, placed.id, placed.order_json, 1, numbered.now "
    "FROM placed JOIN numbered USING (id)) "
    "SELECT NULL, placed.order_json, 1, numbered.n FROM placed JOIN numbered USING (id) "
    "UNION ALL SELECT fingerprint, order_json, order_version, n FROM kept UNION ALL "
    "SELECT CASE WHEN pet.withdrawn THEN '!withdrawn' ELSE '!out_of_stock' END, "
    "walk.left_before::text, NULL, walk.n FROM walk, pet WHERE walk.turn > 0 AND NOT walk.fits"
)
# A batch's locks, taken by its first statement. The imports' lock comes first: the
# function is called as the revision's (one) row is read, before that row is locked.
TAKE_REVISION = "SELECT FROM revision FOR UPDATE"
TAKE_IMPORT_LOCK_AND_REVISION = "SELECT pg_advisory_xact_lock(%s) FROM revision FOR UPDATE"

Connection = psycopg.Connection[tuple[Any, ...]]
Cursor = psycopg.Cursor[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Move:
    """A conditional change of one order (records.OrderMove)."""

    move: OrderMove

    def statement(self) -> tuple[str, tuple[Any, ...] | dict[str, Any]]:
        # Its conditional UPDATE, and when that changes nothing the order as it is (a
        # snapshot no other writer's commit can outdate while the batch holds the revision);
        # either way with the order's JSON, for an answer that gives the order.
        update, params = self.move.statement("%s")
        return (f"WITH moved AS ({update} RETURNING status, complete, version, "
                f"{ORDER_JSON} AS order_json) "
                "SELECT true, status, complete, version, order_json FROM moved UNION ALL "
                f"SELECT false, status, complete, version, {ORDER_JSON} FROM orders "
                "WHERE id = %s AND NOT EXISTS (SELECT FROM moved)",
                (*params, self.move.order_id))

    def kind(self) -> tuple[Any, ...]:
        """What moves of one statement share: everything but the order and its values."""
        move = self.move
        return ("move", move.assignments, tuple(column for column, _ in move.values),
                move.condition, move.version is None)

    def handle(self) -> int:
        """What two moves of one statement may not share: the order."""
        return self.move.order_id

    def outcome(self, row: tuple[Any, ...] | None) -> Transition:
        if row is None:
            return Transition(None, changed=False)
        return Transition(str(row[1]), bool(row[0]), bool(row[2]), int(row[3]),
                          orjson.loads(row[4]))


def moves_statement(moves: Sequence[Move]) -> tuple[str, tuple[Any, ...]]:
    """One statement for moves of one kind of distinct orders (a cancel of each, say): what
    Move.statement gives each, with the order's id last. The values come as JSON typed by
    the orders' own columns (jsonb_populate_recordset), so no type is written here twice;
    json, not orjson, writes it: a number no column holds (an If-Match's version, say)
    then fails the statement, whose moves run again one by one, rather than this code."""
    first = moves[0].move
    columns = ("id", "version", *(column for column, _ in first.values))
    picked = ", ".join(f"{column} AS move_{column}" for column in columns)
    assignments = ", ".join((first.assignments, *(f"{column} = w.move_{column}"
                                                 for column in columns[2:])))
    # The ids again as an array: the planner then finds the orders by their key, where a
    # join to the JSON's rows alone may have it scan every order in the moves' state.
    where = f"id = ANY(%s::bigint[]) AND id = w.move_id AND {first.condition}"
    if first.version is not None:
        where += " AND version = w.move_version"
    ids = [move.move.order_id for move in moves]
    values = json.dumps([{"id": move.move.order_id, "version": move.move.version,
                          **dict(move.move.values)} for move in moves])
    return (f"WITH w AS (SELECT {picked} FROM jsonb_populate_recordset(NULL::orders, "
            "%s::jsonb)), "
            f"moved AS (UPDATE orders SET {assignments}, version = version + 1 FROM w "
            f"WHERE {where} RETURNING id, status, complete, version, "
            f"{ORDER_JSON} AS order_json) "
            "SELECT true, status, complete, version, order_json, id FROM moved UNION ALL "
            f"SELECT false, status, complete, version, {ORDER_JSON}, id FROM orders "
            "WHERE id = ANY(%s::bigint[]) AND id NOT IN (SELECT id FROM moved)",
            (values, ids, ids))


def places_statement(places: Sequence[Place]) -> tuple[str, dict[str, Any]]:
    """One statement for placings of one pet under distinct keys (PLACE_ORDERS): a row for
    each as Place.statement gives it, with its index in places last."""
    first = places[0]
    outside = (PET_OUTSIDE_CATALOGUE.format(p="%(pet)s") if first.catalogue_pets_only
               else "false")
    rows = json.dumps([{"n": n, "quantity": place.new["quantity"],
                        "ship_date": place.new.get("shipDate"), "key_id": place.api_key_id,
                        "key": place.idempotency_key, "fingerprint": place.fingerprint,
                        "now": place.now}
                       for n, place in enumerate(places)])
    return (PLACE_ORDERS.replace("{outside}", outside),
            {"rows": rows, "pet": first.new["petId"]})


@dataclass(frozen=True, slots=True)
class Place:
    """An order to place under an idempotency key (PostgresStore.place_order)."""

    new: dict[str, Any]
    api_key_id: int
    idempotency_key: str
    fingerprint: str
    now: str
    catalogue_pets_only: bool

    def statement(self) -> tuple[str, dict[str, Any]]:
        params = {"pet": self.new["petId"], "quantity": self.new["quantity"],
                  "ship_date": self.new.get("shipDate"), "key_id": self.api_key_id,
                  "key": self.idempotency_key, "fingerprint": self.fingerprint,
                  "now": self.now}
        return (PLACE_CATALOGUE_PET if self.catalogue_pets_only else PLACE_ANY_PET), params

    def kind(self) -> tuple[Any, ...]:
        """What placings of one statement share: the pet, and whether the catalogue must
        hold it."""
        return ("place", self.new["petId"], self.catalogue_pets_only)

    def handle(self) -> tuple[int, str]:
        """What two placings of one statement may not share: the idempotency key."""
        return self.api_key_id, self.idempotency_key

    def outcome(self, row: tuple[Any, ...] | None) -> Placed | tuple[Any, ...] | Exception:
        """The order placed; or the key's first answer (fingerprint, order JSON, version:
        for statements.replayed); or, when neither, the exception its caller raises (never
        raised here: the batch has committed)."""
        if row is not None and row[0] is None:
            return Placed(orjson.loads(row[1]), 1, replayed=False)
        if row is not None and row[0] == "!withdrawn":
            return PetWithdrawn(self.new["petId"])
        if row is not None and row[0] == "!out_of_stock":
            return OutOfStock(self.new["petId"], self.new["quantity"], int(row[1]))
        if row is not None:
            return row
        if self.catalogue_pets_only:
            return PetNotInCatalogue(self.new["petId"])
        return StoreUnavailable("The order was neither placed nor found under its "
                                "idempotency key; try again.")


Outcome = Transition | Placed | tuple[Any, ...] | Exception


class _WriteFailed(Exception):
    """The write at index failed on its own statement, with error (index None: a statement
    of several moves failed); its transaction has been rolled back."""

    def __init__(self, index: int | None, error: Exception) -> None:
        super().__init__(index, error)
        self.index = index
        self.error = error


def run_batch(conn: Connection, writes: Sequence[Move | Place],
              unavailable: tuple[type[Exception], ...]) -> list[Outcome]:
    """Each write's outcome (a Transition, a Placed, a key's first answer, or the
    exception its caller raises), once the transaction that holds them has committed on
    conn; raises when that transaction fails as a whole. An error of a class in
    unavailable is the store's, never one write's (the module's docstring)."""
    failed: dict[int, Exception] = {}
    together = True
    while True:
        running = [i for i in range(len(writes)) if i not in failed]
        try:
            outcomes = iter(_transaction(conn, [writes[i] for i in running], unavailable,
                                         together))
        except _WriteFailed as failure:
            if failure.index is None:  # one of several moves failed: find which, alone
                together = False
            else:
                failed[running[failure.index]] = failure.error
            continue
        return [failed[i] if i in failed else next(outcomes) for i in range(len(writes))]


def statements(writes: Sequence[Move | Place], together: bool = True) -> list[list[int]]:
    """The writes (their indexes) each statement of a batch runs, in the order they
    arrived: a run of writes of one kind (moves alike of distinct orders, placings for one
    pet under distinct keys) in one statement (moves_statement, places_statement); any
    other write in a statement of its own. Each write of such a statement is answered as
    if it had run alone, in its turn; the same order or key twice takes a statement each.

    Why: every statement that changes orders runs the stock's statement trigger (migration
    10), which updates the pet and the revision's row once more in the transaction, each
    a longer chain of versions to walk; a batch's writes of one kind in one statement pay
    that once (docs/performance.md)."""
    units: list[list[int]] = []
    handles: set[Any] = set()
    for index, write in enumerate(writes):
        last = writes[units[-1][0]] if units else None
        if (together and last is not None and last.kind() == write.kind()
                and write.handle() not in handles):
            units[-1].append(index)
        else:
            units.append([index])
            handles = set()
        handles.add(write.handle())
    return units


def _transaction(conn: Connection, writes: Sequence[Move | Place],
                 unavailable: tuple[type[Exception], ...], together: bool) -> list[Outcome]:
    if not writes:
        return []
    sent: list[tuple[list[int] | None, Cursor]] = []  # each statement and its writes

    def send(unit: list[int] | None, sql: str,
             params: tuple[Any, ...] | dict[str, Any] = ()) -> Cursor:
        cursor = conn.execute(sql, params)
        sent.append((unit, cursor))
        return cursor

    units = statements(writes, together)
    # Every statement is made before the first is sent (see below).
    made = [(unit, *_statement([writes[i] for i in unit])) for unit in units]
    try:
        # No BEGIN and no COMMIT: what a pipeline sends before its Sync (psycopg sends one
        # as the block ends) is one transaction, which the Sync commits; a statement that
        # fails aborts it, and those after it do not run (PostgreSQL's extended query
        # protocol). Two statements fewer a batch: each costs the worker CPU in psycopg
        # (docs/performance.md).
        with conn.pipeline():
            try:
                if any(isinstance(write, Place) for write in writes):
                    send(None, TAKE_IMPORT_LOCK_AND_REVISION, (IMPORT_LOCK,))
                else:
                    send(None, TAKE_REVISION)
                answers = [send(unit, sql, params) for unit, sql, params in made]
            except BaseException as exc:
                # psycopg refused a statement before sending it (a parameter it cannot
                # send): what was sent before must not be committed by the Sync. A
                # ROLLBACK outside BEGIN aborts the transaction the pipeline began.
                if not conn.broken and not _from_server(exc):
                    conn.execute("ROLLBACK")
                raise
    except BaseException as exc:
        if conn.broken:
            raise
        # Statements sent after the one that failed did not run, nor were prepared.
        forget_prepared(conn)
        # The statement that failed is the first without a result; those after it were
        # not run (the pipeline was aborted).
        culprit = next((unit for unit, cursor in sent if cursor.pgresult is None), None)
        if culprit is None or not isinstance(exc, psycopg.Error) or isinstance(exc, unavailable):
            raise
        raise _WriteFailed(culprit[0] if len(culprit) == 1 else None, exc) from None
    outcomes: list[Outcome] = [None] * len(writes)  # type: ignore[list-item]
    for unit, answer in zip(units, answers, strict=True):
        if len(unit) == 1:
            outcomes[unit[0]] = writes[unit[0]].outcome(answer.fetchone())
            continue
        rows = {row[-1]: row[:-1] for row in answer.fetchall()}
        for position, index in enumerate(unit):
            write = writes[index]
            outcomes[index] = write.outcome(rows.get(
                write.handle() if isinstance(write, Move) else position))
    return outcomes


def _from_server(error: BaseException) -> bool:
    """Whether error is a statement's failure that PostgreSQL reported."""
    return isinstance(error, psycopg.Error) and error.diag.sqlstate is not None


def _statement(writes: Sequence[Move | Place]) -> tuple[str, Any]:
    """The statement of writes of one kind (statements), its SQL and parameters."""
    if len(writes) == 1:
        return writes[0].statement()
    if isinstance(writes[0], Move):
        return moves_statement(cast(Sequence[Move], writes))
    return places_statement(cast(Sequence[Place], writes))
