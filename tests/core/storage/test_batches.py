"""Writes that arrive together on a worker share one transaction, on every store
(group_commit.py; on PostgreSQL postgres_writes.py): what each caller sees when one write of
the batch is refused or fails, when one idempotency key comes twice, and on PostgreSQL when
the batch's connection breaks under it.

To make writes arrive together, another connection holds what every writer waits for
(SQLite's write lock, PostgreSQL's revision row) while a first write, the pilot, waits for
it; the writes called meanwhile wait for the pilot's batch to end, and then run as one."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest

from app.core.config import Settings
from app.core.errors import (
    IdempotencyKeyReused,
    OutOfStock,
    PetNotInCatalogue,
    PetWithdrawn,
    StoreUnavailable,
)
from app.core.storage import Store, open_store
from app.core.storage.records import Placed, Transition
from tests.core.storage.conftest import Place
from tests.relay import Relay

NOW = "2026-11-24T10:00:00Z"
LATER = "2026-11-24T10:00:01Z"
NEW = {"petId": 7, "quantity": 2, "shipDate": "2026-12-01T10:00:00Z"}
PILOT = 100  # the order the pilot cancels
PATIENT_MS = 20_000  # the store's busy timeout: longer than any test holds a lock
POSTGRESQL_ONLY = pytest.mark.parametrize("place", ["postgresql"], indirect=True)


@pytest.fixture
def patient(place: Place) -> Iterator[Store]:
    """A store over the place's database that waits for locks longer than a test holds
    them, with orders 1 to 3 and the pilot's, and a catalogue of pet 7."""
    store = open_store(Settings(database=place.database, busy_timeout_ms=PATIENT_MS))
    store.import_orders([{"id": 1}, {"id": 2}, {"id": 3}, {"id": PILOT}])
    store.import_pets([{"id": 7, "name": "Rex"}])
    yield store
    store.dispose()


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"never came to pass: {what}")
        time.sleep(0.005)


class Callers:
    """Calls of a store, each in a thread of its own; what each returned or raised."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.outcomes: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []

    def call(self, name: str, work: Callable[[Store], Any]) -> None:
        def run() -> None:
            try:
                self.outcomes[name] = work(self.store)
            except Exception as exc:
                self.outcomes[name] = exc

        thread = threading.Thread(target=run, name=name)
        self.threads.append(thread)
        thread.start()

    def waiting(self) -> int:
        """How many writes wait for the next batch."""
        grouped = self.store._grouped  # type: ignore[attr-defined]
        with grouped._lock:
            return len(grouped._waiting)

    def leading(self) -> bool:
        grouped = self.store._grouped  # type: ignore[attr-defined]
        with grouped._lock:
            return bool(grouped._leading)

    def pilot_then_together(self, calls: dict[str, Callable[[Store], Any]]) -> None:
        """The pilot's cancel, then the calls, in this order, all waiting for its batch to
        end (the caller holds the writers meanwhile)."""
        self.call("pilot", lambda store: store.cancel_order(PILOT, None, NOW))
        until(lambda: self.leading() and self.waiting() == 0, "the pilot leads its batch")
        for count, (name, work) in enumerate(calls.items(), start=1):
            self.call(name, work)
            until(lambda count=count: self.waiting() == count, f"{name} waits")

    def join(self) -> dict[str, Any]:
        for thread in self.threads:
            thread.join(30)
            assert not thread.is_alive(), f"{thread.name} never returned"
        return self.outcomes


def placing(key: str, fingerprint: str = "fp", **new: Any) -> Callable[[Store], Placed]:
    return lambda store: store.place_order({**NEW, **new}, 1, key, fingerprint, NOW,
                                           catalogue_pets_only=True)


def test_a_refused_or_failed_write_in_a_batch_undoes_only_itself(
        patient: Store, place: Place) -> None:
    callers = Callers(patient)
    with place.holding_writers():
        callers.pilot_then_together({
            "placed": placing("k1"),
            "outside the catalogue": placing("k2", petId=8),
            "shipped": lambda store: store.ship_order(2, NOW),
            "at an old version": lambda store: store.cancel_order(3, None, NOW, version=5),
            # A quantity no column holds: the write's own statement fails (a 500 from the
            # API, whose contract keeps such numbers out).
            "failing": placing("k3", quantity=2**64),
            "cancelled": lambda store: store.cancel_order(1, None, NOW),
        })
    outcomes = callers.join()
    assert outcomes["pilot"] == Transition("cancelled", True, False, 2)
    placed = outcomes["placed"]
    assert isinstance(placed, Placed) and not placed.replayed and placed.order["id"] == 101
    assert isinstance(outcomes["outside the catalogue"], PetNotInCatalogue)
    assert outcomes["shipped"] == Transition("shipped", True, False, 2)
    assert outcomes["at an old version"] == Transition("pending", False, False, 1)
    assert isinstance(outcomes["failing"], Exception)
    assert not isinstance(outcomes["failing"], StoreUnavailable)
    assert outcomes["cancelled"] == Transition("cancelled", True, False, 2)
    assert patient.count_by_status() == {"pending": 2, "shipped": 1, "cancelled": 2}
    # Neither the refused nor the failed write kept its key: both may place now.
    for key in ("k2", "k3"):
        assert not placing(key)(patient).replayed
    if place.kind == "postgresql":  # one transaction: its orders took one position
        positions = place.sql("SELECT DISTINCT position FROM orders WHERE id IN (1, 2, 101)")
        assert len(positions) == 1


def test_one_idempotency_key_twice_in_a_batch_places_once_and_replays_once(
        patient: Store, place: Place) -> None:
    callers = Callers(patient)
    with place.holding_writers():
        callers.pilot_then_together({
            "first": placing("twice"),
            "again": placing("twice"),
            "another request": placing("twice", "other fp", quantity=5),
        })
    outcomes = callers.join()
    first, again = outcomes["first"], outcomes["again"]
    assert isinstance(first, Placed) and not first.replayed
    assert isinstance(again, Placed) and again.replayed and again.order == first.order
    assert isinstance(outcomes["another request"], IdempotencyKeyReused)
    assert patient.count_orders() == 5


def test_moves_of_one_kind_in_a_batch_each_answer_as_if_alone(
        patient: Store, place: Place) -> None:
    """On PostgreSQL a run of moves of one kind goes in one statement (postgres_writes.
    statements): each caller still gets its own order's outcome, the same order twice is
    moved once, and the stock and the inventory's figures stay true."""
    patient.import_pets([{"id": 8, "name": "Tom", "stock": 10}])
    patient.import_orders([{"id": i, "petId": 8, "quantity": 2} for i in range(4, 9)])
    callers = Callers(patient)
    with place.holding_writers():
        callers.pilot_then_together({
            "cancel 4": lambda store: store.cancel_order(4, None, NOW),
            "cancel 5": lambda store: store.cancel_order(5, None, NOW),
            "cancel 4 again": lambda store: store.cancel_order(4, None, NOW),
            "cancel 404": lambda store: store.cancel_order(404, None, NOW),
            "cancel 6": lambda store: store.cancel_order(6, None, NOW),
            "ship 7": lambda store: store.ship_order(7, "2026-12-01T10:00:00Z"),
            "ship 8 at an old version": lambda store: store.ship_order(8, NOW, version=9),
            "ship 1": lambda store: store.ship_order(1, NOW),
            "complete 7": lambda store: store.complete_order(7),
        })
    outcomes = callers.join()
    for cancelled in ("cancel 4", "cancel 5", "cancel 6"):
        assert outcomes[cancelled] == Transition("cancelled", True, False, 2), cancelled
    assert outcomes["cancel 4"].order["id"] == 4
    assert outcomes["cancel 4 again"] == Transition("cancelled", False, False, 2)
    assert outcomes["cancel 404"] == Transition(None, False)
    assert outcomes["ship 7"] == Transition("shipped", True, False, 2)
    assert outcomes["ship 7"].order["shipDate"] == "2026-12-01T10:00:00Z"
    assert outcomes["ship 8 at an old version"] == Transition("pending", False, False, 1)
    assert outcomes["ship 1"] == Transition("shipped", True, False, 2)
    assert outcomes["complete 7"] == Transition("shipped", True, True, 3)
    assert patient.reservations_differing() == []
    assert patient.inventory() == patient.inventory_counted()
    assert patient.get_versioned_pet(8)[0]["stock"] == 8  # type: ignore[index]


def test_placings_for_one_pet_in_a_batch_take_its_units_in_their_turn(
        patient: Store, place: Place) -> None:
    """On PostgreSQL placings for one pet go in one statement: each still finds the units
    the ones before it left, so a placing too large for them is refused while a smaller
    one after it is placed; a key placed before replays, and the ids follow the turns."""
    patient.import_pets([{"id": 8, "name": "Tom", "stock": 5}])
    earlier = placing("kept", petId=8, quantity=1)(patient)
    callers = Callers(patient)
    with place.holding_writers():
        callers.pilot_then_together({
            "three": placing("a", petId=8, quantity=3),
            "replayed": placing("kept", petId=8, quantity=1),
            "two more": placing("b", petId=8, quantity=2),
            "failing": placing("c", petId=8, quantity=2**64),
            "one": placing("d", petId=8, quantity=1),
            "one too many": placing("e", petId=8, quantity=1),
        })
    outcomes = callers.join()
    three, one = outcomes["three"], outcomes["one"]
    assert isinstance(three, Placed) and not three.replayed
    assert isinstance(one, Placed) and not one.replayed
    assert (three.order["id"], one.order["id"]) == (earlier.order["id"] + 1,
                                                    earlier.order["id"] + 2)
    assert outcomes["replayed"].replayed and outcomes["replayed"].order == earlier.order
    assert isinstance(outcomes["two more"], OutOfStock)
    assert outcomes["two more"].available == 1
    assert isinstance(outcomes["one too many"], OutOfStock)
    assert outcomes["one too many"].available == 0
    assert isinstance(outcomes["failing"], Exception)
    assert not isinstance(outcomes["failing"], (StoreUnavailable, Placed))
    assert patient.reservations_differing() == []
    assert patient.inventory() == patient.inventory_counted()
    for key in ("b", "c", "e"):  # refused or failed: the key is not kept
        with pytest.raises(OutOfStock):
            placing(key, petId=8, quantity=1)(patient)


def test_placings_for_a_pet_withdrawn_or_outside_the_catalogue_are_refused_each(
        patient: Store, place: Place) -> None:
    patient.import_pets([{"id": 8, "name": "Tom"}])
    patient.withdraw_pet(8)
    callers = Callers(patient)
    with place.holding_writers():
        callers.pilot_then_together({
            "withdrawn": placing("a", petId=8), "withdrawn too": placing("b", petId=8),
            "outside": placing("c", petId=9), "outside too": placing("d", petId=9),
            "placed": placing("e"),
            "placed too": lambda store: store.place_order(  # a moment after the others
                NEW, 1, "f", "fp", LATER, catalogue_pets_only=True),
        })
    outcomes = callers.join()
    assert isinstance(outcomes["withdrawn"], PetWithdrawn)
    assert isinstance(outcomes["withdrawn too"], PetWithdrawn)
    assert isinstance(outcomes["outside"], PetNotInCatalogue)
    assert isinstance(outcomes["outside too"], PetNotInCatalogue)
    assert not outcomes["placed"].replayed and not outcomes["placed too"].replayed
    assert patient.count_orders() == 6
    # Each key is kept with the time of its own placing.
    assert place.sql("SELECT idempotency_key, created_at FROM idempotency_keys "
                     "ORDER BY 1") == [("e", NOW), ("f", LATER)]


def test_a_move_failing_among_moves_of_its_kind_fails_alone(
        patient: Store, place: Place) -> None:
    callers = Callers(patient)
    with place.holding_writers():
        callers.pilot_then_together({
            "cancel 1": lambda store: store.cancel_order(1, None, NOW),
            # No key 999 to record: the write's own statement fails (its foreign key).
            "failing": lambda store: store.cancel_order(2, 999, NOW),
            "cancel 3": lambda store: store.cancel_order(3, None, NOW),
        })
    outcomes = callers.join()
    assert outcomes["cancel 1"] == Transition("cancelled", True, False, 2)
    assert outcomes["cancel 3"] == Transition("cancelled", True, False, 2)
    assert isinstance(outcomes["failing"], Exception)
    assert not isinstance(outcomes["failing"], StoreUnavailable)
    assert patient.count_by_status() == {"pending": 1, "shipped": 0, "cancelled": 3}


@POSTGRESQL_ONLY  # psycopg's prepared statements
def test_a_connection_whose_batches_failed_again_and_again_runs_every_statement(
        patient: Store, place: Place) -> None:
    """psycopg prepares a statement on its fifth run; one sent in a pipeline that failed
    before it ran was never prepared, and a connection that believed otherwise would fail
    that statement ("prepared statement ... does not exist") from then on."""
    import psycopg

    from app.core.storage.postgres_writes import Place as Placing
    from app.core.storage.postgres_writes import run_batch

    def placing(key: str, quantity: int = 1) -> Placing:
        return Placing({"petId": 7, "quantity": quantity}, 1, key, "fp", NOW, True)

    with psycopg.connect(place.database, autocommit=True) as conn:
        for turn in range(8):
            outcomes = run_batch(conn, [placing(f"a{turn}"), placing(f"b{turn}", 2**64),
                                        placing(f"c{turn}")], ())
            assert isinstance(outcomes[0], Placed), (turn, outcomes[0])
            assert isinstance(outcomes[1], psycopg.errors.NumericValueOutOfRange)
            assert isinstance(outcomes[2], Placed), (turn, outcomes[2])
    assert patient.count_orders() == 4 + 16


@POSTGRESQL_ONLY  # a pipeline's statements are one transaction, which its Sync commits
def test_a_statement_psycopg_cannot_send_leaves_nothing_of_its_batch_committed(
        patient: Store, place: Place) -> None:
    """A batch sends no BEGIN: the Sync that ends its pipeline commits what was sent. When
    psycopg refuses a statement before sending it, those sent before it are rolled back."""
    import psycopg

    from app.core.storage.postgres_writes import Move, run_batch
    from app.core.storage.postgres_writes import Place as Placing
    from app.core.storage.records import OrderMove

    cancel = Move(OrderMove(1, "status = 'cancelled'", (), "status = 'pending'"))
    unsendable = Placing({"petId": 7, "quantity": 1, "shipDate": object()}, 1, "k", "fp",
                         NOW, True)
    with psycopg.connect(place.database, autocommit=True) as conn:
        with pytest.raises(psycopg.ProgrammingError, match="cannot adapt"):
            run_batch(conn, [cancel, unsendable], ())
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert patient.count_by_status() == {"pending": 4, "shipped": 0, "cancelled": 0}
    assert patient.count_orders() == 4


@POSTGRESQL_ONLY  # the planner's choices are PostgreSQL's
def test_statements_of_several_writes_find_their_rows_by_key_whatever_the_statistics(
        patient: Store, place: Place) -> None:
    """The plans psycopg keeps for a statement of several placings or moves look keys and
    orders up by their index, before any ANALYZE and with statistics made when the tables
    were small: a scan of every key or every pending order grew a batch's time with every
    order placed."""
    import psycopg

    from app.core.storage.postgres_writes import Move, moves_statement, places_statement
    from app.core.storage.postgres_writes import Place as Placing
    from app.core.storage.records import OrderMove

    patient.import_orders([{"id": i, "petId": 7, "quantity": 1} for i in range(200, 20_200)])
    with psycopg.connect(place.database, autocommit=True) as conn:
        conn.execute("INSERT INTO idempotency_keys SELECT 1, 'k' || i, 'fp', i, '{}', 1, "
                     "'now' FROM generate_series(200, 20199) AS i")
        conn.execute("SET plan_cache_mode = force_generic_plan")
        places = places_statement([Placing({"petId": 7, "quantity": 1}, 1, f"n{i}", "fp",
                                           NOW, True) for i in range(3)])
        moves = moves_statement([Move(OrderMove(i, "status = 'cancelled'", (),
                                                "status = 'pending'")) for i in (201, 202)])
        for sql, params in (places, moves):
            plan = "\n".join(row[0] for row in conn.execute(
                f"EXPLAIN {sql}", params, prepare=True).fetchall())
            assert "Seq Scan on idempotency_keys" not in plan, plan
            assert "Seq Scan on orders" not in plan, plan
            assert "Index Cond: (status" not in plan, plan


# PostgreSQL: a batch's connection broken under it ---------------------------------------------


def _backends(database: str, name: str = "petstore", waiting: bool = True) -> list[int]:
    """The server processes of the store's connections (or of the test's, by name), those
    waiting for a lock or all."""
    import psycopg

    with psycopg.connect(database, autocommit=True) as conn:
        return [pid for (pid,) in conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND "
            "application_name = %s AND (wait_event_type = 'Lock' OR NOT %s)",
            (name, waiting)).fetchall()]


def _backends_waiting(database: str) -> list[int]:
    return _backends(database)


@contextmanager
def batch_waiting(callers: Callers, place: Place,
                  calls: dict[str, Callable[[Store], Any]]) -> Iterator[Callable[[], None]]:
    """The calls (one of them a placing) as one batch, waiting for the imports' lock, which
    another connection holds, once the pilot's batch (a cancel, which does not take that
    lock) has committed; yields the release of that lock.

    Not the revision's row: a second holder queued for it behind the pilot is not sure to
    take it before the batch. The pilot's commit updates the row, and a newcomer that finds
    the new version unlocked takes it while the queued holder is still waking."""
    imports = ExitStack()
    imports.enter_context(place.holding_imports())
    try:
        with place.holding_writers():
            callers.pilot_then_together(calls)
        until(lambda: "pilot" in callers.outcomes
              and len(_backends_waiting(place.database)) == 1, "the batch waits for the lock")
        yield imports.close
    finally:
        imports.close()


def _once_reachable(work: Callable[[], Placed]) -> Placed:
    """work's result, once the store reaches its database again (its pool reconnects after
    a wait of its own)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return work()
        except StoreUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@POSTGRESQL_ONLY  # a connection that breaks is PostgreSQL's
def test_a_batch_whose_connection_is_dropped_runs_again_on_a_fresh_one(
        patient: Store, place: Place) -> None:
    """A failover mid-batch (its server process ended before it committed): every write is
    answered as if nothing happened."""
    import psycopg

    callers = Callers(patient)
    calls = {"placed": placing("k1"), "shipped": lambda store: store.ship_order(2, NOW),
             "cancelled": lambda store: store.cancel_order(1, None, NOW)}
    with batch_waiting(callers, place, calls) as release:
        (dropped,) = _backends_waiting(place.database)
        with psycopg.connect(place.database, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (dropped,))
        until(lambda: _backends_waiting(place.database) not in ([], [dropped]),
              "the batch runs again on another connection")
        release()
    outcomes = callers.join()
    placed = outcomes["placed"]
    assert isinstance(placed, Placed) and not placed.replayed
    assert outcomes["shipped"] == Transition("shipped", True, False, 2)
    assert outcomes["cancelled"] == Transition("cancelled", True, False, 2)
    assert patient.count_orders() == 5


@POSTGRESQL_ONLY  # a connection that breaks is PostgreSQL's
def test_a_batch_cut_off_from_its_database_is_503_for_every_write_and_all_or_nothing(
        place: Place) -> None:
    """The database unreachable while a batch waits (a host gone down): every caller gets
    StoreUnavailable, never an answer for something not committed. The server may still
    commit what it had received; whether it did or not, the batch is all or nothing, and
    each write repeated afterwards is answered consistently: the order placed once."""
    parts = urlsplit(place.database)
    proxy = Relay(parts.hostname or "127.0.0.1", parts.port or 5432).start()
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    via_proxy = parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}").geturl()
    store = open_store(Settings(database=via_proxy, busy_timeout_ms=PATIENT_MS))
    try:
        store.import_orders([{"id": 1}, {"id": 2}, {"id": PILOT}])
        callers = Callers(store)
        calls = {"placed": placing("k1"), "shipped": lambda store: store.ship_order(2, NOW)}
        with batch_waiting(callers, place, calls) as release:
            proxy.cut()
            outcomes = callers.join()
            release()
        assert isinstance(outcomes["placed"], StoreUnavailable)
        assert isinstance(outcomes["shipped"], StoreUnavailable)
        until(lambda: not _backends(place.database, waiting=False),
              "the batch's server side ends")
        committed = place.sql("SELECT count(*) FROM orders WHERE id = 101 OR "
                              "(id = 2 AND status = 'shipped')")[0][0]
        assert committed in (0, 2)
        proxy.restore()
        again = _once_reachable(lambda: placing("k1")(store))
        assert again.replayed == (committed == 2)
        assert store.count_orders() == 4
        assert store.ship_order(2, NOW).status == "shipped"
    finally:
        store.dispose()
        proxy.stop()
