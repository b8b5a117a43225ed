"""Handlers of the operations tagged `pets`."""

from __future__ import annotations

from typing import Any

from app.core import pets
from app.web.handlers import services


def list_pets() -> tuple[list[dict[str, Any]], int]:
    """GET /pets: every pet."""
    return services().store.list_pets(), 200


def get_pet(petId: int) -> tuple[dict[str, Any], int]:
    """GET /pets/{petId}: one pet (deprecated; see its Sunset)."""
    return pets.get(services().store, petId), 200
