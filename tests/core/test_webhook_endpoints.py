"""The rules of an endpoint's life (D28, D39) over a real SQLite store, as the API, the CLI
and the console call them: a rotation's grace, the pages of its deliveries, a replay of
what was attempted since a moment, its lag, how a test message and an attempt are shown,
and an endpoint deleted while one of them writes it. Each refusal is held whole: the field
a client reads in `param` and the sentence it reads in `message`."""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import time
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from app.core import feed, orders, webhook_urls, webhooks
from app.core.errors import InvalidParameter, WebhookEndpointNotFound, WebhookUrlNotAllowed
from app.core.orders import format_unix_time
from app.core.paging import seal
from app.core.storage import Store
from app.core.storage.records import WebhookAttempt, WebhookEndpoint
from tests.support import make_key

NOW = 1_800_000_000.0  # a moment far from the clock's: a rule that reads the clock shows
LOOPBACK = webhook_urls.networks("127.0.0.0/8")
ATTEMPTED = "2026-11-29T10:00:00Z"


def _endpoint(store: Store, key_id: int | None = None,
              types: tuple[str, ...] = ()) -> WebhookEndpoint:
    return webhooks.create(store, key_id, "http://127.0.0.1:9/hooks", list(types), None,
                           LOOPBACK)[0]


def _attempt(store: Store, endpoint: WebhookEndpoint, webhook_id: str, at: str) -> None:
    store.record_webhook_attempt(endpoint_id=endpoint.id, webhook_id=webhook_id,
                                 type="order.placed", attempt=1, status=204, duration_ms=1.0,
                                 response="", error=None, now=at)


def _refused(call: Any, name: str, sentence: str) -> None:
    with pytest.raises(InvalidParameter) as refused:
        call()
    assert (refused.value.param, refused.value.sentence) == (name, sentence)


def _refused_unchanged(store: Store, rule: Callable[[WebhookEndpoint], Any], name: str,
                       sentence: str) -> None:
    """rule(endpoint), on a new endpoint, is refused naming name with the sentence, and
    leaves the endpoint as it was."""
    endpoint = _endpoint(store)
    _refused(lambda: rule(endpoint), name, sentence)
    assert store.get_webhook_endpoint(endpoint.id) == endpoint


class Deleting:
    """The store, but an endpoint is deleted just before it is written: another request
    removed it between the rule's read and its write."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    def update_webhook_endpoint(self, endpoint_id: int,
                                changes: dict[str, Any]) -> WebhookEndpoint | None:
        self.store.delete_webhook_endpoint(endpoint_id)
        return self.store.update_webhook_endpoint(endpoint_id, changes)


# a rotation's grace -------------------------------------------------------------------


@pytest.mark.parametrize("grace", [0, 1, webhooks.GRACE_MAX])
def test_a_rotation_keeps_the_old_secret_signing_for_its_grace(store: Store,
                                                                grace: int) -> None:
    endpoint = _endpoint(store)
    rotated, secret = webhooks.rotate(store, None, endpoint.id, grace, now=NOW)
    assert secret == rotated.secret != endpoint.secret
    assert (rotated.previous_secret, rotated.previous_until) == (endpoint.secret, NOW + grace)
    # Signing stops at the grace's end: with 0, the old secret signs nothing from now on.
    assert webhooks.signing_secrets(rotated, NOW) == (
        [secret] if grace == 0 else [secret, endpoint.secret])
    assert webhooks.signing_secrets(rotated, NOW + grace) == [secret]


def test_a_rotation_without_a_moment_counts_its_grace_from_now(store: Store) -> None:
    before = dt.datetime.now(dt.UTC).timestamp()
    rotated, _ = webhooks.rotate(store, None, _endpoint(store).id, 60)
    after = dt.datetime.now(dt.UTC).timestamp()
    assert rotated.previous_until is not None
    assert before + 60 <= rotated.previous_until <= after + 60


@pytest.mark.parametrize("grace", [-1, webhooks.GRACE_MAX + 1, True, 1.5, "60", None])
def test_a_grace_out_of_bounds_or_not_a_whole_number_is_refused(store: Store,
                                                                 grace: Any) -> None:
    _refused_unchanged(store, lambda e: webhooks.rotate(store, None, e.id, grace, now=NOW),
                       "graceSeconds", "graceSeconds must be a whole number from 0 to 604800.")


# another key's endpoint, and one deleted meanwhile --------------------------------------


def test_another_keys_endpoint_is_not_found_by_any_rule(store: Store) -> None:
    make_key(store, name="one")
    make_key(store, name="two")
    endpoint = _endpoint(store, key_id=1)
    for rule in (lambda: webhooks.rotate(store, 2, endpoint.id, 0, now=NOW),
                 lambda: webhooks.renew_secret(store, 2, endpoint.id),
                 lambda: webhooks.replay(store, 2, endpoint.id, None),
                 lambda: webhooks.replay_since(store, 2, endpoint.id, ATTEMPTED),
                 lambda: webhooks.deliveries(store, 2, endpoint.id)):
        with pytest.raises(WebhookEndpointNotFound, match=f"^No webhook endpoint has the id "
                                                          f"{endpoint.id}.$"):
            rule()
    assert store.get_webhook_endpoint(endpoint.id) == endpoint


def test_an_endpoint_deleted_while_a_rule_writes_it_is_not_found(store: Store) -> None:
    for rule in (lambda s, i: webhooks.rotate(s, None, i, 0, now=NOW),
                 lambda s, i: webhooks.renew_secret(s, None, i),
                 lambda s, i: webhooks.replay(s, None, i, None),
                 lambda s, i: webhooks.update(s, None, i, {"description": "x"})):
        endpoint = _endpoint(store)
        with pytest.raises(WebhookEndpointNotFound) as gone:
            rule(Deleting(store), endpoint.id)
        assert gone.value.endpoint_id == endpoint.id
    endpoint = _endpoint(store)
    _attempt(store, endpoint, "msg_1_5", ATTEMPTED)
    with pytest.raises(WebhookEndpointNotFound) as gone:
        webhooks.replay_since(Deleting(store), None, endpoint.id, ATTEMPTED)
    assert gone.value.endpoint_id == endpoint.id


def test_a_renewed_secret_replaces_the_current_one_and_leaves_the_rotations(
        store: Store) -> None:
    endpoint = _endpoint(store)
    _, first = webhooks.rotate(store, None, endpoint.id, 60, now=NOW)
    renewed, second = webhooks.renew_secret(store, None, endpoint.id)
    assert second == renewed.secret not in (first, endpoint.secret)
    assert (renewed.previous_secret, renewed.previous_until) == (endpoint.secret, NOW + 60)


# the pages of the deliveries ----------------------------------------------------------


def test_the_deliveries_come_newest_first_in_pages_of_the_limit(store: Store) -> None:
    endpoint = _endpoint(store)
    for n in range(1, 8):
        _attempt(store, endpoint, f"msg_{n}_{n}", ATTEMPTED)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = webhooks.deliveries(store, None, endpoint.id, cursor, 3)
        seen += [attempt.webhook_id for attempt in page]
        pages += 1
        if cursor is None:
            break
    assert seen == [f"msg_{n}_{n}" for n in range(7, 0, -1)] and pages == 3
    # A page that holds the last attempt exactly has no next one.
    page, cursor = webhooks.deliveries(store, None, endpoint.id, None, 7)
    assert (len(page), cursor) == (7, None)
    page, cursor = webhooks.deliveries(store, None, endpoint.id, None,
                                       webhooks.DELIVERIES_LIMIT_MAX)
    assert (len(page), cursor) == (7, None)


@pytest.mark.parametrize("limit", [0, -1, webhooks.DELIVERIES_LIMIT_MAX + 1])
def test_a_deliveries_limit_out_of_bounds_is_refused(store: Store, limit: int) -> None:
    endpoint = _endpoint(store)
    _refused(lambda: webhooks.deliveries(store, None, endpoint.id, None, limit),
             "limit", "limit must be a whole number from 1 to 500.")


def test_a_deliveries_cursor_not_given_for_this_endpoints_pages_is_refused(
        store: Store) -> None:
    endpoint = _endpoint(store)
    other = _endpoint(store)
    for n in range(1, 4):
        _attempt(store, endpoint, f"msg_{n}_{n}", ATTEMPTED)
    _, given = webhooks.deliveries(store, None, endpoint.id, None, 1)
    assert given is not None
    for cursor in ("garbage", given[:-2], seal(["deliveries", other.id, 2]),
                   seal(["order-changes", endpoint.id, 2]), seal(["deliveries", endpoint.id]),
                   seal(["deliveries", endpoint.id, "2"]),
                   seal(["deliveries", endpoint.id, 2, 0])):
        _refused(lambda c=cursor: webhooks.deliveries(store, None, endpoint.id, c, 1), "cursor",
                 "cursor is not one this service gave out (it was changed or cut short).")


# a replay from a cursor, and an edit -----------------------------------------------------


def test_a_replay_goes_on_after_a_cursor_of_either_feed_or_from_the_beginning(
        store: Store) -> None:
    store.import_pets([{"id": 7, "name": "Rex", "stock": 2}])
    store.import_orders([{"id": 3, "petId": 7, "quantity": 1}])
    endpoint = _endpoint(store)
    store.update_webhook_endpoint(endpoint.id, {"attempt": 2, "next_attempt_at": NOW})
    cases = [(feed.changes(store, None, 1, kind).next, kind) for kind in (feed.ORDERS,
                                                                           feed.PETS)]
    for cursor, kind in cases:
        of, position, item = feed.resume_point(store, cursor)
        assert of == kind
        replayed = webhooks.replay(store, None, endpoint.id, cursor)
        assert replayed.place == (position, "order" if kind == feed.ORDERS else "pet", item)
        assert (replayed.attempt, replayed.next_attempt_at) == (0, None)
    assert webhooks.replay(store, None, endpoint.id, None).place == (-1, "order", 0)


@pytest.mark.parametrize(("after", "name", "sentence"), [
    ("", "after", "after must be a string of text."),
    ("x" * 1025, "after", "after must be a string of text."),
    (5, "after", "after must be a string of text."),
    ("x" * 1024, "after", "after is not one this service gave out (it was changed or cut "
                          "short)."),
    ("bm90IGEgY3Vyc29y", "after", "after is not one this service gave out (it was changed "
                                  "or cut short)."),
    ("x", "after", "after is not one this service gave out (it was changed or cut short)."),
])
def test_a_replay_from_a_cursor_not_given_here_is_refused(store: Store, after: Any,
                                                          name: str, sentence: str) -> None:
    _refused_unchanged(store, lambda e: webhooks.replay(store, None, e.id, after), name,
                       sentence)


def test_an_edit_names_the_first_member_it_does_not_know(store: Store) -> None:
    _refused_unchanged(
        store, lambda e: webhooks.update(store, None, e.id, {"zeta": 1, "beta": 2, "url": "x"}),
        "beta", "beta is not a member of this request body; its members are url, types, "
                "description, enabled.")


def test_an_edited_url_is_checked_as_a_new_one_is(store: Store) -> None:
    endpoint = _endpoint(store)
    with pytest.raises(WebhookUrlNotAllowed):
        webhooks.update(store, None, endpoint.id, {"url": "http://10.0.0.1/hooks"}, LOOPBACK)
    with pytest.raises(WebhookUrlNotAllowed):  # loopback, but not allowed here
        webhooks.update(store, None, endpoint.id, {"url": "http://127.0.0.1:8/hooks"})
    assert store.get_webhook_endpoint(endpoint.id) == endpoint
    moved = webhooks.update(store, None, endpoint.id, {"url": "http://127.0.0.1:8/in"},
                            LOOPBACK)
    assert moved.url == "http://127.0.0.1:8/in"


def test_an_endpoint_is_shown_with_its_failures_and_its_rotation_only_when_it_has_them(
        store: Store) -> None:
    endpoint = _endpoint(store)
    plain = {"id": endpoint.id, "url": "http://127.0.0.1:9/hooks",
             "types": [], "description": "", "enabled": True,
             "createdAt": endpoint.created_at}
    assert webhooks.view(endpoint) == plain
    at = format_unix_time(NOW)
    failing = store.update_webhook_endpoint(endpoint.id, {
        "attempt": 3, "next_attempt_at": NOW, "disabled_reason": "an old reason"})
    assert failing is not None and webhooks.view(failing) == {
        **plain, "failingAttempts": 3, "nextAttemptAt": at}
    disabled = store.update_webhook_endpoint(endpoint.id, {
        "enabled": False, "disabled_reason": "the receiver answered 410 Gone",
        "next_attempt_at": None})
    assert disabled is not None and webhooks.view(disabled) == {
        **plain, "enabled": False, "disabledReason": "the receiver answered 410 Gone",
        "failingAttempts": 3}
    rotated, _ = webhooks.rotate(store, None, endpoint.id, 60, now=NOW)
    assert webhooks.view(rotated)["previousSecretUntil"] == format_unix_time(NOW + 60)
    stopped = store.update_webhook_endpoint(endpoint.id, {"previous_until": None})
    assert stopped is not None and "previousSecretUntil" not in webhooks.view(stopped)


# a replay of what was attempted since a moment ----------------------------------------


def test_a_replay_since_a_moment_goes_on_from_the_earliest_change_then_attempted(
        store: Store) -> None:
    endpoint = _endpoint(store, types=("order.placed", "pet.changed"))
    store.update_webhook_endpoint(endpoint.id, {"attempt": 3, "next_attempt_at": NOW})
    _attempt(store, endpoint, "msg_1_4", "2026-11-29T09:59:59Z")  # before the moment
    _attempt(store, endpoint, "msg_pet_7_20", ATTEMPTED)  # at the moment: counted
    _attempt(store, endpoint, "msg_2_10", "2026-11-29T10:00:05Z")  # newer, yet earlier
    _attempt(store, endpoint, "msg_ping_0123456789abcdef", "2026-11-29T10:00:06Z")
    replayed = webhooks.replay_since(store, None, endpoint.id, ATTEMPTED)
    assert replayed is not None
    assert replayed.place == (9, "pet", webhooks.ID_MAX)
    assert (replayed.attempt, replayed.next_attempt_at) == (0, None)
    # Nothing attempted since a later moment: nothing changes.
    assert webhooks.replay_since(store, None, endpoint.id, "2026-11-29T10:00:07Z") is None
    assert store.get_webhook_endpoint(endpoint.id) == replayed


def test_a_replay_since_reads_every_page_of_the_attempts_back_to_the_moment(
        store: Store) -> None:
    endpoint = _endpoint(store)
    _attempt(store, endpoint, "msg_1_3", ATTEMPTED)  # the earliest, on the last page
    for n in range(webhooks.DELIVERIES_LIMIT_MAX + 1):
        _attempt(store, endpoint, f"msg_1_{100 + n}", "2026-11-29T10:00:01Z")
    replayed = webhooks.replay_since(store, None, endpoint.id, ATTEMPTED)
    assert replayed is not None and replayed.place == (2, "pet", webhooks.ID_MAX)


def test_a_replay_forgets_what_the_endpoint_read_of_the_pets(store: Store) -> None:
    store.import_pets([{"id": 7, "name": "Rex", "stock": 2}])
    for replay in (lambda endpoint: webhooks.replay(store, None, endpoint.id, None),
                   lambda endpoint: webhooks.replay_since(store, None, endpoint.id,
                                                          ATTEMPTED)):
        endpoint = _read_every_pet(store)
        _attempt(store, endpoint, "msg_pet_7_1", ATTEMPTED)
        replay(endpoint)
        (change,) = store.changes_after((0, "order", 0), 10, ("pet",), endpoint.id)
        assert change.seen is None


def _read_every_pet(store: Store) -> WebhookEndpoint:
    """An endpoint of the pets' types that has read every pet (it remembers them), its
    place past them all."""
    endpoint = _endpoint(store, types=tuple(webhooks.PET_TYPES))
    store.update_webhook_endpoint(endpoint.id, {"position": -1, "place_of": "order",
                                                "order_id": 0})
    store.claim_webhook_endpoints("test", NOW, NOW + 60, 10)
    changes = store.changes_after((-1, "order", 0), 100, ("pet",), endpoint.id)
    assert store.webhook_delivered(endpoint.id, "test", changes[-1].place, None, tuple(
        (c.item_id, bool(c.state and c.state[0]), bool(c.state and c.state[1]))
        for c in changes))
    (seen,) = store.changes_after((-1, "order", 0), 10, ("pet",), endpoint.id)
    assert seen.seen == (True, False)
    found = store.get_webhook_endpoint(endpoint.id)
    assert found is not None
    return found


# the lag ------------------------------------------------------------------------------


def test_the_lag_counts_a_crossing_from_what_the_endpoint_last_read(store: Store) -> None:
    """An endpoint of pet.out_of_stock alone that read Rex taking orders lags by one after
    Rex sells out and a shipment comes last: the crossing is the endpoint's, not the kind
    of Rex's last change."""
    store.import_pets([{"id": 7, "name": "Rex", "stock": 1}])
    endpoint = _read_every_pet(store)
    endpoint = store.update_webhook_endpoint(endpoint.id, {"types": ["pet.out_of_stock"]})
    assert endpoint is not None and webhooks.lag(store, endpoint) == 0
    placed = store.place_order({"petId": 7, "quantity": 1}, 1, "k", "k", ATTEMPTED,
                               catalogue_pets_only=True).order["id"]
    orders.ship(store, placed, ATTEMPTED)  # the last change: a shipment, no crossing
    assert webhooks.lag(store, endpoint) == 1


# a test message and an attempt, as shown ----------------------------------------------


def test_a_test_message_is_a_ping_naming_its_endpoint(store: Store) -> None:
    endpoint = _endpoint(store)
    msg_id, body = webhooks.ping(endpoint, NOW)
    assert re.fullmatch(r"msg_ping_[0-9a-f]{16}", msg_id)
    assert orjson.loads(body) == {"type": "ping", "timestamp": format_unix_time(NOW),
                                  "data": {"endpointId": endpoint.id}}
    assert webhooks.ping(endpoint, NOW)[0] != msg_id


@pytest.mark.parametrize(("outcome", "shown"), [
    (webhooks.Outcome(204, duration_ms=12.345),
     {"delivered": True, "durationMs": 12.3, "webhookId": "msg_ping_1", "status": 204}),
    (webhooks.Outcome(500, "boom", duration_ms=7.06),
     {"delivered": False, "durationMs": 7.1, "webhookId": "msg_ping_1", "status": 500,
      "error": "answered 500"}),
    (webhooks.Outcome(None, error="no answer within 2 s", duration_ms=2000.04),
     {"delivered": False, "durationMs": 2000.0, "webhookId": "msg_ping_1",
      "error": "no answer within 2 s"}),
])
def test_a_test_messages_result_says_how_it_went(outcome: webhooks.Outcome,
                                                  shown: dict[str, Any]) -> None:
    assert webhooks.test_result("msg_ping_1", outcome) == shown


def test_an_attempt_is_shown_with_its_status_or_its_error() -> None:
    answered = WebhookAttempt(1, 2, "msg_3_4", "order.placed", 1, 204, 12.345, "ok", None,
                              ATTEMPTED)
    assert webhooks.attempt_view(answered) == {
        "id": 1, "webhookId": "msg_3_4", "type": "order.placed", "attempt": 1,
        "durationMs": 12.3, "response": "ok", "attemptedAt": ATTEMPTED, "status": 204}
    silent = WebhookAttempt(5, 2, "msg_3_4", "order.placed", 2, None, 2000.06, "",
                            "no answer within 2 s", ATTEMPTED)
    assert webhooks.attempt_view(silent) == {
        "id": 5, "webhookId": "msg_3_4", "type": "order.placed", "attempt": 2,
        "durationMs": 2000.1, "response": "", "attemptedAt": ATTEMPTED,
        "error": "no answer within 2 s"}


# the system's resolver ----------------------------------------------------------------


def test_the_system_resolver_gives_each_address_of_a_name_once() -> None:
    assert webhook_urls.system_resolver("127.0.0.2", 80) == ["127.0.0.2"]
    found = webhook_urls.system_resolver("localhost", 443)
    assert found and len(found) == len(set(found))
    assert all(ipaddress.ip_address(address).is_loopback for address in found)


# a description, and the log's pruning --------------------------------------------------


def test_a_description_is_text_of_at_most_its_length(store: Store) -> None:
    assert _endpoint(store).description == ""
    made = webhooks.create(store, None, "http://127.0.0.1:9/", [], "x" * 500, LOOPBACK)[0]
    assert made.description == "x" * 500
    for description in ("x" * 501, 5, ["x"]):
        _refused(lambda d=description: webhooks.create(store, None, "http://127.0.0.1:9/",
                                                        [], d, LOOPBACK),
                 "description", "description must be at most 500 characters long.")
    assert [e.id for e in webhooks.endpoints(store, None)] == [1, 2]


def test_the_attempts_log_forgets_what_is_older_than_its_days(store: Store) -> None:
    endpoint = _endpoint(store)
    _attempt(store, endpoint, "msg_1_1", "2026-11-21T09:59:59Z")
    _attempt(store, endpoint, "msg_1_4", "2026-11-22T09:59:59Z")  # 7 days and a second
    _attempt(store, endpoint, "msg_1_2", "2026-11-22T10:00:00Z")  # 7 days: kept
    _attempt(store, endpoint, "msg_1_3", "2026-11-29T09:00:00Z")
    now = dt.datetime(2026, 11, 29, 10, tzinfo=dt.UTC)
    assert webhooks.prune(store, 7, now) == 2
    page, _ = webhooks.deliveries(store, None, endpoint.id)
    assert [attempt.webhook_id for attempt in page] == ["msg_1_3", "msg_1_2"]


def test_the_attempts_log_counts_its_days_back_from_the_clock(store: Store) -> None:
    """Without a moment given (the deliverer's way), days of 86,400 seconds back from now."""
    endpoint = _endpoint(store)
    _attempt(store, endpoint, "msg_1_1", format_unix_time(time.time() - 7 * 86_400 - 60))
    _attempt(store, endpoint, "msg_1_2", format_unix_time(time.time() - 7 * 86_400 + 60))
    assert webhooks.prune(store, 7) == 1
    page, _ = webhooks.deliveries(store, None, endpoint.id)
    assert [attempt.webhook_id for attempt in page] == ["msg_1_2"]


# an edit --------------------------------------------------------------------------------


def test_an_edit_changes_what_it_names_and_disabling_or_enabling_keeps_the_place(
        store: Store) -> None:
    endpoint = _endpoint(store)
    edited = webhooks.update(store, None, endpoint.id, {
        "description": "the warehouse", "types": ["order.placed", "pet.changed"]})
    assert (edited.description, edited.types) == ("the warehouse",
                                                  ("order.placed", "pet.changed"))
    off = webhooks.update(store, None, endpoint.id, {"enabled": False})
    assert (off.enabled, off.disabled_reason) == (False, "disabled by its owner")
    store.update_webhook_endpoint(endpoint.id, {"attempt": 4, "next_attempt_at": NOW})
    on = webhooks.update(store, None, endpoint.id, {"enabled": True})
    assert (on.enabled, on.disabled_reason, on.attempt, on.next_attempt_at) == (
        True, None, 0, None)
    assert on.place == endpoint.place
    again = webhooks.update(store, None, endpoint.id, {"enabled": True})  # no change
    assert again == on
    gone = store.update_webhook_endpoint(endpoint.id, {
        "enabled": False, "disabled_reason": "the receiver answered 410 Gone"})
    still = webhooks.update(store, None, endpoint.id, {"enabled": False})  # no change
    assert still == gone


@pytest.mark.parametrize(("changes", "name", "sentence"), [
    ({"enabled": "yes"}, "enabled", "enabled must be true or false."),
    ({"enabled": 1}, "enabled", "enabled must be true or false."),
    ({"types": "order.placed"}, "types", "types must be a list of values."),
    ({"types": ["order.placed", 5]}, "types", "types must be a list of values."),
    ({"description": "x" * 501}, "description",
     "description must be at most 500 characters long."),
])
def test_an_edit_refuses_a_value_of_the_wrong_kind(store: Store, changes: dict[str, Any],
                                                   name: str, sentence: str) -> None:
    _refused_unchanged(store, lambda e: webhooks.update(store, None, e.id, changes), name,
                       sentence)


def test_a_new_url_by_name_is_resolved_by_the_resolver_given(store: Store) -> None:
    """The resolver the caller gives answers for the name, as it does for an edit: no other
    knows hooks.example.invalid."""
    def resolve(host: str, port: int) -> list[str]:
        return {"hooks.example.invalid": ["93.184.215.14"],
                "inside.example.invalid": ["10.0.0.7"]}[host]

    made, _ = webhooks.create(store, None, "https://hooks.example.invalid/in", None, None, (),
                              resolve)
    assert made.url == "https://hooks.example.invalid/in"
    with pytest.raises(WebhookUrlNotAllowed):
        webhooks.create(store, None, "https://inside.example.invalid/", None, None, (),
                        resolve)
    assert webhooks.endpoints(store, None) == [made]


def test_an_edited_url_by_name_is_resolved_and_each_address_checked(store: Store) -> None:
    endpoint = _endpoint(store)

    def resolve(host: str, port: int) -> list[str]:
        return {"hooks.example.com": ["93.184.215.14"], "inside.example.com": ["10.0.0.7"]}[host]

    moved = webhooks.update(store, None, endpoint.id, {"url": "https://hooks.example.com/in"},
                            (), resolve)
    assert moved.url == "https://hooks.example.com/in"
    with pytest.raises(WebhookUrlNotAllowed):
        webhooks.update(store, None, endpoint.id, {"url": "https://inside.example.com/"}, (),
                        resolve)
