"""Webhook endpoints and attempts over each store (D28): each change records its
kind, endpoints are leased to one owner at a time, a place in the feed moves only forward
and only for the lease's owner, the attempts log pages newest first and is pruned by age."""

from __future__ import annotations

import threading
from typing import Any

from app.core import orders, webhooks
from app.core.errors import WebhookEndpointLimitReached
from app.core.storage import Store
from app.core.storage.records import Attempted
from tests.core.storage.conftest import Place

NOW = "2026-11-24T10:00:00Z"


def _endpoint(store: Store, key_id: int | None = None, url: str = "https://example.com/h"):
    return store.create_webhook_endpoint(api_key_id=key_id, url=url, types=("order.shipped",),
                                         description="d", secret="whsec_x",
                                         place=(0, "order", 0), now=NOW)


def test_each_change_records_its_kind_whoever_makes_it(store: Store, place: Place) -> None:
    store.import_orders([{"id": 1, "petId": 1, "quantity": 1}])
    kinds = {c.item_id: c.kind for c in store.changes_after((-1, "order", 0), 100)}
    assert kinds[1] == "changed"  # an import
    orders.ship(store, 1, NOW)
    orders.complete(store, 1)
    changes = store.changes_after((-1, "order", 0), 100)
    assert [(c.item_id, c.kind) for c in changes if c.item_id == 1] == [(1, "completed")]
    store.import_orders([{"id": 3, "petId": 1, "quantity": 1}])
    orders.cancel(store, 3, None)
    assert store.changes_after((-1, "order", 0), 100)[-1].kind == "cancelled"
    place.sql("UPDATE orders SET quantity = 5 WHERE id = 3")  # a hand edit
    last = store.changes_after((-1, "order", 0), 100)[-1]
    assert (last.item_id, last.kind) == (3, "changed")


def test_a_placed_order_is_placed(store: Store) -> None:
    key = store.create_key(digest="d" * 64, prefix="p", name="n", plan="free",
                           per_minute=None, per_day=None, now=NOW)
    placed = store.place_order({"petId": 2, "quantity": 1}, key.id, "k", "f", NOW)
    change = store.changes_after((-1, "order", 0), 10)[-1]
    assert (change.item_id, change.kind) == (placed.order["id"], "placed")
    assert webhooks.message_type(change) == "order.placed"


def test_endpoints_are_stored_listed_per_key_updated_and_deleted(store: Store) -> None:
    first = _endpoint(store, 1)
    second = _endpoint(store, 2, "http://example.org/")
    assert first.types == ("order.shipped",) and first.enabled and first.attempt == 0
    assert [e.id for e in store.list_webhook_endpoints(1)] == [first.id]
    assert [e.id for e in store.list_webhook_endpoints()] == [first.id, second.id]
    updated = store.update_webhook_endpoint(first.id, {"types": (), "enabled": False,
                                                       "disabled_reason": "r"})
    assert updated is not None and updated.types == () and not updated.enabled
    assert updated.disabled_reason == "r"
    store.record_webhook_attempt(endpoint_id=first.id, webhook_id="m", type="ping",
                                 attempt=1, status=200, duration_ms=1.5, response="ok",
                                 error=None, now=NOW)
    assert store.delete_webhook_endpoint(first.id)
    assert not store.delete_webhook_endpoint(first.id)
    assert store.get_webhook_endpoint(first.id) is None
    assert store.webhook_attempts(first.id, None, 10) == []


def test_a_key_never_passes_its_limit_however_many_create_at_once(store: Store,
                                                                   place: Place) -> None:
    for _ in range(14):
        _endpoint(store, 7)
    others = [place.open() for _ in range(8)]
    made: list[int] = []
    refused: list[Exception] = []
    start = threading.Barrier(len(others))

    def create(claimer: Store) -> None:
        start.wait()
        try:
            made.append(claimer.create_webhook_endpoint(
                api_key_id=7, url="https://example.com/h", types=(), description="",
                secret="whsec_x", place=(0, "order", 0), now=NOW, at_most=16).id)
        except WebhookEndpointLimitReached as exc:
            refused.append(exc)

    try:
        threads = [threading.Thread(target=create, args=(other,)) for other in others]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for other in others:
            other.dispose()
    assert (len(made), len(refused)) == (2, 6)
    assert len(store.list_webhook_endpoints(7)) == 16
    assert _endpoint(store, 8).api_key_id == 8  # another key's are its own


def test_a_lease_goes_to_one_owner_until_it_runs_out(store: Store, place: Place) -> None:
    ids = [_endpoint(store).id for _ in range(10)]
    other = place.open()
    try:
        won: dict[str, list[int]] = {}

        def claim(name: str, claimer: Store) -> None:
            won[name] = [e.id for e in claimer.claim_webhook_endpoints(name, 100.0, 130.0, 10)]

        threads = [threading.Thread(target=claim, args=(n, s))
                   for n, s in (("a", store), ("b", other))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Each to exactly one. They may split them: on PostgreSQL, claims that overlap
        # pass over the rows the other has locked (SKIP LOCKED) and take the rest.
        assert sorted(won["a"] + won["b"]) == ids
        assert store.claim_webhook_endpoints("c", 120.0, 150.0, 10) == []  # all held
        for name, claimer in (("a", store), ("b", other)):
            renewed = claimer.claim_webhook_endpoints(name, 120.0, 150.0, 10)
            assert [e.id for e in renewed] == won[name]  # its own, renewed
            assert all(e.lease_until == 150.0 for e in renewed)
        # Past the lease, another takes them.
        assert len(other.claim_webhook_endpoints("c", 151.0, 180.0, 10)) == 10
        store.release_webhook_leases("a")  # no longer a's: nothing happens
        assert store.claim_webhook_endpoints("a", 152.0, 180.0, 10) == []
        store.release_webhook_leases("c")  # every lease c holds, given up
        assert [e.id for e in store.claim_webhook_endpoints("a", 152.0, 180.0, 10)] == ids
    finally:
        other.dispose()


def test_a_place_in_the_feed_moves_forward_only_for_the_leaseholder(store: Store) -> None:
    endpoint = _endpoint(store)
    store.claim_webhook_endpoints("me", 0.0, 30.0, 10)
    assert not store.webhook_delivered(endpoint.id, "someone else", (5, "order", 1))
    assert store.webhook_failed(endpoint.id, "me", 2, 99.0, None)
    assert store.webhook_delivered(endpoint.id, "me", (5, "order", 1))
    assert not store.webhook_delivered(endpoint.id, "me", (4, "pet", 9))  # backwards
    # At one position the orders come before the pets, whatever their ids.
    assert store.webhook_delivered(endpoint.id, "me", (5, "pet", 0))
    assert not store.webhook_delivered(endpoint.id, "me", (5, "order", 9))
    moved = store.get_webhook_endpoint(endpoint.id)
    assert moved is not None
    assert (moved.place, moved.attempt, moved.next_attempt_at) == ((5, "pet", 0), 0, None)
    assert store.webhook_failed(endpoint.id, "me", 10, None, "gave up")
    disabled = store.get_webhook_endpoint(endpoint.id)
    assert disabled is not None and not disabled.enabled
    assert disabled.disabled_reason == "gave up" and disabled.position == 5
    assert store.claim_webhook_endpoints("me", 1.0, 30.0, 10) == []  # disabled: not claimed


def test_attempts_page_newest_first_and_are_pruned_by_age(store: Store) -> None:
    endpoint = _endpoint(store)
    for day in range(1, 6):
        store.record_webhook_attempt(endpoint_id=endpoint.id, webhook_id=f"m{day}",
                                     type="order.shipped", attempt=1, status=500,
                                     duration_ms=2.0, response="x" * 10, error=None,
                                     now=f"2026-11-0{day}T00:00:00Z")
    page = store.webhook_attempts(endpoint.id, None, 2)
    assert [a.webhook_id for a in page] == ["m5", "m4"]
    rest = store.webhook_attempts(endpoint.id, page[-1].id, 10)
    assert [a.webhook_id for a in rest] == ["m3", "m2", "m1"]
    assert store.purge_webhook_attempts("2026-11-03T00:00:00Z") == 2
    assert [a.webhook_id for a in store.webhook_attempts(endpoint.id, None, 10)] == \
        ["m5", "m4", "m3"]


def test_an_attempt_and_its_consequence_are_one_write(store: Store) -> None:
    endpoint = _endpoint(store)
    store.claim_webhook_endpoints("me", 0.0, 30.0, 10)
    record = dict(endpoint_id=endpoint.id, webhook_id="msg_1_5", type="order.placed",
                  attempt=1, status=500, duration_ms=3.0, response="no", error="answered 500",
                  now=NOW)
    (after,) = store.webhook_attempted("me", [Attempted(record, next_attempt_at=35.0)])
    failing = store.get_webhook_endpoint(endpoint.id)
    assert failing is not None and (failing.attempt, failing.next_attempt_at) == (1, 35.0)
    assert after == failing  # the endpoint as the write left it
    assert store.webhook_attempted("another", [Attempted({**record, "attempt": 2},
                                                         delivered=(5, "order", 1))]) == [None]
    (after,) = store.webhook_attempted("me", [Attempted(
        {**record, "attempt": 2, "status": 204, "error": None}, delivered=(5, "order", 1))])
    done = store.get_webhook_endpoint(endpoint.id)
    assert done is not None and (done.position, done.order_id, done.attempt) == (5, 1, 0)
    assert after == done
    assert [a.status for a in store.webhook_attempts(endpoint.id, None, 10)] == [204, 500, 500]


def test_an_attempt_begun_before_a_replay_leaves_the_replayed_place(store: Store) -> None:
    endpoint = _endpoint(store)
    store.claim_webhook_endpoints("me", 0.0, 30.0, 10)
    record = dict(endpoint_id=endpoint.id, webhook_id="msg_1_5", type="order.placed",
                  attempt=1, status=204, duration_ms=3.0, response="", error=None, now=NOW)
    begun_at = endpoint.place  # (0, "order", 0)
    store.update_webhook_endpoint(endpoint.id, {"position": -1, "order_id": 0})  # a replay
    delivered = Attempted(record, delivered=(5, "order", 1), since=begun_at)
    failed = Attempted({**record, "status": 500, "error": "answered 500"},
                       next_attempt_at=99.0, since=begun_at)
    assert store.webhook_attempted("me", [delivered, failed]) == [None, None]
    after = store.get_webhook_endpoint(endpoint.id)
    assert after is not None
    assert (after.position, after.order_id, after.attempt, after.next_attempt_at) == \
        (-1, 0, 0, None)  # the replay stands: its changes go next, at once
    assert len(store.webhook_attempts(endpoint.id, None, 10)) == 2  # both are in the log
    assert not store.webhook_delivered(endpoint.id, "me", (5, "order", 1), since=begun_at)
    assert store.webhook_delivered(endpoint.id, "me", (5, "order", 1),
                                   since=(-1, "order", 0))


def test_attempts_of_several_endpoints_are_recorded_in_one_write(store: Store) -> None:
    first, second, third = _endpoint(store), _endpoint(store), _endpoint(store)
    store.claim_webhook_endpoints("me", 0.0, 30.0, 10)
    store.release_webhook_leases("me")
    store.claim_webhook_endpoints("me", 0.0, 30.0, 2)  # the first two again, not the third

    def record(endpoint_id: int, status: int) -> dict[str, Any]:
        return dict(endpoint_id=endpoint_id, webhook_id="msg_1_5", type="order.placed",
                    attempt=1, status=status, duration_ms=3.0, response="",
                    error=None if status < 300 else f"answered {status}", now=NOW)

    after = store.webhook_attempted("me", [
        Attempted(record(first.id, 204), delivered=(5, "order", 1)),
        Attempted(record(second.id, 503), next_attempt_at=40.0),
        Attempted(record(third.id, 204), delivered=(5, "order", 1))])  # its lease was given up
    assert after[0] is not None and (after[0].position, after[0].order_id) == (5, 1)
    assert after[1] is not None and (after[1].attempt, after[1].next_attempt_at) == (1, 40.0)
    assert after[2] is None
    assert after[:2] == [store.get_webhook_endpoint(first.id),
                         store.get_webhook_endpoint(second.id)]
    for endpoint in (first, second, third):  # every attempt is in the log
        assert len(store.webhook_attempts(endpoint.id, None, 10)) == 1


def test_the_changes_of_both_feeds_are_read_in_one_statement(store: Store) -> None:
    """One snapshot: a place committed between a read of the orders and one of the pets
    would give the pet's change without its order's, and the place, passing the pet,
    would pass the order unsent."""
    store.import_pets([{"id": 7, "name": "Rex", "stock": 2}])
    reads: list[str] = []
    rows = store._rows  # type: ignore[attr-defined]

    def counted(sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        reads.append(sql)
        return rows(sql, params)

    store.place_order({"petId": 7, "quantity": 1}, 1, "k", "k", NOW)
    store._rows = counted  # type: ignore[attr-defined]
    changes = store.changes_after((-1, "order", 0), 10)
    assert [(c.of, c.item_id) for c in changes] == [("order", 1), ("pet", 7)]
    assert len(reads) == 1
