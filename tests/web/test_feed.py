"""The feed of changed orders over HTTP, in process (D26): its pages and cursor,
long polling (answered soon after a change, at once past the worker's cap, once against
the quota; at SIGTERM, tests/e2e/test_feed.py), and an Error for every refusal. Every
response is validated against openapi/petstore-v2.yaml."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prometheus_client import REGISTRY

from app.core import orders
from app.core.config import Settings
from app.core.storage import Store, open_store
from app.web import create_app
from tests.support import assert_error, make_key, wait_until

FEED = "/v2/store/order-changes"
RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")
NOW = "2026-11-24T10:00:00Z"


def _cursor(client: Any, auth: dict[str, str]) -> str:
    """The cursor after every order there is now."""
    answer = client.get(FEED, params={"limit": 1000}, headers=auth)
    assert answer.status_code == 200
    cursor: str = answer.json()["next"]
    return cursor


def _waiting() -> float:
    """The feed requests this process holds waiting now (/metrics' petstore_feed_waiting)."""
    return REGISTRY.get_sample_value("petstore_feed_waiting") or 0.0


def _once_waiting(action: Callable[[], Any]) -> tuple[threading.Thread, list[float]]:
    """Run action in a thread of its own as soon as one more request waits than now; the
    thread, and the time action returned once it has."""
    before, done = _waiting(), []

    def run() -> None:
        wait_until(lambda: _waiting() > before, message="no request waited")
        action()
        done.append(time.monotonic())

    thread = threading.Thread(target=run)
    thread.start()
    return thread, done


def test_the_feed_gives_every_order_then_each_change_in_order(
        client: Any, auth: dict[str, str], store: Store) -> None:
    first = client.get(FEED, params={"limit": 3}, headers=auth)
    assert first.status_code == 200
    for header in RATE_HEADERS:
        assert header in first.headers
    assert [o["id"] for o in first.json()["orders"]] == [1, 2, 3]
    rest = client.get(FEED, params={"after": first.json()["next"]}, headers=auth).json()
    assert [o["id"] for o in rest["orders"]] == [4]

    assert client.delete("/v1/store/orders/1", headers=auth).status_code == 204
    assert client.post("/v2/store/orders/4/ship", headers=auth).status_code == 200
    changed = client.get(FEED, params={"after": rest["next"]}, headers=auth).json()
    assert [(o["id"], o["status"]) for o in changed["orders"]] == [(1, "cancelled"),
                                                                   (4, "shipped")]
    # Up to date: an empty page and the same cursor.
    again = client.get(FEED, params={"after": changed["next"]}, headers=auth).json()
    assert again == {"orders": [], "next": changed["next"]}


def test_a_waiting_request_is_answered_soon_after_a_change(
        client: Any, auth: dict[str, str], store: Store) -> None:
    cursor = _cursor(client, auth)
    shipping, shipped = _once_waiting(lambda: orders.ship(store, 1, NOW))
    answer = client.get(FEED, params={"after": cursor, "wait": 20}, headers=auth)
    answered = time.monotonic()
    shipping.join(10)
    assert answer.status_code == 200
    assert [(o["id"], o["status"]) for o in answer.json()["orders"]] == [(1, "shipped")]
    # D26 promises 0.5 s after the commit; the bound leaves room for a loaded machine
    # (`make bench` prints the real figure).
    assert 0 <= answered - shipped[0] < 3, answered - shipped[0]
    assert "petstore-feed-wait" not in answer.headers


def test_a_wait_with_no_change_ends_empty_with_the_same_cursor(
        client: Any, auth: dict[str, str]) -> None:
    cursor = _cursor(client, auth)
    started = time.monotonic()
    answer = client.get(FEED, params={"after": cursor, "wait": 1}, headers=auth)
    assert 1 <= time.monotonic() - started < 5
    assert answer.json() == {"orders": [], "next": cursor}
    for header in RATE_HEADERS:
        assert header in answer.headers
    assert "petstore-feed-wait" not in answer.headers


def test_a_waiting_request_counts_once_against_the_quota(
        client: Any, auth: dict[str, str], store: Store) -> None:
    cursor = _cursor(client, auth)
    before = int(client.get(FEED, params={"after": cursor}, headers=auth)
                 .headers["x-ratelimit-remaining"])
    shipping, shipped = _once_waiting(lambda: orders.ship(store, 1, NOW))
    waited = client.get(FEED, params={"after": cursor, "wait": 20}, headers=auth)
    shipping.join(10)
    assert shipped and waited.json()["orders"]
    assert int(waited.headers["x-ratelimit-remaining"]) == before - 1


def test_past_the_cap_of_waiting_requests_a_request_is_answered_at_once(
        settings: Settings, store: Store) -> None:
    key = make_key(store)
    auth = {"Authorization": f"Bearer {key}"}
    store.import_orders([{"id": 1, "petId": 1, "quantity": 1}])
    app = create_app(settings.replace(feed_max_waiting=1))
    with app.test_client() as client:
        cursor = _cursor(client, auth)
        before = _waiting()
        answers: list[Any] = []
        first = threading.Thread(target=lambda: answers.append(
            client.get(FEED, params={"after": cursor, "wait": 20}, headers=auth)))
        first.start()
        wait_until(lambda: _waiting() == before + 1, message="the first did not wait")
        started = time.monotonic()
        second = client.get(FEED, params={"after": cursor, "wait": 20}, headers=auth)
        # Answered while the first still waits, well before the 20 s it asked for.
        assert time.monotonic() - started < 10 and not answers
        assert second.json() == {"orders": [], "next": cursor}
        orders.ship(store, 1, NOW)
        first.join(10)
        assert [o["id"] for o in answers[0].json()["orders"]] == [1]


def test_an_edited_cursor_or_a_bad_limit_or_wait_is_400_naming_it(
        client: Any, auth: dict[str, str]) -> None:
    cursor = _cursor(client, auth)
    list_cursor = client.get("/v2/store/orders", params={"limit": 1},
                             headers=auth).json()["next"]
    for after in (cursor[:-1], cursor[:10] + "x" + cursor[11:], list_cursor):
        body = assert_error(client.get(FEED, params={"after": after}, headers=auth), 400,
                            "invalid_request")
        assert "after" in body["message"]
    for name, value in (("limit", 0), ("limit", 1001), ("wait", -1), ("wait", 31),
                        ("wait", "soon")):
        body = assert_error(client.get(FEED, params={name: value}, headers=auth), 400,
                            "invalid_request")
        assert name in body["message"]


def test_a_cursor_from_another_database_is_410_resync_required(
        client: Any, auth: dict[str, str], settings: Settings, tmp_path: Path) -> None:
    cursor = _cursor(client, auth)
    other_settings = settings.replace(database=str(tmp_path / "other.db"))
    other = open_store(other_settings)
    other_auth = {"Authorization": f"Bearer {make_key(other)}"}
    other.import_orders([{"id": i, "petId": 1, "quantity": 1} for i in range(1, 30)])
    with create_app(other_settings).test_client() as other_client:
        refused = other_client.get(FEED, params={"after": cursor}, headers=other_auth)
    assert_error(refused, 410, "resync_required")
    for header in RATE_HEADERS:
        assert header in refused.headers
    other.dispose()
