"""The PostgreSQL store's writes of orders, grouped (issue 34): the moves (cancel, ship,
complete) and the placing of orders that arrive together on a worker share one transaction
and one commit (group_commit.py), sent in pipelines (psycopg's pipeline mode).

Why: every change of an order holds the revision's row until its transaction ends, so that
the feed's positions follow commit order (D26). Committed one by one, writes took turns on
that row, one flush of the WAL each, and a worker's writes stayed below a hand-written
endpoint's over a plain table, whose commits PostgreSQL flushes together.

A batch is one transaction in at most two round trips:

1. BEGIN, and each placing's claim of its idempotency key (an INSERT that does nothing when
   the key is there, or when the shop's catalogue refuses the pet): no lock that other
   writers wait on is taken yet. Only sent when the batch places orders.
2. The imports' lock (when an order is placed: imports and placing number orders alike),
   the revision's row, then every write in the order it arrived: a move's conditional
   UPDATE (which also reads the order when it changes nothing), a claimed key's placing, an
   unclaimed key's first answer (a replay: of an earlier transaction's, or of this batch's
   own when the key came twice); then COMMIT. The row is held from here to the end of the
   commit, and no client round trip happens while it is held.

The transaction then takes one position for every order it changes; positions stay in
commit order. With the revision's row taken first, no other writer's change to an order
can commit while the batch runs, so each statement's snapshot shows the orders as they are.
Locks are taken in one order everywhere (keys, then the imports' lock, then the revision,
then orders), so batches of several hosts do not deadlock one another.

There are no savepoints: a statement that fails aborts the rest of its pipeline anyway. A
write whose own statement fails (a database error that is not the store's unavailability)
is answered with that error, the transaction is rolled back, and the others run again in a
new one without it; nothing of the first was kept, so running them again is running them.
A refused placing (PetNotInCatalogue) fails no statement: its claim simply inserts nothing.
Any other failure (a lock not had in the busy timeout, a read-only standby, the commit) is
the transaction's, and raises: GroupCommit fails every write of the batch with it. The
store repeats a batch whose connection was found broken once, on a fresh one (PostgresStore
._call): a move repeated finds its order moved on and changes nothing, a placing repeated
finds its key and replays.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg

from app.core.errors import PetNotInCatalogue, StoreUnavailable
from app.core.storage.records import Placed, Transition
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
# An idempotency key's claim: its row, without an order yet. Nothing when the key has one
# (committed, or claimed earlier in this transaction) ...
CLAIM = ("INSERT INTO idempotency_keys VALUES (%s, %s, %s, 0, '', 0, %s) "
         "ON CONFLICT DO NOTHING RETURNING 1")
# ... nor, with the catalogue rule (issue 36), for a pet the catalogue refuses: a refusal
# keeps no key (D23) and needs nothing undone.
CLAIM_IN_CATALOGUE = (
    "INSERT INTO idempotency_keys SELECT %s::bigint, %s::text, %s::text, 0, '', 0, %s::text "
    f"WHERE NOT ({PET_OUTSIDE_CATALOGUE.format(p='%s')}) ON CONFLICT DO NOTHING RETURNING 1")
# A new order and its key's first answer, in one statement under the imports' lock: its id
# as SQLite gives ids (the largest plus one), its JSON as the list gives it.
PLACE_ORDER = (
    f"WITH placed AS (INSERT INTO orders (id, {NEW_ORDER_COLUMNS}, last_change) "
    f"SELECT coalesce(max(id), 0) + 1, %s::bigint, %s::bigint, %s::text, {PLACED_KIND} "
    "FROM orders "
    f"RETURNING id, {ORDER_JSON} AS order_json) "
    "UPDATE idempotency_keys SET order_id = placed.id, order_json = placed.order_json, "
    "order_version = 1 FROM placed WHERE api_key_id = %s AND idempotency_key = %s "
    "RETURNING placed.order_json"
)
# A key's first answer, for a replay (statements.IDEMPOTENCY_FIND).
FIND_ANSWER = ("SELECT fingerprint, order_json, order_version FROM idempotency_keys "
               "WHERE api_key_id = %s AND idempotency_key = %s")
# The transaction's own statements, and their share of a batch's locks.
TAKE_IMPORT_LOCK = "SELECT pg_advisory_xact_lock(%s)"
TAKE_REVISION = "SELECT FROM revision FOR UPDATE"

Connection = psycopg.Connection[tuple[Any, ...]]
Cursor = psycopg.Cursor[tuple[Any, ...]]


@dataclass(frozen=True, slots=True)
class Move:
    """A conditional UPDATE of one order (statements.SqlStore._move), and the order's id."""

    update: str
    params: tuple[Any, ...]
    order_id: int

    def outcome(self, row: tuple[Any, ...] | None) -> Transition:
        if row is None:
            return Transition(None, changed=False)
        return Transition(str(row[1]), bool(row[0]), bool(row[2]), int(row[3]),
                          orjson.loads(row[4]))


@dataclass(frozen=True, slots=True)
class Place:
    """An order to place under an idempotency key (PostgresStore.place_order)."""

    new: dict[str, Any]
    api_key_id: int
    idempotency_key: str
    fingerprint: str
    now: str
    catalogue_pets_only: bool

    def claim(self) -> tuple[str, tuple[Any, ...]]:
        params = (self.api_key_id, self.idempotency_key, self.fingerprint, self.now)
        if self.catalogue_pets_only:
            return CLAIM_IN_CATALOGUE, (*params, self.new["petId"])
        return CLAIM, params

    def outcome(self, row: tuple[Any, ...] | None, claimed: bool
                ) -> Placed | tuple[Any, ...] | Exception:
        """The order placed; or the key's first answer (a row of FIND_ANSWER, for
        statements.replayed); or, when no key was claimed or found, the exception its
        caller raises (never raised here: the batch has committed)."""
        if claimed:
            assert row is not None  # the claim's own row
            return Placed(orjson.loads(row[0]), 1, replayed=False)
        if row is not None:
            return row
        if self.catalogue_pets_only:  # the claim inserted nothing and no key is there
            return PetNotInCatalogue(self.new["petId"])
        # The key was there when claimed, and gone when its answer was read: purged since.
        return StoreUnavailable("The idempotency key's first answer was forgotten while "
                                "this request was placed; try again.")


Outcome = Transition | Placed | tuple[Any, ...] | Exception


class _WriteFailed(Exception):
    """The write at index failed on its own statement, with error; its transaction has
    been rolled back."""

    def __init__(self, index: int, error: Exception) -> None:
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
    while True:
        running = [i for i in range(len(writes)) if i not in failed]
        try:
            outcomes = iter(_transaction(conn, [writes[i] for i in running], unavailable))
        except _WriteFailed as failure:
            failed[running[failure.index]] = failure.error
            continue
        return [failed[i] if i in failed else next(outcomes) for i in range(len(writes))]


def _transaction(conn: Connection, writes: Sequence[Move | Place],
                 unavailable: tuple[type[Exception], ...]) -> list[Outcome]:
    if not writes:
        return []
    sent: list[tuple[int | None, Cursor]] = []  # each statement and its write (None: ours)

    def send(write: int | None, sql: str, params: tuple[Any, ...] = ()) -> Cursor:
        cursor = conn.execute(sql, params)
        sent.append((write, cursor))
        return cursor

    places = [(i, write) for i, write in enumerate(writes) if isinstance(write, Place)]
    # Keys are claimed in one order on every host: two batches that claim the same two keys
    # wait for one another in turn, never in a circle. (The sort is stable: of one key
    # twice in a batch, the first to arrive claims it.)
    places.sort(key=lambda place: (place[1].api_key_id, place[1].idempotency_key))
    claimed: set[int] = set()
    try:
        with conn.pipeline() as pipeline:
            send(None, "BEGIN")
            if places:
                claims = [(i, send(i, *place.claim())) for i, place in places]
                pipeline.sync()
                claimed = {i for i, claim in claims if claim.fetchone() is not None}
                if claimed:
                    send(None, TAKE_IMPORT_LOCK, (IMPORT_LOCK,))
            send(None, TAKE_REVISION)
            answers = [send(i, *_statement(write, i in claimed))
                       for i, write in enumerate(writes)]
            send(None, "COMMIT")
    except BaseException as exc:
        if conn.broken:
            raise
        conn.execute("ROLLBACK")
        # The statement that failed is the first without a result; those after it were
        # not run (the pipeline was aborted).
        culprit = next((write for write, cursor in sent if cursor.pgresult is None), None)
        if culprit is None or not isinstance(exc, psycopg.Error) or isinstance(exc, unavailable):
            raise
        raise _WriteFailed(culprit, exc) from None
    outcomes: list[Outcome] = []
    for i, (write, answer) in enumerate(zip(writes, answers, strict=True)):
        row = answer.fetchone()
        outcomes.append(write.outcome(row) if isinstance(write, Move)
                        else write.outcome(row, i in claimed))
    return outcomes


def _statement(write: Move | Place, claimed: bool) -> tuple[str, tuple[Any, ...]]:
    """The write's statement in the batch's second round trip."""
    if isinstance(write, Move):
        # Its conditional UPDATE, and when that changes nothing the order as it is (a
        # snapshot no other writer's commit can outdate while the batch holds the revision);
        # either way with the order's JSON, for an answer that gives the order.
        return (f"WITH moved AS ({write.update} RETURNING status, complete, version, "
                f"{ORDER_JSON} AS order_json) "
                "SELECT true, status, complete, version, order_json FROM moved UNION ALL "
                f"SELECT false, status, complete, version, {ORDER_JSON} FROM orders "
                "WHERE id = %s AND NOT EXISTS (SELECT FROM moved)",
                (*write.params, write.order_id))
    if claimed:
        new = write.new
        return PLACE_ORDER, (new["petId"], new["quantity"], new.get("shipDate"),
                             write.api_key_id, write.idempotency_key)
    return FIND_ANSWER, (write.api_key_id, write.idempotency_key)
