"""Quotas turned off. Outside tests/web on purpose: the YAML declares the rate-limit
headers required on every response, and with quotas off none are sent, so these
responses cannot pass Connexion's response validation."""

from __future__ import annotations

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
