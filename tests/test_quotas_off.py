"""Quotas turned off. Outside tests/web on purpose: the YAML declares the rate-limit
headers required on every response, and with quotas off none are sent, so these
responses cannot pass Connexion's response validation."""

from __future__ import annotations

import logging

import pytest

from app.core.config import Settings
from app.core.storage import Store
from app.web import create_app
from tests.support import make_key
from tests.web.test_quotas import RATE_HEADERS

LIST = "/v1/store/orders"


def test_quotas_disabled_send_no_rate_limit_headers(settings: Settings, store: Store) -> None:
    key = make_key(store, plan="enterprise", per_minute=20, per_day=1000)
    app = create_app(settings.replace(ratelimit_enabled=False, validate_responses=False))
    with app.test_client() as client:
        for _ in range(25):
            response = client.get(LIST, headers={"Authorization": f"Bearer {key}"})
            assert response.status_code == 200
            assert not any(name in response.headers for name in RATE_HEADERS)


def test_with_quotas_off_repeated_reads_are_still_replayed(
    settings: Settings, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    key = make_key(store)
    store.import_orders([{"id": 1, "petId": 7, "status": "pending"}])
    app = create_app(settings.replace(ratelimit_enabled=False, validate_responses=False))
    auth = {"Authorization": f"Bearer {key}"}
    with app.test_client() as client, caplog.at_level(logging.INFO, "petstore.access"):
        assert client.get(LIST, headers=auth).status_code == 200
        assert client.get(LIST, headers=auth).status_code == 200
        assert client.post("/v2/store/orders/1/ship", headers=auth).status_code == 200
    answered = [r.answered_by for r in caplog.records if r.name == "petstore.access"]
    assert answered == ["long", "kept", "long"]
