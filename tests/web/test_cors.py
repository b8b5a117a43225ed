"""CORS: off by default; allowed origins from PETSTORE_CORS_ORIGINS, first in the chain; a
page there may send every method and header the documents declare, and read every response
header they declare (tests/e2e/test_browser_cors.py does so from a real browser)."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.config import Settings
from app.core.storage import Store
from app.web import create_app
from app.web.routing import operations
from tests.support import assert_error, make_key

SHOP = "https://shop.example"
PREFLIGHT = {"Origin": SHOP, "Access-Control-Request-Method": "DELETE",
             "Access-Control-Request-Headers": "authorization"}
# What a page sends whatever an operation declares: its key, a body's type, the conditions
# on a version, an idempotency key and a request id of its own.
ALWAYS_SENT = ("authorization", "content-type", "if-match", "if-none-match",
               "idempotency-key", "x-request-id")


def _listed(value: str) -> set[str]:
    return {item.strip().lower() for item in value.split(",")}


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
    exposed = _listed(response.headers["access-control-expose-headers"])
    assert {"x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset",
            "ratelimit-policy", "ratelimit", "retry-after", "x-request-id", "etag",
            "deprecation", "sunset", "location", "link", "idempotent-replayed"} <= exposed


def test_every_response_header_the_documents_declare_is_exposed(cors_client: Any) -> None:
    declared = {name.lower() for operation in operations()
                for response in operation.definition.get("responses", {}).values()
                for name in response.get("headers", {})}
    assert {"location", "link", "idempotent-replayed", "etag"} <= declared
    response = cors_client.get("/healthz", headers={"Origin": SHOP})
    assert declared <= _listed(response.headers["access-control-expose-headers"])


def test_every_operation_passes_its_preflight_with_every_header_it_declares(
        cors_client: Any) -> None:
    refused = []
    for operation in operations():
        declared = [p["name"].lower() for p in operation.parameters if p.get("in") == "header"]
        sent = ", ".join(sorted({*declared, *ALWAYS_SENT}))
        path = operation.template.replace("{", "").replace("}", "")
        response = cors_client.options(path, headers={
            "Origin": SHOP, "Access-Control-Request-Method": operation.method,
            "Access-Control-Request-Headers": sent})
        if (response.status_code != 200
                or response.headers["access-control-allow-origin"] != SHOP
                or operation.method.lower() not in _listed(response.headers[
                    "access-control-allow-methods"])
                or not _listed(sent) <= _listed(response.headers[
                    "access-control-allow-headers"])):
            refused.append((operation.method, operation.template, response.text))
    assert len(operations()) > 20  # every document's, not none
    assert refused == []


@pytest.mark.parametrize(("method", "headers", "reason"), [
    ("PUT", "authorization", "method"), ("TRACE", "authorization", "method"),
    ("POST", "authorization, x-not-declared", "headers")])
def test_a_preflight_for_what_no_document_declares_is_refused(
        cors_client: Any, method: str, headers: str, reason: str) -> None:
    response = cors_client.options("/v2/store/orders", headers={
        "Origin": SHOP, "Access-Control-Request-Method": method,
        "Access-Control-Request-Headers": headers})
    assert reason in assert_error(response, 400, "invalid_request")["message"]


def test_a_refused_preflight_answers_with_the_error_object(cors_client: Any) -> None:
    response = cors_client.options("/v1/store/orders/1",
                                   headers={**PREFLIGHT, "Origin": "https://evil.example"})
    body = assert_error(response, 400, "invalid_request")
    assert "origin" in body["message"]
