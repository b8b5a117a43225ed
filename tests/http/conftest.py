from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from connexion import FlaskApp

from app import create_app
from app.config import Settings
from app.storage import Store
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
