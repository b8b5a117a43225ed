"""/metrics: Prometheus text, only to the allowed addresses."""

from __future__ import annotations

import re
from typing import Any

from app.core.config import Settings
from app.core.storage import Store
from app.web import create_app
from tests.support import assert_error, make_key

LIST = "/v1/store/orders"


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one sample in Prometheus text, 0 when absent."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    braces = rf"\{{{re.escape(wanted)}\}}" if labels else ""
    match = re.search(rf"^{name}{braces} (\S+)$", text, re.M)
    return float(match.group(1)) if match else 0.0


def test_metrics_count_requests_refusals_and_orders(settings: Settings, store: Store) -> None:
    store.import_orders([{"id": 1}, {"id": 2, "status": "shipped"}])
    key = make_key(store, plan="enterprise", per_minute=2, per_day=100)
    auth = {"Authorization": f"Bearer {key}"}
    app = create_app(settings.replace(metrics_allow="*", ban_seconds=0))
    with app.test_client() as client:
        before = client.get("/metrics").text
        for _ in range(3):
            client.get(LIST, headers=auth)
        response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    ok = dict(method="GET", path=LIST, status="200")
    assert sample(text, "petstore_requests_total", **ok) - sample(
        before, "petstore_requests_total", **ok) == 2
    refused = dict(reason="rate_limit_exceeded")
    assert sample(text, "petstore_quota_refusals_total", **refused) - sample(
        before, "petstore_quota_refusals_total", **refused) == 1
    assert sample(text, "petstore_orders", status="pending") == 1
    assert sample(text, "petstore_orders", status="shipped") == 1
    assert "petstore_request_duration_seconds_bucket" in text


def test_metrics_are_404_to_other_addresses_and_when_off(settings: Settings,
                                                         store: Store) -> None:
    # The test client's address is "testclient", not loopback.
    with create_app(settings).test_client() as client:
        assert_error(client.get("/metrics"), 404, "not_found")
    off = settings.replace(metrics_allow="*", metrics_enabled=False)
    with create_app(off).test_client() as client:
        assert_error(client.get("/metrics"), 404, "not_found")


def test_the_allow_list_takes_addresses_and_networks() -> None:
    from app.core.metrics import allowed

    assert allowed("127.0.0.1", "127.0.0.1,::1") and allowed("::1", "127.0.0.1,::1")
    assert allowed("10.1.2.3", "10.0.0.0/8") and not allowed("11.1.2.3", "10.0.0.0/8")
    assert not allowed("testclient", "127.0.0.1") and allowed("anything", "*")


def test_metrics_do_not_spend_quota(client: Any) -> None:
    for _ in range(65):
        client.get("/metrics")
    assert client.get(LIST).headers["x-ratelimit-remaining"] == "59"


def test_the_documents_and_their_uis_are_labelled_by_their_own_paths(
    settings: Settings, store: Store
) -> None:
    """Issue 19: they were counted as path="(no route)" with status 200."""
    with create_app(settings.replace(metrics_allow="*")).test_client() as client:
        for path in ("/v1/openapi.json", "/v1/ui/", "/v2/openapi.json", "/v2/ui/"):
            assert client.get(path).status_code == 200, path
        assert_error(client.get("/v3/store/orders"), 404, "not_found")
        text = client.get("/metrics").text
    for path in ("/v1/openapi.json", "/v1/ui", "/v2/openapi.json", "/v2/ui"):
        assert sample(text, "petstore_requests_total", method="GET", path=path,
                      status="200") >= 1, path
    unrouted = re.findall(r'^petstore_requests_total\{[^}]*path="\(no route\)"[^}]*\}', text,
                          re.M)
    assert unrouted, "the unknown path is still counted as (no route)"
    assert not [line for line in unrouted if re.search(r'status="2\d\d"', line)], unrouted
