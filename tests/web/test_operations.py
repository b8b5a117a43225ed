"""/healthz and /readyz (openapi/ops.yaml, D16): no key, no quota, honest readiness."""

from __future__ import annotations

from typing import Any

from app.core.config import Settings
from app.core.errors import StoreUnavailable
from app.core.storage import Store
from app.web import create_app
from tests.conftest import PrivateRedis
from tests.support import assert_error, wait_until, wrap_store


class FailingStore:
    """A store whose database does not answer."""

    def check(self) -> dict[str, str]:
        raise StoreUnavailable("SQLite: disk I/O error")


def test_health_answers_without_a_key_and_without_quota_headers(client: Any) -> None:
    response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})
    assert "x-ratelimit-limit" not in response.headers and "x-request-id" in response.headers


def test_operations_endpoints_do_not_spend_the_address_quota(client: Any) -> None:
    for _ in range(70):
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200
    assert client.get("/v1/store/orders").headers["x-ratelimit-remaining"] == "59"


def test_ready_reports_its_checks(client: Any) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ready",
                               "checks": {"database": "ok", "quotas": "not checked"}}


def test_a_database_that_does_not_answer_is_503_naming_it(app: Any) -> None:
    wrap_store(app, lambda _: FailingStore())
    with app.test_client() as client:
        # The checks run every second off the request's path (D41): a result from before
        # the store failed may still be the last one, so the next is waited for.
        response = wait_until(lambda: (found := client.get("/readyz")).status_code == 503
                              and found, timeout=5)
    body = assert_error(response, 503, "service_unavailable")
    assert body["message"].startswith("Not ready: database: SQLite: disk I/O error (checked ")
    assert response.headers["retry-after"] == "1"


def test_failing_closed_a_quota_storage_outage_makes_the_instance_unready(
    settings: Settings, store: Store, private_redis: PrivateRedis
) -> None:
    app = create_app(settings.replace(ratelimit_storage=private_redis.url,
                                      ratelimit_on_error="closed"))
    with app.test_client() as client:
        assert client.get("/readyz").json()["checks"]["quotas"] == "ok"
        private_redis.kill()
        # The checks run every second off the request's path (D41): the next that fails
        # shows within a few seconds.
        response = wait_until(lambda: (found := client.get("/readyz")).status_code == 503
                              and found, timeout=5)
        body = assert_error(response, 503, "service_unavailable")
        assert body["message"].startswith("Not ready: quotas: the quota storage does not "
                                          "answer")
        private_redis.start()
        wait_until(lambda: client.get("/readyz").status_code == 200, timeout=5)


def test_with_fallback_a_quota_storage_outage_leaves_the_instance_ready(
    settings: Settings, store: Store, private_redis: PrivateRedis
) -> None:
    app = create_app(settings.replace(ratelimit_storage=private_redis.url))
    with app.test_client() as client:
        assert client.get("/readyz").json()["checks"]["quotas"] == "ok"
        private_redis.kill()
        response = wait_until(lambda: (found := client.get("/readyz")).json()["checks"][
            "quotas"] != "ok" and found, timeout=5)
    assert response.status_code == 200
    assert response.json()["checks"]["quotas"] == "does not answer; counting in process memory"
