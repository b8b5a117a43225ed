from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from connexion import FlaskApp

from app.core.config import Settings
from app.core.storage import Store
from app.web import create_app
from tests.support import make_key

ORDERS = [
    {"id": 1, "petId": 10, "quantity": 1, "complete": False, "status": "pending"},
    {"id": 2, "petId": 20, "quantity": 2, "shipDate": "2026-11-20T10:00:00Z",
     "complete": True, "status": "shipped"},
    {"id": 3, "petId": 30, "quantity": 1, "complete": False, "status": "cancelled"},
    {"id": 4, "complete": False, "status": "pending"},
]


@pytest.fixture
def app(settings: Settings, store: Store) -> FlaskApp:
    assert settings.validate_responses, "every HTTP test validates its responses"
    store.import_orders(ORDERS)
    return create_app(settings)


@pytest.fixture
def client(app: FlaskApp) -> Iterator[Any]:
    with app.test_client() as client:
        yield client


@pytest.fixture
def key(store: Store) -> str:
    return make_key(store)


@pytest.fixture
def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture(autouse=True)
def every_app_validates_its_responses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every app an HTTP test builds checks each response against the OpenAPI document:
    add_api refuses to build one that would not."""
    add_api = FlaskApp.add_api

    def checked(self: FlaskApp, *args: Any, **kwargs: Any) -> Any:
        assert kwargs.get("validate_responses") is True, (
            "HTTP tests run with validate_responses=True"
        )
        return add_api(self, *args, **kwargs)

    monkeypatch.setattr(FlaskApp, "add_api", checked)
