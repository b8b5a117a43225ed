from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from app.config import Settings
from app.storage import Store, open_store


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for a fresh database in the test's own folder. Every HTTP test validates
    its responses against the OpenAPI document."""
    return Settings(database=str(tmp_path / "petstore.db"), validate_responses=True)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    store = open_store(settings)
    yield store
    store.close()
