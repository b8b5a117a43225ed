"""CORS: off by default; allowed origins from PETSTORE_CORS_ORIGINS, first in the chain."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.config import Settings
from app.core.storage import Store
from app.web import create_app
from tests.support import assert_error, make_key

SHOP = "https://shop.example"
PREFLIGHT = {"Origin": SHOP, "Access-Control-Request-Method": "DELETE",
             "Access-Control-Request-Headers": "authorization"}


@pytest.fixture
def cors_client(settings: Settings, store: Store) -> Any:
    store.import_orders([{"id": 1}])
    with create_app(settings.replace(cors_origins=SHOP)).test_client() as client:
        yield client


def test_cors_is_off_by_default(client: Any, auth: dict[str, str]) -> None:
    response = client.get("/v1/store/orders", headers={**auth, "Origin": SHOP})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


def test_an_allowed_origin_gets_a_preflight_that_spends_no_quota(cors_client: Any) -> None:
    for _ in range(3):
        response = cors_client.options("/v1/store/orders/1", headers=PREFLIGHT)
        assert response.status_code == 200
        assert response.headers["access-control-allow-origin"] == SHOP
        assert "DELETE" in response.headers["access-control-allow-methods"]
        assert "x-ratelimit-limit" not in response.headers
    assert cors_client.get("/v1/store/orders").headers["x-ratelimit-remaining"] == "59"


def test_responses_expose_the_quota_and_request_id_headers(cors_client: Any,
                                                           store: Store) -> None:
    key = make_key(store)
    response = cors_client.get("/v1/store/orders",
                               headers={"Origin": SHOP, "Authorization": f"Bearer {key}"})
    assert response.headers["access-control-allow-origin"] == SHOP
    exposed = {h.strip().lower() for h in
               response.headers["access-control-expose-headers"].split(",")}
    assert {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
            "ratelimit-policy", "ratelimit", "retry-after", "x-request-id", "etag",
            "deprecation", "sunset"} <= exposed


def test_a_refused_preflight_answers_with_the_error_object(cors_client: Any) -> None:
    response = cors_client.options("/v1/store/orders/1",
                                   headers={**PREFLIGHT, "Origin": "https://evil.example"})
    body = assert_error(response, 400, "invalid_request")
    assert "origin" in body["message"]
