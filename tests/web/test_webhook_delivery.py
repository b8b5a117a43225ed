"""The deliverer of webhooks (D28) against real receivers on loopback: signed
messages of the types asked for, in feed order per endpoint, retried on the schedule (with a
clock the test moves), disabled by a 410 or the last retry and enabled again without loss,
a hanging endpoint that delays only itself, two deliverers (two hosts) sharing endpoints
over PostgreSQL with each change sent once, and nothing sent to a refused address; a store
that fails and recovers, a receiver that does not answer in time, a clean stop that
gives its leases back, and the deliverer of `petstore webhooks deliver` stopped by a
signal."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import email.utils
import itertools
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from app.core import metrics, orders, pets, webhook_urls, webhooks
from app.core.config import Settings
from app.core.errors import StoreUnavailable
from app.core.storage import Store, open_store
from app.core.storage.records import WebhookEndpoint
from app.web import deliverer as deliverer_module
from app.web.deliverer import PET_PACE_SECONDS, Ahead, Deliverer, run_alone
from app.web.longpoll import RevisionWatch
from tests.receivers import Received, receiving
from tests.support import LOADED_ROOM, Interposed, wait_until

NOW = "2026-11-24T10:00:00Z"


class Clock:
    """A clock the test moves: the deliverer's schedule reads it (signatures do not). It
    counts its readings, so that a test can wait for the deliverer to have looked at it."""

    def __init__(self) -> None:
        self.now = time.time()
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now

    def looked_again(self, times: int = 8) -> None:
        """Wait until the deliverer has read the clock this many more times: its claims
        and its tasks' steps (a task waiting to retry reads it every RETRY_POLL_SECONDS)."""
        seen = self.reads
        wait_until(lambda: self.reads >= seen + times, 10, "the deliverer did not look")

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "petstore.db")
    return str(request.getfixturevalue("postgres_database"))


def _settings(database: str, **changes: Any) -> Settings:
    return Settings(database=database, webhook_allowed_networks="127.0.0.0/8",
                    webhook_timeout=2.0, webhook_lease_seconds=3.0).replace(**changes)


@pytest.fixture
def store(database: str) -> Iterator[Store]:
    store = open_store(_settings(database))
    yield store
    store.dispose()


@contextmanager
def delivering(store: Store, settings: Settings, clock: Callable[[], float] = time.time,
               owner: str | None = None) -> Iterator[Deliverer]:
    """A deliverer running on an event loop of its own thread, as a worker runs one."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    deliverer = Deliverer(store, settings, RevisionWatch(store), clock, owner)

    async def start() -> None:
        deliverer.start()

    async def left_running() -> list[str]:
        return [task.get_name() for task in asyncio.all_tasks()
                if task is not asyncio.current_task()]

    asyncio.run_coroutine_threadsafe(start(), loop).result()
    try:
        yield deliverer
    finally:
        try:
            asyncio.run_coroutine_threadsafe(deliverer.stop(), loop).result(15)
            # Nothing of it is left on the worker's loop (a task left pending is destroyed
            # with the loop, and says so in the log).
            assert asyncio.run_coroutine_threadsafe(left_running(), loop).result(5) == []
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()


def _endpoint(store: Store, url: str, types: tuple[str, ...] = ()) -> tuple[WebhookEndpoint,
                                                                            str]:
    """An endpoint as the operator adds one (no key), from now on."""
    return webhooks.create(store, None, url, list(types), None,
                           webhook_urls.networks("127.0.0.0/8"))


def _seed(store: Store, *ids: int) -> None:
    store.import_orders([{"id": i, "petId": i, "quantity": 1} for i in ids])


def _retried(write: Callable[[], Any]) -> None:
    """write(), again while the store is unavailable (for 10 s at most)."""
    def done() -> bool:
        try:
            write()
        except StoreUnavailable:
            return False
        return True
    wait_until(done, message="the store stayed unavailable")


def _counted(outcome: str) -> float:
    """The attempts /metrics counts with this outcome (petstore_webhook_attempts_total),
    in this process."""
    return sum(sample.value for metric in metrics.WEBHOOK_ATTEMPTS.collect()
               for sample in metric.samples
               if sample.name.endswith("_total") and sample.labels == {"outcome": outcome})


def _in_feed_order(got: list[Received]) -> None:
    """Messages came in feed order, each change once: their positions only grow."""
    positions = [int(r.id.rsplit("_", 1)[1]) for r in got]
    ids = [r.id for r in got]
    assert len(set(ids)) == len(ids), "a change was sent twice"
    assert [(p, r.message["data"]["id"]) for p, r in zip(positions, got, strict=True)] == \
        sorted((p, r.message["data"]["id"]) for p, r in zip(positions, got, strict=True))


def _unset_lags(*endpoint_ids: int) -> None:
    """Forget the lag an earlier test's endpoint of the same id left in this process."""
    for endpoint_id in endpoint_ids:
        with contextlib.suppress(KeyError):
            metrics.WEBHOOK_LAG.remove(str(endpoint_id))


def _lag(endpoint_id: int) -> float | None:
    """The endpoint's petstore_webhook_lag_seconds in this process (None: never set)."""
    return next((sample.value for metric in metrics.WEBHOOK_LAG.collect()
                 for sample in metric.samples
                 if sample.labels == {"endpoint": str(endpoint_id)}), None)


def test_an_endpoint_gets_only_its_types_signed_in_order(
        store: Store, database: str, caplog: pytest.LogCaptureFixture) -> None:
    """The changes an endpoint did not ask for are passed over by the task that holds it,
    which then waits for more, its lag back to 0."""
    caplog.set_level(logging.WARNING, logger="petstore.webhooks")
    with receiving() as shipped, receiving() as everything:
        only, only_secret = _endpoint(store, shipped.url, ("order.shipped",))
        _, all_secret = _endpoint(store, everything.url)
        _unset_lags(only.id)
        with delivering(store, _settings(database)) as deliverer:
            wait_until(lambda: only.id in deliverer.tasks)
            task = deliverer.tasks[only.id]
            _seed(store, 1, 2)
            orders.ship(store, 2, NOW)
            orders.cancel(store, 1, None)
            got = everything.wait_until(lambda got: {r.message["data"]["id"] for r in got
                                                     if r.message["type"] != "order.changed"}
                                        == {1, 2})
            shipped.wait_for(1)
            wait_until(lambda: bool(store.webhook_attempts(only.id, None, 1)))
            # The cancelling after the shipping is passed over; then nothing is behind.
            wait_until(lambda: _lag(only.id) == 0, message="the lag stayed above 0")
            # A new order (imported: order.changed) wakes the waiting task, which passes
            # over it too.
            _seed(store, 3)
            wait_until(lambda: store.get_webhook_endpoint(only.id).order_id == 3)
            everything.wait_until(lambda got: got[-1].message["data"]["id"] == 3)
            assert deliverer.tasks[only.id] is task  # one task, which never stopped
        assert _warnings(caplog) == []
        _in_feed_order(got)
        messages = everything.verified(all_secret)
        assert messages[-1]["type"] == "order.changed" and messages[-1]["data"]["id"] == 3
        assert messages[-3:-1] == [
            {"type": "order.shipped", "timestamp": messages[-3]["timestamp"],
             "data": {"id": 2, "petId": 2, "quantity": 1, "shipDate": NOW, "complete": False,
                      "status": "shipped"}},
            {"type": "order.cancelled", "timestamp": messages[-2]["timestamp"],
             "data": {"id": 1, "petId": 1, "quantity": 1, "complete": False,
                      "status": "cancelled"}}]
        assert [m["type"] for m in shipped.verified(only_secret)] == ["order.shipped"]
        delivered = store.webhook_attempts(only.id, None, 10)[0]
        assert (delivered.status, delivered.attempt, delivered.error) == (204, 1, None)


def test_the_deliverers_tasks_are_named_as_the_log_shows_them(tmp_path: Path) -> None:
    """Its claim loop is the task `webhooks` and each endpoint's task `webhook-<id>`: the
    names asyncio's log gives a task that failed unseen or was left pending at the end."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        with delivering(store, _settings(database)) as deliverer:
            wait_until(lambda: endpoint.id in deliverer.tasks)
            assert deliverer.main is not None and deliverer.main.get_name() == "webhooks"
            assert deliverer.tasks[endpoint.id].get_name() == f"webhook-{endpoint.id}"
    store.dispose()


def test_pet_messages_come_with_their_kind_in_commit_order_beside_the_orders(
        store: Store, database: str) -> None:
    """D39: an endpoint that names pet types gets each change of a pet as it is when read,
    with the kind of that change, in one order with the orders' messages; one that names
    no type gets the orders' messages only, as before 2.5.0."""
    store.import_pets([{"id": 7, "name": "Rex", "stock": 2}])
    with receiving() as storefront, receiving() as warehouse:
        _, pet_secret = _endpoint(store, storefront.url, (
            "order.placed", "pet.out_of_stock", "pet.back_in_stock", "pet.updated",
            "pet.withdrawn"))
        _, order_secret = _endpoint(store, warehouse.url)
        with delivering(store, _settings(database)):
            placed = store.place_order({"petId": 7, "quantity": 2}, 1, "k", "k", NOW,
                                       catalogue_pets_only=True).order["id"]
            storefront.wait_for(2)
            orders.cancel(store, placed, None)
            storefront.wait_for(3)
            pets.update(store, 7, {"name": "Rex II"})
            storefront.wait_for(4)
            pets.withdraw(store, 7)
            got = storefront.wait_for(5)
            warehouse.wait_until(lambda got: [r.message["type"] for r in got] == [
                "order.placed", "order.cancelled"])
        messages = storefront.verified(pet_secret)
        assert [(m["type"], m["data"].get("available"), m["data"].get("name"))
                for m in messages] == [
            ("order.placed", None, None), ("pet.out_of_stock", 0, "Rex"),
            ("pet.back_in_stock", 2, "Rex"), ("pet.updated", 2, "Rex II"),
            ("pet.withdrawn", 0, "Rex II")]
        assert messages[1]["data"] == {"id": 7, "name": "Rex", "tags": [], "photoUrls": [],
                                       "stock": 2, "reserved": 2, "available": 0,
                                       "status": "pending"}
        ids = [r.id for r in got]
        assert ids[0].startswith(f"msg_{placed}_")
        assert all(i.startswith("msg_pet_7_") for i in ids[1:]) and len(set(ids)) == 5
        positions = [int(i.rsplit("_", 1)[1]) for i in ids]
        assert positions[1:] == sorted(positions[1:]) and positions[1] >= positions[0]
        assert [m["type"] for m in warehouse.verified(order_secret)] == [
            "order.placed", "order.cancelled"]


def test_a_crossing_is_one_from_what_the_endpoint_last_read_whatever_came_between(
        store: Store, database: str) -> None:
    """D39: an endpoint that wants only the crossings gets pet.out_of_stock for a pet that
    sold out and then shipped while it was not delivering (the pet's last change is no
    crossing: a ship), and nothing for one that sold out and was restocked in between (the
    same on both sides of what it read)."""
    store.import_pets([{"id": 7, "name": "Rex", "stock": 2}])
    with receiving() as receiver:
        endpoint, secret = _endpoint(store, receiver.url, ("pet.out_of_stock",
                                                           "pet.back_in_stock"))

        def read_up_to_now() -> None:
            """Deliver until the endpoint has read every change of the pets made so far
            (it remembers what it read of the pet)."""
            def caught_up() -> bool:
                now = store.get_webhook_endpoint(endpoint.id)
                return now is not None and store.changes_after(now.place, 1, ("pet",)) == []

            with delivering(store, _settings(database)):
                wait_until(caught_up, message="the endpoint did not read up to now")

        first = store.place_order({"petId": 7, "quantity": 1}, 1, "a", "a", NOW,
                                  catalogue_pets_only=True).order["id"]
        read_up_to_now()  # 1 of 2 left: no crossing, nothing sent, the pet read
        assert receiver.received == []
        store.place_order({"petId": 7, "quantity": 1}, 1, "b", "b", NOW,
                          catalogue_pets_only=True)
        orders.ship(store, first, NOW)  # the pet's last change is a ship: "changed"
        read_up_to_now()
        (sold_out,) = receiver.verified(secret)
        assert (sold_out["type"], sold_out["data"]["available"]) == ("pet.out_of_stock", 0)
        pets.adjust(store, 7, 1, None, 1, "restock")  # back in stock...
        store.place_order({"petId": 7, "quantity": 1}, 1, "c", "c", NOW,
                          catalogue_pets_only=True)  # ...and out again, unread between
        read_up_to_now()
        assert len(receiver.received) == 1
        pets.adjust(store, 7, 5, None, 1, "restock-2")
        read_up_to_now()
        assert [m["type"] for m in receiver.verified(secret)] == [
            "pet.out_of_stock", "pet.back_in_stock"]


def test_changes_committed_while_an_idle_endpoint_reads_are_judged_from_what_it_read(
        store: Store, database: str) -> None:
    """D39: a read of the feed that finds nothing reads the revision, then the feed again;
    a pet's changes committed in between are judged from what the endpoint last read of
    the pet, as any others are: sold out and restocked, no crossing, nothing sent."""
    store.import_pets([{"id": 7, "name": "Rex", "stock": 2}])
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url, ("pet.out_of_stock",
                                                      "pet.back_in_stock"))

        def between(*_: Any) -> None:
            store.place_order({"petId": 7, "quantity": 1}, 1, "b", "b", NOW,
                              catalogue_pets_only=True)  # sold out...
            pets.adjust(store, 7, 1, None, 1, "restock")  # ...and back

        def read(pet_id: int, stock: int) -> bool:
            now = store.get_webhook_endpoint(endpoint.id)
            return (now is not None and store.changes_after(now.place, 1, ("pet",)) == []
                    and orjson.loads(store.pet_json(pet_id)[0])["available"] == stock)

        interposed = Interposed(  # the deliverer's reads only, not the revision's watch
            store, "revision", between,
            when=lambda: threading.current_thread().name.startswith("webhooks-"))
        with delivering(interposed, _settings(database)):  # type: ignore[arg-type]
            store.place_order({"petId": 7, "quantity": 1}, 1, "a", "a", NOW,
                              catalogue_pets_only=True)  # 1 left: read, no crossing
            wait_until(lambda: read(7, 1), message="the endpoint did not read the pet")
            interposed.arm()  # its next read, when it has waited its idle time
            wait_until(interposed.done.is_set, message="the endpoint did not read again")
            wait_until(lambda: read(7, 1), message="the endpoint did not read the changes")
    assert receiver.received == []


def test_a_pet_that_changes_faster_than_the_pace_is_sent_as_it_is_at_most_that_often(
        store: Store, database: str, caplog: pytest.LogCaptureFixture) -> None:
    """D39: a pet changing without pause (a flash sale) is sent to an endpoint at most once
    every PET_PACE_SECONDS, each message the pet as it is when read, the last one as it is
    now; another pet changed meanwhile is sent too, all in feed order. The endpoint's task
    waits out the pace itself, without stopping."""
    caplog.set_level(logging.WARNING, logger="petstore.webhooks")
    store.import_pets([{"id": 7, "name": "Rex", "stock": 1_000_000},
                       {"id": 8, "name": "Fido", "stock": 3}])
    with receiving() as receiver:
        endpoint, secret = _endpoint(store, receiver.url, tuple(webhooks.PET_TYPES))
        with delivering(store, _settings(database)) as deliverer:
            wait_until(lambda: endpoint.id in deliverer.tasks)
            task = deliverer.tasks[endpoint.id]
            changes = 0
            until = time.monotonic() + 1.0
            while time.monotonic() < until:  # a second of changes of Rex, one after another
                pets.adjust(store, 7, -1, None, 1, f"sale-{changes}")
                changes += 1
                if changes == 20:
                    pets.update(store, 8, {"name": "Fido II"})
            final = orjson.loads(store.pet_json(7)[0])
            got = receiver.wait_until(lambda got: any(
                r.message["data"] == final for r in got), timeout=10)
            assert deliverer.tasks[endpoint.id] is task
        assert _warnings(caplog) == []
        _in_feed_order(got)
        messages = receiver.verified(secret)
        assert {m["data"]["id"] for m in messages} == {7, 8}
        assert [m["data"]["name"] for m in messages if m["data"]["id"] == 8] == ["Fido II"]
        rex = [r.at for r in got if r.message["data"]["id"] == 7]
        # Sent at least the pace apart: over the span of their arrivals (a tenth of a second
        # allowed for the loopback's delays), no more than the pace lets through; sent as
        # each change came, they would be one every few milliseconds.
        assert len(rex) <= (rex[-1] - rex[0] + PET_PACE_SECONDS) / PET_PACE_SECONDS + 1, (
            f"{len(rex)} messages of one pet in {rex[-1] - rex[0]:.2f} s of {changes} changes")
        assert changes > 2 * len(rex)


def test_a_pets_pace_holds_back_no_other_pet(store: Store, database: str) -> None:
    """D39: the pace is each pet's own: ten pets changed at once are sent one after another
    as fast as the receiver answers, not a pace apart (which would take a second)."""
    with receiving() as receiver:
        _endpoint(store, receiver.url, tuple(webhooks.PET_TYPES))
        with delivering(store, _settings(database)):
            store.import_pets([{"id": n, "name": f"Pet {n}", "stock": 1}
                               for n in range(1, 11)])
            got = receiver.wait_for(10)
    assert sorted(r.message["data"]["id"] for r in got) == list(range(1, 11))
    # Held a pace apart, no two would come less than PET_PACE_SECONDS apart; half of it
    # leaves a loaded machine's delivery time room.
    gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(got)]
    assert min(gaps) < PET_PACE_SECONDS / 2, gaps


def test_a_pets_pace_runs_from_its_last_message_and_is_kept_for_many_pets() -> None:
    """D39: a pet waits for the pace counted from when it was last sent, however often it
    was looked at meanwhile; each pet has a pace of its own, kept for a hundred pets and
    more. (What a slow machine makes untestable, a late look or a late check, is not
    asserted; nothing here can fail for being slow.)"""
    ahead = Ahead()
    assert ahead.pet_sent(7) == 0.0  # never sent: at once
    sent = time.monotonic()  # it was noted sent before this
    time.sleep(PET_PACE_SECONDS / 2)
    looked = ahead.pet_sent(7)
    assert 0 <= looked <= PET_PACE_SECONDS
    wait_until(lambda: time.monotonic() >= sent + PET_PACE_SECONDS, 5)
    if looked > 0:  # looked at within its pace, not sent then: its pace has passed now
        assert ahead.pet_sent(7) == 0.0
    began = time.monotonic()
    assert all(ahead.pet_sent(pet) == 0.0 for pet in range(100, 302))
    still = [ahead.pet_sent(100), ahead.pet_sent(301)]
    if time.monotonic() - began < PET_PACE_SECONDS:
        assert min(still) > 0


def test_order_holds_under_300_changes_from_two_writers(
        store: Store, database: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="petstore.webhooks")
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url)

        def write(first: int) -> None:
            # As a client retries a 503: SQLite's lock is waited for 1 s at most (D15),
            # which a loaded machine can pass.
            opened: list[Store] = []
            _retried(lambda: opened.append(open_store(_settings(database))))
            writer = opened[0]
            try:
                for order_id in range(first, first + 150, 2):
                    _retried(lambda o=order_id: _seed(writer, o))
                    _retried(lambda o=order_id: orders.ship(writer, o, NOW))
            finally:
                writer.dispose()

        with delivering(store, _settings(database)):
            writers = [threading.Thread(target=write, args=(start,)) for start in (1, 2)]
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join()
            got = receiver.wait_until(lambda got: {r.message["data"]["id"] for r in got
                                                   if r.message["type"] == "order.shipped"}
                                      == set(range(1, 151)), timeout=30)
        # A message is sent again with its webhook-id (at least once, D28) only when its
        # attempt failed, and the store says so (no answer within the 2 s timeout, which a
        # loaded machine can pass: the receiver's late answer finds the connection gone), or
        # when its attempt could not be written (the writers held SQLite's lock past its
        # second), which the log says each time.
        once = [r for i, r in enumerate(got) if i == 0 or r.id != got[i - 1].id]
        again = [r.id for i, r in enumerate(got) if i and r.id == got[i - 1].id]
        failed = {attempt.webhook_id for attempt in store.webhook_attempts(endpoint.id, None, 1000)
                  if attempt.status is None or attempt.status >= 300}
        stopped = [m for m in _warnings(caplog) if "delivery stopped" in m]
        unexplained = [webhook_id for webhook_id in again if webhook_id not in failed]
        assert len(unexplained) <= len(stopped), (unexplained, stopped)
        _in_feed_order(once)
        last = {r.message["data"]["id"]: r.message["data"]["status"] for r in got}
        assert set(last.values()) == {"shipped"}


def _failing(answers: list[tuple[int, dict[str, str], bytes]]
             ) -> Callable[[Received], tuple[int, dict[str, str], bytes]]:
    """A receiver's answers: these in turn, then 204."""
    def answer(_: Received) -> tuple[int, dict[str, str], bytes]:
        return answers.pop(0) if answers else (204, {}, b"")
    return answer


def test_failures_are_retried_on_the_schedule_then_disable_and_enabling_loses_nothing(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="petstore.webhooks")
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    clock = Clock()
    with receiving() as receiver:
        receiver.answer = _failing([(500, {}, b"no")] + [(503, {"Retry-After": "600"}, b"")]
                                   + [(500, {}, b"no")] * 8)
        endpoint, _ = _endpoint(store, receiver.url)
        _seed(store, 1)
        refused = _counted("refused")
        _unset_lags(endpoint.id)
        with delivering(store, _settings(database, webhook_lease_seconds=1e6),
                        clock) as deliverer:
            receiver.wait_for(1)
            wait_until(lambda: store.get_webhook_endpoint(endpoint.id).attempt == 1)
            assert _counted("refused") == refused + 1
            task = deliverer.tasks[endpoint.id]
            # After 4 s nothing; after 5 s the second attempt.
            clock.advance(4)
            clock.looked_again()
            assert len(receiver.received) == 1
            clock.advance(1)
            receiver.wait_for(2)
            wait_until(lambda: store.get_webhook_endpoint(endpoint.id).attempt == 2)
            lag = _lag(endpoint.id)
            # A change has waited since the first attempt, a few seconds at most.
            assert lag is not None and 0 < lag < 60
            # It answered 503 with Retry-After: 600, longer than the schedule's 300 s.
            waiting = store.get_webhook_endpoint(endpoint.id)
            assert waiting.next_attempt_at == pytest.approx(clock.now + 600, abs=1)
            for step, delay in enumerate(webhooks.SCHEDULE[2:], start=3):
                # One task waits through every retry, keeping what it read ahead and its
                # pets' pace.
                assert deliverer.tasks[endpoint.id] is task
                clock.advance(600 if step == 3 else delay)
                receiver.wait_for(step)
                wait_until(lambda s=step: store.get_webhook_endpoint(endpoint.id).attempt == s)
            # None stopped on the way, to be started again by a claim.
            assert [m for m in _warnings(caplog) if "delivery stopped" in m] == []
            disabled = store.get_webhook_endpoint(endpoint.id)
            assert not disabled.enabled and disabled.disabled_reason.startswith("10 attempts")
            assert len({r.id for r in receiver.received}) == 1  # one message, ten attempts
            # The disabled endpoint's task ends and is let go: nothing is kept for it.
            wait_until(lambda: endpoint.id not in deliverer.tasks)
            _seed(store, 2)  # a change while disabled
            clock.looked_again(3)  # three claims (every second) since
            assert len(receiver.received) == 10
            webhooks.update(store, None, endpoint.id, {"enabled": True})
            got = receiver.wait_for(12)
        assert [r.message["data"]["id"] for r in got[9:]] == [1, 1, 2]
    attempts = store.webhook_attempts(endpoint.id, None, 20)
    assert [a.status for a in attempts][-2:] == [503, 500] and attempts[0].status == 204
    store.dispose()


def test_an_endpoint_leased_to_another_host_is_left_to_it(store: Store,
                                                          database: str) -> None:
    """D28: a deliverer sends only while it holds the endpoint's lease: once another host
    holds it (and it has not run out), this one's task for it ends at its next look at the
    endpoint, its claims pass it over, and it sends nothing more to it."""
    clock = Clock()
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        with delivering(store, _settings(database), clock) as deliverer:
            _seed(store, 1)
            receiver.wait_for(1)
            # Another host claims it at a moment past this one's lease (as this clock
            # reads, the new lease has a long way to run). A claim skips a row another
            # transaction holds (PostgreSQL's SKIP LOCKED), as this deliverer's own write
            # of its attempt may: the other host claims again until it has it.
            wait_until(lambda: [e.id for e in store.claim_webhook_endpoints(
                "another host", clock.now + 60, clock.now + 3600, 10)] == [endpoint.id],
                message="the other host never took the endpoint's lease")
            # Only a clock a minute ahead lets the other host take a lease this deliverer
            # still holds by its own: its task may begin one more message on the endpoint
            # as its last write left it, whose lease by this deliverer's clock still runs,
            # the window of any lease (on hosts whose clocks agree, this deliverer renews it
            # long before it runs out). The task ends when it next reads the endpoint
            # (within IDLE_SECONDS, with nothing to send); no claim starts another.
            wait_until(lambda: endpoint.id not in deliverer.tasks,
                       message="the deliverer's task went on without the lease")
            _seed(store, 2)
            clock.looked_again(3)  # three claims (every second) since
            assert [r.message["data"]["id"] for r in receiver.received] == [1]
        assert store.get_webhook_endpoint(endpoint.id).lease_owner == "another host"


def test_a_410_disables_the_endpoint_at_once_keeping_its_place(
        store: Store, database: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="petstore.webhooks")
    gone_before = _counted("gone")
    with receiving(answer=_failing([(410, {}, b"gone")])) as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        with delivering(store, _settings(database)):
            _seed(store, 1)
            receiver.wait_for(1)
            wait_until(lambda: not store.get_webhook_endpoint(endpoint.id).enabled)
        assert _counted("gone") == gone_before + 1
        gone = store.get_webhook_endpoint(endpoint.id)
        assert gone.disabled_reason == "the receiver answered 410 Gone"
        assert _warnings(caplog) == [
            f"webhook endpoint {endpoint.id} disabled: the receiver answered 410 Gone"]
        assert (gone.position, gone.order_id) == (endpoint.position, endpoint.order_id)


def _held(release: threading.Event, count: int = 1, status: int = 204
          ) -> Callable[[Received], tuple[int, dict[str, str], bytes]]:
    """A receiver's answers: the first count requests held, unanswered, until release is
    set (or for a minute), then answered with status; the others 204."""
    held = iter(range(count))

    def answer(_: Received) -> tuple[int, dict[str, str], bytes]:
        if next(held, None) is not None:
            release.wait(60)
            return status, {}, b""
        return 204, {}, b""
    return answer


def test_a_replay_while_a_message_is_in_flight_is_not_undone_by_its_answer(
        store: Store, database: str) -> None:
    """The delivery of a message sent before a replay moves its place only while the place
    is still the one it was sent from: the replay's place stands, and the feed is sent again
    from there."""
    release = threading.Event()
    with receiving(answer=_held(release)) as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        _seed(store, 1, 2)
        with delivering(store, _settings(database)):
            receiver.wait_for(1)  # order 1, held unanswered
            webhooks.replay(store, None, endpoint.id, None)  # from the beginning
            release.set()
            got = receiver.wait_for(3)
            wait_until(lambda: store.get_webhook_endpoint(endpoint.id).order_id == 2)
    assert [r.message["data"]["id"] for r in got] == [1, 1, 2]
    assert got[0].id == got[1].id  # the same change, sent again with its webhook-id


def test_a_replay_while_changes_are_passed_over_is_not_undone(store: Store,
                                                              database: str) -> None:
    """The changes an endpoint did not ask for move its place past them only while the
    place is still where they were read from: a replay at that moment stands, and what it
    asks for is sent again."""
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url, ("order.shipped",))
        _seed(store, 5)
        orders.ship(store, 5, NOW)
        interposed = Interposed(
            store, "webhook_delivered",
            lambda *_: webhooks.replay(store, None, endpoint.id, None))  # from the beginning
        with delivering(interposed, _settings(database)):  # type: ignore[arg-type]
            receiver.wait_for(1)  # order 5, shipped
            wait_until(lambda: store.get_webhook_endpoint(endpoint.id).order_id == 5)
            interposed.arm()
            _seed(store, 1, 2)  # not asked for: passed over, and the replay comes between
            got = receiver.wait_for(2)
            wait_until(interposed.done.is_set)
            wait_until(lambda: store.get_webhook_endpoint(endpoint.id).order_id == 2)
    assert [(r.message["type"], r.message["data"]["id"]) for r in got] == [
        ("order.shipped", 5), ("order.shipped", 5)]
    assert got[0].id == got[1].id


def test_a_failure_answered_after_a_replay_does_not_undo_it(tmp_path: Path) -> None:
    """A message that fails after a replay moved its endpoint leaves the replay's place and
    cleared retries: the feed is sent again at once, not on the retry schedule."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    release = threading.Event()
    with receiving(answer=_held(release, status=500)) as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        _seed(store, 1)
        # The clock stands still: a retry the failure scheduled would never come.
        with delivering(store, _settings(database), Clock()):
            receiver.wait_for(1)
            webhooks.replay(store, None, endpoint.id, None)
            release.set()
            got = receiver.wait_for(2)
            wait_until(lambda: len(store.webhook_attempts(endpoint.id, None, 5)) == 2)
    assert got[0].id == got[1].id  # the same change, sent again at once
    assert [a.status for a in store.webhook_attempts(endpoint.id, None, 5)] == [204, 500]
    store.dispose()


def test_a_retry_after_date_puts_the_next_attempt_off_until_then(tmp_path: Path) -> None:
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    clock = Clock()
    in_an_hour = email.utils.formatdate(time.time() + 3600, usegmt=True)
    with receiving(answer=_failing([(503, {"Retry-After": in_an_hour}, b"")])) as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        _seed(store, 1)
        with delivering(store, _settings(database, webhook_lease_seconds=1e6), clock):
            receiver.wait_for(1)
            wait_until(lambda: store.get_webhook_endpoint(endpoint.id).attempt == 1)
    waiting = store.get_webhook_endpoint(endpoint.id)
    assert waiting.next_attempt_at == pytest.approx(clock.now + 3600, abs=5)
    store.dispose()


def _claimed_again(store: Store, endpoint_id: int, times: int = 1) -> None:
    """Wait until the deliverer has renewed the endpoint's lease this many more times: a
    claim began after this call did (the second, only once the first's prune, if any,
    ended)."""
    for _ in range(times):
        renewed = store.get_webhook_endpoint(endpoint_id).lease_until
        wait_until(lambda r=renewed: store.get_webhook_endpoint(endpoint_id).lease_until > r,
                   message="the deliverer did not claim again")


def _all_held_by(store: Store, deliverer: Deliverer, endpoints: list[int]) -> bool:
    """Whether the deliverer holds the lease of every one of the endpoints."""
    return all((endpoint := store.get_webhook_endpoint(e)) is not None
               and endpoint.lease_owner == deliverer.owner for e in endpoints)


def test_a_hanging_endpoint_delays_only_itself(tmp_path: Path) -> None:
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    release = threading.Event()
    with ExitStack() as stack:
        hanging = stack.enter_context(receiving(answer=_held(release)))
        others = [stack.enter_context(receiving()) for _ in range(19)]
        endpoints = [_endpoint(store, r.url)[0].id for r in (hanging, *others)]
        # An attempt may take a minute: the others' messages come while it hangs.
        with delivering(store, _settings(database, webhook_timeout=60.0)) as deliverer:
            try:
                wait_until(lambda: _all_held_by(store, deliverer, endpoints),
                           message="the deliverer did not claim every endpoint")
                for order_id in (1, 2, 3):
                    _seed(store, order_id)
                    for receiver in others:
                        got = receiver.wait_for(order_id)[-1]
                        assert got.message["data"]["id"] == order_id
                # Meanwhile the hanging endpoint holds its first message, unanswered.
                assert [r.message["data"]["id"] for r in hanging.wait_for(1)] == [1]
                assert len(hanging.received) == 1
                assert store.webhook_attempts(endpoints[0], None, 1) == []
            finally:
                release.set()
            got = hanging.wait_for(3)
        assert [r.message["data"]["id"] for r in got] == [1, 2, 3]
    store.dispose()


def test_two_hosts_share_ten_endpoints_each_change_sent_once(postgres_database: str) -> None:
    store = open_store(_settings(postgres_database))
    other = open_store(_settings(postgres_database))
    with ExitStack() as stack:
        receivers = [stack.enter_context(receiving()) for _ in range(10)]
        for receiver in receivers:
            _endpoint(store, receiver.url)
        first = stack.enter_context(delivering(store, _settings(postgres_database), owner="a"))
        second = stack.enter_context(delivering(other, _settings(postgres_database),
                                                owner="b"))
        for order_id in range(1, 31):
            _seed(store if order_id % 2 else other, order_id)
        for receiver in receivers:
            got = receiver.wait_until(lambda got: {r.message["data"]["id"] for r in got}
                                      == set(range(1, 31)), timeout=20)
            _in_feed_order(got)
        held = len(first.tasks) + len(second.tasks)
        assert held == 10
    store.dispose()
    other.dispose()


def test_nothing_is_sent_to_a_refused_address_nor_through_a_redirect(tmp_path: Path) -> None:
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    with receiving() as inside, receiving() as redirecting:
        redirecting.answer = _failing([(302, {"Location": inside.url}, b"")] * 20)
        # Added by hand past the creation's check, as if the rules had been other then.
        refused = store.create_webhook_endpoint(
            api_key_id=None, url=inside.url, types=(), description="", secret=webhooks.new_secret(),
            place=(store.revision(), "pet", 2**63 - 1), now=NOW)
        _seed(store, 1)
        # The deliverer allows only 127.0.0.2: the inside receiver (127.0.0.1) is refused.
        only_redirecting = _settings(database, webhook_allowed_networks="127.0.0.2/32")
        with delivering(store, only_redirecting):
            wait_until(lambda: bool(store.webhook_attempts(refused.id, None, 1)))
        attempt = store.webhook_attempts(refused.id, None, 1)[0]
        assert attempt.status is None and "not public" in (attempt.error or "")
        assert inside.received == []
        store.delete_webhook_endpoint(refused.id)
        redirect, _ = _endpoint(store, redirecting.url)
        _seed(store, 2)
        with delivering(store, _settings(database)):
            redirecting.wait_for(1)
            wait_until(lambda: bool(store.webhook_attempts(redirect.id, None, 1)))
        assert store.webhook_attempts(redirect.id, None, 1)[0].status == 302
        assert "redirects are not followed" in (store.webhook_attempts(redirect.id, None, 1)[0]
                                                .error or "")
        assert inside.received == []  # the redirect was not followed
    store.dispose()


class Blips:
    """A store whose named methods raise StoreUnavailable on their next calls, as a database
    that blips does (blip(name, times)); every other call goes to the store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.left: dict[str, int] = {}
        self.lock = threading.Lock()

    def blip(self, name: str, times: int = 1) -> None:
        with self.lock:
            self.left[name] = times

    def blipped(self, name: str) -> bool:
        """Whether every failure asked of name has been raised."""
        with self.lock:
            return self.left.get(name, 0) == 0

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self.lock:
                if self.left.get(name, 0) > 0:
                    self.left[name] -= 1
                    raise StoreUnavailable("SQLite: database is locked")
            return method(*args, **kwargs)
        return call


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "petstore.webhooks" and r.levelno == logging.WARNING]


def test_a_store_that_fails_and_recovers_costs_one_warning_and_no_message(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A claim, a read of the feed and the write of an attempt each fail once: each is said
    once, and delivery goes on from the endpoint's place, every change in order; a message
    whose attempt was not written is sent again with its webhook-id (at least once)."""
    caplog.set_level(logging.WARNING, logger="petstore.webhooks")
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    blips = Blips(store)
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        blips.blip("claim_webhook_endpoints", 3)  # down for its first three claims
        with delivering(blips, _settings(database)) as deliverer:  # type: ignore[arg-type]
            wait_until(lambda: blips.blipped("claim_webhook_endpoints"))
            _seed(store, 1)
            receiver.wait_for(1)
            assert _warnings(caplog) == [
                "the webhook deliverer cannot claim endpoints (SQLite: database is locked); "
                "it tries again", "the webhook deliverer reaches the database again"]

            for blipping, order_id in (("changes_after", 2), ("webhook_attempted", 3)):
                caplog.clear()
                blips.blip(blipping)
                _seed(store, order_id)
                got = receiver.wait_until(
                    lambda got, o=order_id, b=blipping: got[-1].message["data"]["id"] == o
                    and blips.blipped(b)
                    and store.webhook_attempts(endpoint.id, None, 1)[0].webhook_id == got[-1].id)
                assert _warnings(caplog) == [
                    f"webhook endpoint {endpoint.id}: delivery stopped (SQLite: database is "
                    "locked); it goes on shortly"]
            _seed(store, 4)
            got = receiver.wait_for(len(got) + 1)
            wait_until(lambda: store.webhook_attempts(endpoint.id, None, 1)[0].webhook_id
                       == got[-1].id)
            assert deliverer.tasks  # it still holds the endpoint
    # Each change in feed order; the third, whose attempt was not written, twice.
    ids = [r.message["data"]["id"] for r in got]
    assert ids == [1, 2, 3, 3, 4], ids
    assert got[2].id == got[3].id
    _in_feed_order(got[:3] + got[4:])
    held = store.get_webhook_endpoint(endpoint.id)
    assert held is not None and held.enabled and held.attempt == 0
    assert held.order_id == 4  # its place: after the last change
    # Nothing else was said: no error of a task that failed unseen.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    store.dispose()


def test_a_receiver_that_does_not_answer_in_time_is_retried_keeping_its_place(
        tmp_path: Path) -> None:
    """An attempt with no answer within PETSTORE_WEBHOOK_TIMEOUT is a failure: recorded
    with no status, the endpoint's place kept, and the message sent again on the schedule
    (5 s later) with the same webhook-id."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    clock = Clock()
    release = threading.Event()
    unanswered = _counted("no_answer")
    with receiving(answer=_held(release)) as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        _seed(store, 1)
        settings = _settings(database, webhook_timeout=1.0, webhook_lease_seconds=1e6)
        try:
            with delivering(store, settings, clock):
                receiver.wait_for(1)
                wait_until(lambda: store.webhook_attempts(endpoint.id, None, 1),
                           message="the attempt was not recorded")
                (attempt,) = store.webhook_attempts(endpoint.id, None, 5)
                assert (attempt.status, attempt.error) == (None, "no answer within 1 s")
                assert attempt.duration_ms >= 1000
                assert _counted("no_answer") == unanswered + 1
                waiting = store.get_webhook_endpoint(endpoint.id)
                assert waiting is not None and waiting.attempt == 1
                assert (waiting.position, waiting.order_id) == (endpoint.position,
                                                                endpoint.order_id)
                assert waiting.next_attempt_at == pytest.approx(clock.now + 5, abs=1)
                clock.advance(5)
                got = receiver.wait_for(2)
                wait_until(lambda: len(store.webhook_attempts(endpoint.id, None, 5)) == 2)
        finally:
            release.set()
    assert got[0].id == got[1].id and got[1].message["data"]["id"] == 1
    assert [a.status for a in store.webhook_attempts(endpoint.id, None, 5)] == [204, None]
    delivered = store.get_webhook_endpoint(endpoint.id)
    assert delivered is not None and delivered.attempt == 0
    assert delivered.order_id == 1 and delivered.position > endpoint.position
    store.dispose()


class Counted:
    """A store that counts the calls of changes_after that found changes, once armed."""

    def __init__(self, store: Store) -> None:
        self.store, self.armed, self.found = store, False, 0

    def changes_after(self, *args: Any) -> Any:
        changes = self.store.changes_after(*args)
        if self.armed and changes:
            self.found += 1
        return changes

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_endpoints_woken_at_one_place_share_one_read(tmp_path: Path) -> None:
    """Ten endpoints that delivered the same change wait at the same place; the next change
    wakes them all, and they read it from the feed once between them, not ten times."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    counted = Counted(store)
    with receiving() as receiver:
        endpoints = [_endpoint(store, receiver.url)[0].id for _ in range(10)]
        _unset_lags(*endpoints)
        with delivering(counted, _settings(database)):  # type: ignore[arg-type]
            _seed(store, 1)
            receiver.wait_for(10)
            wait_until(lambda: all(store.get_webhook_endpoint(e).order_id == 1
                                   for e in endpoints))
            # Each task, its message sent (its lag set above 0), waits for the next change
            # with its lag back to 0: none is still reading when the next one comes.
            wait_until(lambda: all(_lag(e) == 0 for e in endpoints),
                       message="an endpoint's task did not come to wait")
            counted.armed = True
            _seed(store, 2)
            got = receiver.wait_for(20)
    assert sorted(r.message["data"]["id"] for r in got[10:]) == [2] * 10
    # Woken together, they share the read under way; a slow machine may wake a few late.
    assert counted.found <= 3, counted.found
    store.dispose()


def test_a_clean_stop_lets_the_message_in_flight_finish_and_records_its_answer(
        tmp_path: Path) -> None:
    """A message the receiver answers while the deliverer stops (within the attempt
    timeout) is recorded as delivered and the endpoint moves past it: it is not sent again
    by whoever takes the endpoint next."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    release = threading.Event()
    with receiving(answer=_held(release)) as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        _seed(store, 1)
        with delivering(store, _settings(database, webhook_timeout=10.0)) as deliverer:
            receiver.wait_for(1)  # held unanswered

            def answer_once_stopping() -> None:
                wait_until(lambda: deliverer.stopping, message="the deliverer did not stop")
                release.set()
            answering = threading.Thread(target=answer_once_stopping, daemon=True)
            answering.start()
        answering.join(10)
    (attempt,) = store.webhook_attempts(endpoint.id, None, 5)
    assert (attempt.status, attempt.error) == (204, None)
    stopped = store.get_webhook_endpoint(endpoint.id)
    assert stopped is not None and stopped.order_id == 1 and stopped.lease_owner is None
    store.dispose()


def test_a_stop_during_an_attempt_never_answered_records_it_as_unanswered(
        tmp_path: Path) -> None:
    """The stop waits for the attempt's own timeout: the attempt is recorded as one with
    no answer (to be retried on the schedule), not cut short and lost."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    release = threading.Event()
    try:
        with receiving(answer=_held(release)) as receiver:
            endpoint, _ = _endpoint(store, receiver.url)
            _seed(store, 1)
            with delivering(store, _settings(database, webhook_timeout=1.0)):
                receiver.wait_for(1)  # held, and never answered in time
            (attempt,) = store.webhook_attempts(endpoint.id, None, 5)
            assert (attempt.status, attempt.error) == (None, "no answer within 1 s")
            stopped = store.get_webhook_endpoint(endpoint.id)
            assert stopped is not None and stopped.attempt == 1 and stopped.order_id != 1
    finally:
        release.set()
    store.dispose()


def test_a_clean_stop_gives_its_leases_back_for_another_host_to_claim_at_once(
        tmp_path: Path) -> None:
    """Tasks with nothing in flight stop at once, not after the attempt timeout (30 s
    here), every lease is given back, and the connections to receivers are closed."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    with receiving() as receiver:
        endpoints = [_endpoint(store, receiver.url)[0].id for _ in range(3)]
        # Leases of a day: only giving them back frees them before then.
        settings = _settings(database, webhook_lease_seconds=86_400, webhook_timeout=30.0)
        with delivering(store, settings) as first:
            wait_until(lambda: _all_held_by(store, first, endpoints),
                       message="the deliverer did not claim every endpoint")
            _seed(store, 1)
            receiver.wait_for(3)  # each endpoint's message delivered, none in flight
            assert receiver.connections > 0  # kept alive between messages
            wait_until(lambda: all(store.get_webhook_endpoint(e).order_id == 1
                                   for e in endpoints))
            # Each task counts itself out of the sending when its attempt is recorded.
            wait_until(lambda: not first.sending, message="an endpoint stayed sending")
            stopping = time.monotonic()
        assert time.monotonic() - stopping < 10
        # Its connections to the receiver closed: none left half-open to the receiver, nor
        # an "Unclosed client session" in the log as the process ends.
        wait_until(lambda: receiver.connections == 0,
                   message="the stopped deliverer left connections open to the receiver")
        for endpoint_id in endpoints:
            left = store.get_webhook_endpoint(endpoint_id)
            assert left is not None and left.lease_owner is None
        now = time.time()
        taken = store.claim_webhook_endpoints("another host", now, now + 60, 200)
        assert [e.id for e in taken] == endpoints
    store.dispose()


def test_a_stop_gives_back_the_lease_of_an_endpoint_disabled_meanwhile(tmp_path: Path) -> None:
    """An endpoint disabled while held keeps its lease (its task ends; claims pass it
    over); the stop gives that lease back too, so that enabled again it is taken by
    another host at once, not when a lease of a day runs out."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    with receiving() as receiver:
        disabled, kept = (_endpoint(store, receiver.url)[0].id for _ in range(2))
        settings = _settings(database, webhook_lease_seconds=86_400)
        with delivering(store, settings) as deliverer:
            wait_until(lambda: _all_held_by(store, deliverer, [disabled, kept]),
                       message="the deliverer did not claim both endpoints")
            webhooks.update(store, None, disabled, {"enabled": False})
            _claimed_again(store, kept)  # a claim after the disable renewed the other
            # Its task has seen it disabled and ended: only the store remembers the lease.
            wait_until(lambda: disabled not in deliverer.tasks,
                       message="the disabled endpoint's task went on")
            assert store.get_webhook_endpoint(disabled).lease_owner == deliverer.owner
        left = store.get_webhook_endpoint(disabled)
        assert left is not None and left.lease_owner is None
        webhooks.update(store, None, disabled, {"enabled": True})
        now = time.time()
        taken = store.claim_webhook_endpoints("another host", now, now + 60, 200)
        assert [e.id for e in taken] == [disabled, kept]
    store.dispose()


def test_a_deliverer_prunes_the_attempts_log_when_it_starts_then_hourly(
        store: Store, database: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's deliverer prunes the attempts log at its first claim, then hourly: an
    attempt older than PETSTORE_WEBHOOK_ATTEMPTS_KEPT_DAYS is gone, a recent one stays. The
    deliverer's monotonic clock is the test's: from 0 at first, as on a host just booted
    (less than the hour between prunes), then days on, when it prunes again; an old attempt
    written after that prune stays through the claims of the hour, and goes after it."""
    monotonic = [0.0]
    monkeypatch.setattr(deliverer_module, "time", SimpleNamespace(
        time=time.time, monotonic=lambda: monotonic[0]))
    settings = _settings(database)
    endpoint, _ = _endpoint(store, "http://127.0.0.1:9/")

    # Retried: the deliverer's claims hold SQLite's write lock now and then.
    def attempted(webhook_id: str, age: int) -> None:
        at = orders.format_time(dt.datetime.now(dt.UTC) - dt.timedelta(days=age))
        _retried(lambda: store.record_webhook_attempt(
            endpoint_id=endpoint.id, webhook_id=webhook_id, type="order.placed", attempt=1,
            status=204, duration_ms=1.0, response="", error=None, now=at))

    def kept() -> list[str]:
        return sorted(a.webhook_id for a in webhooks.deliveries(store, None, endpoint.id)[0])

    old = settings.webhook_attempts_kept_days + 1
    attempted("msg_1_1", old)
    attempted("msg_1_2", 0)
    with delivering(store, settings):
        wait_until(lambda: kept() == ["msg_1_2"], 10, "the old attempt was kept at the start")
        attempted("msg_1_3", old)
        monotonic[0] = 1_000_000.0  # days on: the next claim prunes
        wait_until(lambda: kept() == ["msg_1_2"], 10, "the log was not pruned days on")
        attempted("msg_1_4", old)
        _claimed_again(store, endpoint.id, 2)
        assert kept() == ["msg_1_2", "msg_1_4"], "the log was pruned again within the hour"
        monotonic[0] += deliverer_module.PRUNE_SECONDS + 1
        wait_until(lambda: kept() == ["msg_1_2"], 10, "the log was not pruned an hour on")


def test_an_endpoint_whose_lease_ran_out_on_another_host_is_taken_over(
        store: Store, database: str) -> None:
    """D28: a worker that died leaves its leases; once one has run out, a deliverer
    claims the endpoint and delivers to it."""
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        now = time.time()
        # A host that died a minute ago holding the endpoint's lease, which ran out since.
        assert [e.id for e in store.claim_webhook_endpoints(
            "a host that died", now - 60, now - 1, 10)] == [endpoint.id]
        with delivering(store, _settings(database)) as deliverer:
            _seed(store, 1)
            assert receiver.wait_for(1)[0].message["data"]["id"] == 1
            assert _all_held_by(store, deliverer, [endpoint.id])


@contextmanager
def _stopped_during(store: Store, database: str, call: str,
                    during: Callable[[Deliverer, int], None],
                    webhook_timeout: float) -> Iterator[tuple[Deliverer, int]]:
    """A deliverer holding one endpoint (leases of a day) whose next store call `call`,
    once a message is there to send, runs during(deliverer, endpoint id) first; the body
    runs once that call has begun, and the deliverer stops as the body ends."""
    entered = threading.Event()

    def before(*_: Any) -> None:
        entered.set()
        during(deliverer, endpoint.id)

    interposed = Interposed(store, call, before)
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        settings = _settings(database, webhook_lease_seconds=86_400,
                             webhook_timeout=webhook_timeout)
        with delivering(interposed, settings) as deliverer:
            wait_until(lambda: _all_held_by(store, deliverer, [endpoint.id]),
                       message="the deliverer did not claim the endpoint")
            interposed.arm()
            _seed(store, 1)
            assert entered.wait(10), f"no {call} came after the arming"
            yield deliverer, endpoint.id


def _given_back(store: Store, endpoint_id: int) -> bool:
    left = store.get_webhook_endpoint(endpoint_id)
    return left is not None and left.lease_owner is None


def test_a_claim_under_way_when_the_stop_begins_ends_before_the_leases_are_given_back(
        tmp_path: Path) -> None:
    """The claim loop is let finish its claim, not cancelled: a claim cancelled in its
    thread would still commit, and could take the endpoint again after the stop gave it
    back, holding it for a lease of a day."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    before_claim: list[float | None] = []
    at_release: list[float | None] = []

    def lease_until(endpoint_id: int) -> float | None:
        endpoint = store.get_webhook_endpoint(endpoint_id)
        assert endpoint is not None
        return endpoint.lease_until

    def at_the_stop(deliverer: Deliverer, endpoint_id: int) -> None:
        before_claim.append(lease_until(endpoint_id))
        wait_until(lambda: deliverer.stopping, message="the deliverer did not stop")

    # The stop's release, noting the lease as it finds it: renewed by the claim under way.
    releasing = Interposed(store, "release_webhook_leases",
                           lambda *_: at_release.append(lease_until(endpoint_id)), armed=True)
    with _stopped_during(releasing, database, "claim_webhook_endpoints",  # type: ignore[arg-type]
                         at_the_stop, 10.0) as (_, endpoint_id):
        pass
    assert before_claim[0] is not None and at_release[0] is not None
    assert at_release[0] > before_claim[0]  # that claim committed first
    assert _given_back(store, endpoint_id)
    store.dispose()


@contextmanager
def _hanging() -> Iterator[Callable[..., None]]:
    """A store call that hangs, as a database that stops answering, until the test ends
    (then it fails)."""
    ended = threading.Event()

    def hang(*_: Any) -> None:
        ended.wait(60)
        raise StoreUnavailable("the database answered at last")

    try:
        yield hang
    finally:
        ended.set()


@pytest.mark.parametrize("call", ["claim_webhook_endpoints", "webhook_attempted"],
                         ids=["a claim", "an attempt's record"])
def test_a_store_that_hangs_holds_the_stop_no_longer_than_an_attempt_may(
        tmp_path: Path, call: str) -> None:
    """A database that stops answering does not hang the worker's end: the stop waits for
    the claim or the write under way as it would for a message in flight, the attempt
    timeout and a second in all, then goes on and gives its leases back (what it left
    undone is as a killed worker's: sent again by the next holder)."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    with _hanging() as hang, _stopped_during(store, database, call, hang, 1.0) as (_, held):
        stopping = time.monotonic()
    # 3 s is the bound (a second of it to give the leases back); the rest is room for a
    # loaded machine.
    assert time.monotonic() - stopping < 3 + LOADED_ROOM
    assert _given_back(store, held)
    store.dispose()


def test_a_stop_sends_nothing_new_while_it_waits_for_a_message_in_flight(
        tmp_path: Path) -> None:
    """Only the message in flight may finish: an endpoint reading the feed as the stop
    begins sends nothing of what it reads (what it began, the stop would cut short, and
    the next holder send again). Its task ends at once; the read ends alone."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    release, reading = threading.Event(), threading.Event()

    def held_read(*_: Any) -> None:  # the idle endpoint's next read, until the stop began
        reading.set()
        wait_until(lambda: deliverer.stopping, message="the deliverer did not stop")

    interposed = Interposed(store, "changes_after", held_read)
    with receiving(answer=_held(release)) as busy, receiving() as idle:
        busy_endpoint, _ = _endpoint(store, busy.url)
        idle_endpoint, _ = _endpoint(store, idle.url)
        _seed(store, 1)
        with delivering(interposed, _settings(database, webhook_timeout=10.0)) as deliverer:
            busy.wait_for(1)  # held unanswered
            idle.wait_for(1)
            wait_until(lambda: store.get_webhook_endpoint(idle_endpoint.id).order_id == 1,
                       message="the idle endpoint did not record its message")
            interposed.arm()
            _seed(store, 2)  # what that read finds
            assert reading.wait(10), "the idle endpoint did not read again"

            def answer_once_the_reader_is_stopped() -> None:
                wait_until(lambda: deliverer.stopping, message="the deliverer did not stop")
                wait_until(lambda: idle_endpoint.id not in deliverer.tasks,
                           message="the reading endpoint's task went on")
                release.set()
            answering = threading.Thread(target=answer_once_the_reader_is_stopped,
                                         daemon=True)
            answering.start()
        answering.join(10)
    assert [r.message["data"]["id"] for r in idle.received] == [1]
    stopped = store.get_webhook_endpoint(busy_endpoint.id)
    assert stopped is not None and stopped.order_id == 1  # its answer recorded
    store.dispose()


def test_a_store_that_hangs_as_the_leases_are_given_back_does_not_hang_the_stop(
        tmp_path: Path) -> None:
    """The leases are then left to run out, as a killed worker's are."""
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    with _hanging() as hang, receiving() as receiver:
        interposed = Interposed(store, "release_webhook_leases", hang, armed=True)
        endpoint, _ = _endpoint(store, receiver.url)
        with delivering(interposed, _settings(database, webhook_timeout=1.0)) as deliverer:
            wait_until(lambda: _all_held_by(store, deliverer, [endpoint.id]),
                       message="the deliverer did not claim the endpoint")
            stopping = time.monotonic()
        # 3 s is the bound (its last second to give the leases back); the rest is room
        # for a loaded machine.
        assert time.monotonic() - stopping < 3 + LOADED_ROOM
    store.dispose()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_deliverer_alone_delivers_until_a_signal_then_gives_its_lease_back(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, signum: int) -> None:
    """`petstore webhooks deliver` (deliverer.run_alone), in this process: it delivers, and
    SIGINT or SIGTERM stops it cleanly, its lease given back and its place kept."""
    caplog.set_level(logging.INFO, logger="petstore.webhooks")
    database = str(tmp_path / "petstore.db")
    store = open_store(_settings(database))
    with receiving() as receiver:
        endpoint, _ = _endpoint(store, receiver.url)
        _seed(store, 1)

        def signal_once_sent() -> None:
            try:
                receiver.wait_for(1)
                wait_until(lambda: store.webhook_attempts(endpoint.id, None, 1) != [])
            finally:  # whatever came, run_alone is stopped, as an operator stops it
                os.kill(os.getpid(), signum)

        signalling = threading.Thread(target=signal_once_sent, daemon=True)
        signalling.start()
        run_alone(_settings(database))
        signalling.join(5)
        assert [r.message["data"]["id"] for r in receiver.wait_for(1)] == [1]
    assert [r.getMessage() for r in caplog.records] == [
        f"delivering webhooks from {database}", "stopped delivering webhooks"]
    left = store.get_webhook_endpoint(endpoint.id)
    assert left is not None and left.lease_owner is None and left.order_id == 1
    store.dispose()
