"""Quotas through the test client: headers on every response, 429s, the day window,
per-address counting, bans, and changes to keys reaching a running app."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from app.core.config import Settings
from app.core.errors import StoreUnavailable
from app.core.quotas.counters import VIOLATION_GRACE
from app.core.storage import Store
from app.web import PetstoreApp, create_app
from tests.support import assert_error, make_key, wait_until, wrap_store
from tests.web.test_failures import ExplodingStore

LIST = "/v1/store/orders"
RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
                "ratelimit-policy", "ratelimit")


def headers_of(response: Any) -> tuple[int, int, int]:
    """(limit, remaining, reset) of a response, after checking all five headers are there."""
    for name in RATE_HEADERS:
        assert name in response.headers, f"{name} missing on a {response.status_code}"
    return (int(response.headers["x-ratelimit-limit"]),
            int(response.headers["x-ratelimit-remaining"]),
            int(response.headers["x-ratelimit-reset"]))


@pytest.fixture
def quota_settings(settings: Settings) -> Settings:
    """The settings as served: a change of a key reaches the app within the key cache's
    time to live (PETSTORE_KEY_CACHE_SECONDS, 2 s), which the tests ask until."""
    return settings


@pytest.fixture
def orders(store: Store) -> None:
    store.import_orders([{"id": 1, "status": "pending"}, {"id": 2, "status": "shipped"}])


def client_for(settings: Settings) -> Any:
    return create_app(settings).test_client()


@pytest.fixture
def small(store: Store, orders: None) -> str:
    """An enterprise key allowed 20 requests a minute and 1,000 a day."""
    return make_key(store, plan="enterprise", per_minute=20, per_day=1000)


def test_every_status_carries_the_rate_limit_headers_counting_down(
    quota_settings: Settings, store: Store, small: str
) -> None:
    auth = {"Authorization": f"Bearer {small}"}
    app = create_app(quota_settings)
    remaining = []
    with app.test_client() as client:
        for method, path, status in [
            ("GET", LIST, 200), ("DELETE", f"{LIST}/1", 204), ("DELETE", f"{LIST}/abc", 400),
            ("DELETE", f"{LIST}/99", 404), ("PUT", LIST, 405), ("DELETE", f"{LIST}/2", 409),
            ("GET", "/v1/nothing", 404),
        ]:
            response = client.request(method, path, headers=auth)
            assert response.status_code == status
            limit, left, reset = headers_of(response)
            assert limit == 20
            assert reset >= int(time.time())
            remaining.append(left)
        assert response.headers["ratelimit-policy"] == (
            '"minute";q=20;w=60, "day";q=1000;w=86400'
        )
        assert response.headers["ratelimit"].startswith(f'"minute";r={left};t=')
    assert remaining == list(range(19, 12, -1))


def test_a_500_carries_the_rate_limit_headers(quota_settings: Settings, store: Store,
                                              small: str) -> None:
    app = create_app(quota_settings)
    wrap_store(app, ExplodingStore)
    with app.test_client() as client:
        response = client.get(LIST, headers={"Authorization": f"Bearer {small}"})
    assert_error(response, 500, "internal_error")
    headers_of(response)


def test_over_quota_is_429_with_retry_after_and_is_not_counted(
    quota_settings: Settings, store: Store, orders: None
) -> None:
    key = make_key(store, plan="enterprise", per_minute=3, per_day=1000)
    auth = {"Authorization": f"Bearer {key}"}
    with client_for(quota_settings.replace(ban_seconds=0)) as client:
        for _ in range(3):
            assert client.get(LIST, headers=auth).status_code == 200
        for _ in range(3):
            response = client.get(LIST, headers=auth)
            body = assert_error(response, 429, "rate_limit_exceeded")
            assert "minute" in body["message"]
            assert 1 <= int(response.headers["retry-after"]) <= 60
            limit, left, reset = headers_of(response)
            assert (limit, left) == (3, 0)
            assert reset - time.time() <= 61
            # Refused requests are not counted: the day window saw only the three.
            assert '"day";r=997;' in response.headers["ratelimit"]
        # A refused DELETE is not carried out either.
        assert client.delete(f"{LIST}/1", headers=auth).status_code == 429
    assert store.list_orders()[0]["status"] == "pending"


def test_a_spent_day_quota_shows_the_day_window_and_its_retry_after(
    quota_settings: Settings, store: Store, orders: None
) -> None:
    key = make_key(store, plan="enterprise", per_minute=50, per_day=3)
    auth = {"Authorization": f"Bearer {key}"}
    with client_for(quota_settings.replace(ban_seconds=0)) as client:
        for expected in (2, 1, 0):
            assert headers_of(client.get(LIST, headers=auth))[:2] == (3, expected)
        response = client.get(LIST, headers=auth)
        assert_error(response, 429, "rate_limit_exceeded")
        limit, left, reset = headers_of(response)
        assert (limit, left) == (3, 0)
        retry_after = int(response.headers["retry-after"])
        assert retry_after > 60, "the day window refused, so the wait is longer than a minute"
        assert abs(reset - (time.time() + retry_after)) <= 2


def test_requests_without_a_valid_key_count_per_client_address(
    quota_settings: Settings, store: Store, orders: None
) -> None:
    key = make_key(store)
    with client_for(quota_settings.replace(ban_seconds=0)) as client:
        for i in range(60):
            response = client.get(LIST, headers={"Authorization": f"Bearer wrong{i}"})
            assert_error(response, 401, "invalid_api_key")
            assert headers_of(response)[:2] == (60, 59 - i)
        assert_error(client.get(LIST), 429, "rate_limit_exceeded")
        assert_error(client.get(LIST, headers={"Authorization": "Bearer guess"}), 429,
                     "rate_limit_exceeded")
        # A valid key is counted on its own, not against the address.
        ok = client.get(LIST, headers={"Authorization": f"Bearer {key}"})
        assert ok.status_code == 200 and headers_of(ok)[:2] == (60, 59)


def test_the_document_and_its_ui_carry_no_quota(quota_settings: Settings, store: Store) -> None:
    with client_for(quota_settings) as client:
        for path in ("/v1/openapi.json", "/v1/ui/"):
            response = client.get(path)
            assert response.status_code == 200
            assert "x-ratelimit-limit" not in response.headers


# bans -----------------------------------------------------------------------------------


@pytest.fixture
def tiny(store: Store, orders: None) -> tuple[int, str]:
    """An enterprise key allowed one request a minute."""
    secret = make_key(store, plan="enterprise", per_minute=1, per_day=1000)
    return store.list_keys()[-1].id, secret


@pytest.fixture
def ban_client(quota_settings: Settings) -> Iterator[Any]:
    settings = quota_settings.replace(ban_after=3, ban_window=60, ban_seconds=3)
    with client_for(settings) as client:
        yield client


def test_parallel_requests_at_the_limit_do_not_earn_a_ban(
    quota_settings: Settings, store: Store, tiny: tuple[int, str]
) -> None:
    key_id, secret = tiny
    auth = {"Authorization": f"Bearer {secret}"}
    settings = quota_settings.replace(ban_after=1, ban_window=60, ban_seconds=60)
    with client_for(settings) as client:
        assert client.get(LIST, headers=auth).status_code == 200
        first = client.get(LIST, headers=auth)
        # The burst: requests sent well within the grace second after the first 429 (D10),
        # however fast this machine is; on a slow one fewer, never past it.
        within = time.monotonic() + VIOLATION_GRACE / 2
        burst = [first]
        while time.monotonic() < within and len(burst) < 15:
            burst.append(client.get(LIST, headers=auth))
    assert len(burst) >= 3, "the machine sent fewer than 3 requests in half a second"
    assert {r.json()["code"] for r in burst} == {"rate_limit_exceeded"}
    key = store.get_key(key_id)
    assert key is not None and key.banned_until is None


def test_requests_within_retry_after_earn_a_ban_that_counts_down_and_ends(
    ban_client: Any, store: Store, tiny: tuple[int, str]
) -> None:
    key_id, secret = tiny
    auth = {"Authorization": f"Bearer {secret}"}
    assert ban_client.get(LIST, headers=auth).status_code == 200
    assert_error(ban_client.get(LIST, headers=auth), 429, "rate_limit_exceeded")
    # The grace second (D10) is the rule's own time, waited out; from now on each 429 is a
    # violation.
    time.sleep(VIOLATION_GRACE + 0.1)
    for _ in range(2):
        assert_error(ban_client.get(LIST, headers=auth), 429, "rate_limit_exceeded")
    banned = ban_client.get(LIST, headers=auth)  # the third violation
    assert_error(banned, 429, "api_key_banned")
    assert int(banned.headers["retry-after"]) == 3
    assert headers_of(banned)[0] == 1, "the headers report the key's own window"
    key = store.get_key(key_id)
    assert key is not None and key.banned_until is not None

    # Asked again and again while banned, its Retry-After counts down (the requests do not
    # make the ban longer), and the ban ends: the minute window still refuses.
    def answer_while_banned() -> Any:
        during = ban_client.get(LIST, headers=auth)
        assert during.status_code == 429
        if during.json()["code"] == "api_key_banned":
            assert int(during.headers["retry-after"]) <= 3
        return during

    wait_until(lambda: int(answer_while_banned().headers["retry-after"]) <= 2, 10,
               "the ban did not count down", every=0.1)
    wait_until(lambda: answer_while_banned().json()["code"] == "rate_limit_exceeded", 10,
               "the ban did not end", every=0.1)


def test_unban_lifts_a_ban_in_a_running_app(
    ban_client: Any, store: Store, tiny: tuple[int, str]
) -> None:
    key_id, secret = tiny
    store.ban_key(key_id, "2099-01-01T00:00:00Z")
    auth = {"Authorization": f"Bearer {secret}"}
    response = ban_client.get(LIST, headers=auth)
    assert_error(response, 429, "api_key_banned")
    assert int(response.headers["retry-after"]) > 86_400
    store.unban_key(key_id)
    # Within the key cache's time to live, asked again and again.
    wait_until(lambda: ban_client.get(LIST, headers=auth).status_code == 200,
               5, "the unban did not reach the app", every=0.1)


def test_revoke_and_set_plan_reach_a_running_app(
    quota_settings: Settings, store: Store, orders: None
) -> None:
    secret = make_key(store, plan="free")
    key_id = store.list_keys()[-1].id
    auth = {"Authorization": f"Bearer {secret}"}
    with client_for(quota_settings) as client:
        assert headers_of(client.get(LIST, headers=auth))[:2] == (60, 59)
        store.set_plan(key_id, "pro", None, None)
        # Asked until the change reaches the app, within the key cache's time to live: the
        # first answer of the pro plan has fresh counters.
        def pro() -> tuple[int, int, int] | None:
            found = headers_of(client.get(LIST, headers=auth))
            return found if found[0] == 300 else None

        assert wait_until(pro, 5, "the plan did not change", every=0.1)[:2] == (300, 299), (
            "a plan change starts fresh counters"
        )
        store.revoke_key(key_id, "2026-01-01T00:00:00Z")

        def revoked() -> Any:
            answer = client.get(LIST, headers=auth)
            return answer if answer.status_code == 401 else None

        revoked_answer = wait_until(revoked, 5, "the revocation did not reach the app",
                                    every=0.1)
        assert_error(revoked_answer, 401, "invalid_api_key")


class UnreachableKeys:
    """A store whose key lookups fail as a broken database does."""

    def find_key(self, digest: str) -> None:
        raise StoreUnavailable("SQLite: disk I/O error")

    def key_digests(self) -> set[str]:
        raise StoreUnavailable("SQLite: disk I/O error")


def test_a_failing_database_during_the_key_check_is_503_not_500(
    quota_settings: Settings, store: Store, small: str
) -> None:
    app: PetstoreApp = create_app(quota_settings)
    app.services.keyring.store = UnreachableKeys()
    with app.test_client() as client:
        response = client.get(LIST, headers={"Authorization": f"Bearer {small}"})
    assert_error(response, 503, "service_unavailable")
    assert response.headers["retry-after"] == "1"
    assert headers_of(response)[1] == 0
