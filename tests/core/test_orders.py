"""The order rules over a fake store: no database, no HTTP."""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from app.core import orders
from app.core.errors import (
    IdempotencyKeyInUse,
    InvalidParameter,
    OrderAlreadyShipped,
    OrderCancelled,
    OrderNotFound,
    OrderNotShipped,
    PreconditionFailed,
    StoreUnavailable,
)
from app.core.storage.records import Placed, Transition
from tests.support import wait_until


class FakeStore:
    """Just enough of the Store Protocol for the rules: orders in a dict, each with a
    version that every change raises."""

    def __init__(self, *rows: dict[str, Any]) -> None:
        self.orders = {row["id"]: {"complete": False, "version": 1, **row} for row in rows}
        self.placed: dict[tuple[int, str], Any] = {}

    def _move(self, order_id: int, allowed: Callable[[dict[str, Any]], bool],
              version: int | None, **changes: Any) -> Transition:
        order = self.orders.get(order_id)
        if order is None:
            return Transition(None, changed=False)
        moved = allowed(order) and version in (None, order["version"])
        if moved:
            order.update(changes, version=order["version"] + 1)
        return Transition(order["status"], moved, order["complete"], order["version"])

    def cancel_order(self, order_id: int, key_id: int | None, now: str,
                     version: int | None = None, user_id: int | None = None) -> Transition:
        return self._move(order_id, lambda o: o["status"] == "pending", version,
                          status="cancelled", cancelled_by=key_id, cancelled_at=now,
                          cancelled_by_user=user_id)

    def ship_order(self, order_id: int, ship_date: str,
                   version: int | None = None) -> Transition:
        return self._move(order_id, lambda o: o["status"] == "pending", version,
                          status="shipped", shipDate=ship_date)

    def complete_order(self, order_id: int, version: int | None = None) -> Transition:
        return self._move(order_id, lambda o: o["status"] == "shipped" and not o["complete"],
                          version, complete=True)


@pytest.fixture
def store() -> FakeStore:
    return FakeStore(
        {"id": 1, "status": "pending"},
        {"id": 2, "status": "shipped", "shipDate": "2026-01-01T00:00:00Z"},
        {"id": 3, "status": "cancelled"},
        {"id": 4, "status": "shipped", "complete": True},
    )


def test_cancel_turns_a_pending_order_into_a_cancelled_one(store: FakeStore) -> None:
    assert orders.cancel(store, 1, key_id=7).changed  # type: ignore[arg-type]
    assert store.orders[1]["status"] == "cancelled"
    assert store.orders[1]["cancelled_by"] == 7


def test_cancel_refuses_a_shipped_order_and_leaves_it_unchanged(store: FakeStore) -> None:
    before = dict(store.orders[2])
    with pytest.raises(OrderAlreadyShipped) as info:
        orders.cancel(store, 2, key_id=7)  # type: ignore[arg-type]
    assert info.value.order_id == 2
    assert store.orders[2] == before


def test_cancel_of_a_cancelled_order_succeeds_and_changes_nothing(store: FakeStore) -> None:
    before = dict(store.orders[3])
    assert not orders.cancel(store, 3, key_id=7).changed  # type: ignore[arg-type]
    assert store.orders[3] == before


def test_cancel_of_an_unknown_order_raises_not_found(store: FakeStore) -> None:
    with pytest.raises(OrderNotFound):
        orders.cancel(store, 99, key_id=7)  # type: ignore[arg-type]


def test_ship_marks_a_pending_order_shipped_on_the_date(store: FakeStore) -> None:
    result = orders.ship(store, 1, "2026-02-02T00:00:00Z")  # type: ignore[arg-type]
    assert result.changed and result.status == "shipped" and result.version == 2
    assert store.orders[1]["shipDate"] == "2026-02-02T00:00:00Z"


def test_ship_refuses_a_cancelled_order(store: FakeStore) -> None:
    with pytest.raises(OrderCancelled, match="cannot be shipped"):
        orders.ship(store, 3, "2026-02-02T00:00:00Z")  # type: ignore[arg-type]
    assert store.orders[3]["status"] == "cancelled"


def test_ship_refuses_an_unknown_order(store: FakeStore) -> None:
    with pytest.raises(OrderNotFound):
        orders.ship(store, 99, "2026-02-02T00:00:00Z")  # type: ignore[arg-type]


def test_ship_leaves_a_shipped_order_and_its_date_alone(store: FakeStore) -> None:
    result = orders.ship(store, 2, "2026-02-02T00:00:00Z")  # type: ignore[arg-type]
    assert not result.changed and result.status == "shipped"
    assert store.orders[2]["shipDate"] == "2026-01-01T00:00:00Z"


def test_complete_marks_a_shipped_order_complete_once(store: FakeStore) -> None:
    assert orders.complete(store, 2).changed  # type: ignore[arg-type]
    assert store.orders[2]["complete"] is True
    again = orders.complete(store, 2)  # type: ignore[arg-type]
    assert not again.changed and again.complete


@pytest.mark.parametrize(("order_id", "refusal"), [(1, OrderNotShipped), (3, OrderCancelled),
                                                  (99, OrderNotFound)])
def test_complete_refuses_pending_cancelled_and_unknown_orders(
        store: FakeStore, order_id: int, refusal: type[Exception]) -> None:
    with pytest.raises(refusal):
        orders.complete(store, order_id)  # type: ignore[arg-type]
    assert all(not o["complete"] for o in store.orders.values() if o["id"] != 4)


@pytest.mark.parametrize("move", [
    lambda store, version: orders.cancel(store, 1, 7, version),
    lambda store, version: orders.ship(store, 1, None, version),
    lambda store, version: orders.complete(store, 2, version),
], ids=["cancel", "ship", "complete"])
def test_a_stale_version_changes_nothing_and_the_current_one_goes_through(
        store: FakeStore, move: Callable[[Any, int], Transition]) -> None:
    before = {k: dict(v) for k, v in store.orders.items()}
    with pytest.raises(PreconditionFailed) as info:
        move(store, 7)
    assert info.value.version == 1
    assert store.orders == before
    assert move(store, 1).changed


def test_an_unknown_order_is_not_found_whatever_version_is_named(store: FakeStore) -> None:
    with pytest.raises(OrderNotFound):
        orders.ship(store, 99, None, version=3)  # type: ignore[arg-type]


@pytest.mark.parametrize("move", [
    lambda store, order_id, version: orders.cancel(store, order_id, 7, version),
    lambda store, order_id, version: orders.ship(store, order_id, None, version),
    lambda store, order_id, version: orders.complete(store, order_id, version),
], ids=["cancel", "ship", "complete"])
def test_each_refusal_of_a_move_names_the_order_in_its_message(
        store: FakeStore, move: Callable[[Any, int, int | None], Transition]) -> None:
    """The message a client or the console shows says which order (the API's Error and
    the console's page carry it as written)."""
    for version in (None, 3):
        with pytest.raises(OrderNotFound) as unknown:
            move(store, 99, version)
        assert unknown.value.message == "No order has the id 99."
    with pytest.raises(PreconditionFailed) as stale:
        move(store, 2, 7)
    assert stale.value.message.startswith("Order 2 has changed since that version was read")


@pytest.fixture
def five_hours_east(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's local time 5 hours ahead of UTC for one test (a POSIX TZ rule, which
    needs no time-zone database), as a shop's server kept in local time is."""
    monkeypatch.setenv("TZ", "XYZ-5")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("five_hours_east")
def test_every_time_written_is_utc_whatever_the_machines_time_zone() -> None:
    """Stored times, the API's and the webhooks' (D28) alike, are UTC with a Z."""
    assert time.localtime(0).tm_hour == 5  # the zone took
    noon_at_plus_two = dt.datetime(2026, 5, 1, 12, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert orders.format_time(noon_at_plus_two) == "2026-05-01T10:00:00Z"
    assert orders.format_unix_time(1_777_636_800.6) == "2026-05-01T12:00:00Z"
    now = orders.utc_now()
    assert now.endswith("Z")
    assert abs(dt.datetime.fromisoformat(now) - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)


# placing --------------------------------------------------------------------------------


@pytest.mark.parametrize(("header", "key"), [
    ("abc-123", "abc-123"), ('"abc 123"', "abc 123"), ('""', '""'), ('"k"', "k"), ('"', '"'),
    ("k" * 255, "k" * 255), (f'"{"k" * 255}"', "k" * 255)])
def test_an_idempotency_key_is_printable_ascii_bare_or_quoted(header: str, key: str) -> None:
    assert orders.idempotency_key(header) == key


@pytest.mark.parametrize("header", ["", "k" * 256, f'"{"k" * 256}"', "caf\u00e9", "a\tb"])
def test_a_malformed_idempotency_key_is_refused(header: str) -> None:
    with pytest.raises(InvalidParameter) as info:
        orders.idempotency_key(header)
    assert info.value.name == "Idempotency-Key"


def test_the_fingerprint_ignores_the_order_of_members() -> None:
    assert (orders.fingerprint({"petId": 1, "quantity": 2})
            == orders.fingerprint({"quantity": 2, "petId": 1})
            != orders.fingerprint({"petId": 1, "quantity": 3}))


def test_a_key_being_placed_in_this_process_is_in_use_for_a_second_request() -> None:
    entered, release = threading.Event(), threading.Event()

    class SlowStore:
        def place_order(self, new: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            entered.set()
            release.wait(5)
            return Placed({"id": 1, **new}, 1, replayed=False)

        def purge_idempotency_keys(self, before: str) -> int:  # the janitor's thread
            return 0

        def close(self) -> None:
            pass

    placing = orders.Placing()
    first = threading.Thread(target=placing.place,
                             args=(SlowStore(), {"petId": 1, "quantity": 1}, 1, "k"))
    first.start()
    assert entered.wait(5)
    try:
        with pytest.raises(IdempotencyKeyInUse):
            placing.place(SlowStore(), {"petId": 1, "quantity": 1}, 1, "k")  # type: ignore[arg-type]
    finally:
        release.set()
        first.join()
    # Once the first is done, the key is free in this process (the store then replays).
    entered.clear()
    release.set()
    assert placing.place(SlowStore(), {"petId": 1, "quantity": 1}, 1, "k").order["id"] == 1  # type: ignore[arg-type]


class PurgingStore:
    """A store whose idempotency keys older than the cutoff number `old`."""

    def __init__(self, old: int = 1) -> None:
        self.old, self.closed = old, 0
        self.cutoffs: list[str] = []

    def place_order(self, new: dict[str, Any], *args: Any, **kwargs: Any) -> Placed:
        return Placed({"id": 1, **new}, 1, replayed=False)

    def purge_idempotency_keys(self, before: str) -> int:
        self.cutoffs.append(before)
        return self.old

    def close(self) -> None:
        self.closed += 1


def _janitors() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name == "petstore-idempotency-keys"}


def test_placing_starts_one_janitor_a_process_that_forgets_keys_older_than_a_day() -> None:
    """D23: keys live at least 24 hours; the first order a process places starts the one
    thread that forgets older ones. It is a daemon, so a worker that stops is not held
    up by it."""
    before = _janitors()
    store, placing = PurgingStore(), orders.Placing()
    for key in ("k-1", "k-2"):
        placing.place(store, {"petId": 1, "quantity": 1}, 1, key)  # type: ignore[arg-type]
    janitor, = _janitors() - before
    assert janitor.daemon
    wait_until(lambda: store.cutoffs, message="the janitor did not purge")
    cutoff = dt.datetime.fromisoformat(store.cutoffs[0])
    day_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=24)
    assert dt.timedelta(0) <= day_ago - cutoff < dt.timedelta(minutes=1)
    assert len(store.cutoffs) == 1  # one purge so far, by the one janitor


def test_forgetting_old_keys_logs_how_many_went_and_closes_its_connection(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "petstore.orders")
    store, stop = PurgingStore(old=3), threading.Event()
    # A daemon, so that a janitor a wrong change keeps from stopping fails this test only.
    janitor = threading.Thread(target=orders.forget_old_keys, args=(store, 0.01, stop),
                               daemon=True)
    janitor.start()
    try:
        wait_until(lambda: len(store.cutoffs) >= 2, message="the janitor did not go round")
    finally:
        stop.set()
        janitor.join(5)
    assert not janitor.is_alive()
    assert "forgot 3 old idempotency keys" in caplog.messages
    assert store.closed >= 2


def test_a_purge_that_fails_is_logged_and_the_janitor_tries_again_next_round(
        caplog: pytest.LogCaptureFixture) -> None:
    """A database that cannot answer is a warning with its message; anything else is logged
    with its traceback; neither ends the thread, whose next round forgets the keys."""
    caplog.set_level(logging.INFO, "petstore.orders")
    failures: list[Exception] = [StoreUnavailable("The database is locked."),
                                 RuntimeError("a bug")]

    class FailingStore(PurgingStore):
        def purge_idempotency_keys(self, before: str) -> int:
            if failures:
                raise failures.pop(0)
            return super().purge_idempotency_keys(before)

    store, stop = FailingStore(old=2), threading.Event()
    janitor = threading.Thread(target=orders.forget_old_keys, args=(store, 0.01, stop),
                               daemon=True)
    janitor.start()
    try:
        wait_until(lambda: store.cutoffs, message="no round after the failures")
    finally:
        stop.set()
        janitor.join(5)
    assert not janitor.is_alive()
    # This janitor's lines only, not those of the audit log's janitor of an app another
    # test built (the service's logging leaves records no thread name to tell them by).
    logged = [(r.levelname, r.getMessage(), r.exc_info is not None) for r in caplog.records
              if r.name == "petstore.orders" and "idempotency keys" in r.getMessage()]
    assert logged[:3] == [
        ("WARNING", "could not forget old idempotency keys: The database is locked.", False),
        ("ERROR", "could not forget old idempotency keys", True),
        ("INFO", "forgot 2 old idempotency keys", False)]
    assert store.closed >= 3  # after every round, failed or not


# rows to import -------------------------------------------------------------------------


def test_a_row_gets_pending_and_not_complete_by_default() -> None:
    assert orders.order_from_row({"petId": "5", "quantity": 2}) == {
        "petId": 5, "quantity": 2, "complete": False, "status": "pending",
    }


def test_ship_date_is_normalised_to_utc_and_an_empty_cell_is_no_date() -> None:
    row = {"id": 1, "shipDate": "2026-05-01T12:00:00+02:00"}
    assert orders.order_from_row(row)["shipDate"] == "2026-05-01T10:00:00Z"
    assert "shipDate" not in orders.order_from_row({"id": 1, "shipDate": ""})


@pytest.mark.parametrize(("given", "complete"), [
    ("TRUE", True), (" true ", True), ("1", True), (1, True), (True, True),
    ("False", False), ("0", False), (0, False), (False, False), ("", False), (None, False)])
def test_complete_is_read_as_a_spreadsheet_or_json_writes_it(given: Any, complete: bool) -> None:
    """A CSV's cell in any case or spacing, JSON's booleans and 0 or 1; an empty cell is
    not complete."""
    assert orders.order_from_row({"petId": 5, "complete": given})["complete"] is complete


def test_the_largest_id_is_taken() -> None:
    assert orders.order_from_row({"id": 2**63 - 1})["id"] == 2**63 - 1


@pytest.mark.parametrize(("given", "pet_id"), [(" 5 ", 5), (5.0, 5), ("", None), (None, None)])
def test_a_whole_number_may_be_text_or_a_whole_float_and_an_empty_cell_is_none(
        given: Any, pet_id: int | None) -> None:
    assert orders.order_from_row({"petId": given, "quantity": 1}).get("petId") == pet_id


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"id": 0}, "id must be between 1"),
        ({"id": "abc"}, "id must be a whole number"),
        ({"id": 2**63}, "id must be between"),
        ({"quantity": 0}, "quantity must be between 1"),
        ({"quantity": "-3"}, "quantity must be between 1"),
        ({"quantity": 1.5}, "quantity must be a whole number"),
        ({"quantity": True}, "quantity must be a whole number"),
        ({"petId": "\u0665"}, "petId must be a whole number"),
        ({"petId": "X5"}, "petId must be a whole number"),
        ({"shipDate": "2026-05-01T12:00:00"},
         "shipDate needs a time-zone offset (Z or +01:00), got '2026-05-01T12:00:00'"),
        ({"shipDate": "tomorrow"}, "shipDate must be an ISO 8601 date-time such as "
                                   "2026-05-01T10:00:00Z, got 'tomorrow'"),
        ({"shipDate": "0001-01-01T00:00:00+01:00"},
         "shipDate must fall between the years 1 and 9999 in UTC, "
         "got '0001-01-01T00:00:00+01:00'"),
        ({"shipDate": 20260501}, "shipDate must be a date-time string, got 20260501"),
        ({"status": "lost"}, "status must be one of pending, shipped, cancelled, got 'lost'"),
        ({"complete": "maybe"}, "complete must be true or false"),
        ({"complete": 2}, "complete must be true or false"),
        ({"colour": "red", "size": 2, "id": 1},
         "unknown field(s) colour, size; the fields are id, petId, quantity, shipDate, "
         "complete, status"),
        ([1, 2], "each order must be an object, got list"),
    ],
)
def test_a_bad_row_is_refused_with_the_field_and_reason(row: Any, reason: str) -> None:
    with pytest.raises(orders.InvalidOrder, match=re.escape(reason)):
        orders.order_from_row(row)
