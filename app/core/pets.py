"""The pets rules: a pet has an id and a name; orders name pets but need not match one."""

from __future__ import annotations

from typing import Any

from app.core.errors import PetNotFound
from app.core.orders import INT64_MAX, InvalidOrder
from app.core.storage import Store

PET_FIELDS = ("id", "name")
NAME_MAX = 200


def get(store: Store, pet_id: int) -> dict[str, Any]:
    """The pet with this id; raises PetNotFound."""
    pet = store.get_pet(pet_id)
    if pet is None:
        raise PetNotFound(pet_id)
    return pet


def pet_from_row(row: Any) -> dict[str, Any]:
    """Validate one row to import: an optional id and a non-empty name."""
    if not isinstance(row, dict):
        raise InvalidOrder(f"each pet must be an object, got {type(row).__name__}")
    unknown = sorted(set(row) - set(PET_FIELDS))
    if unknown:
        raise InvalidOrder(f"unknown field(s) {', '.join(unknown)}; the fields are id, name")
    pet: dict[str, Any] = {}
    if row.get("id") not in (None, ""):
        pet_id = row["id"]
        if isinstance(pet_id, str) and pet_id.strip().isascii() and pet_id.strip().isdigit():
            pet_id = int(pet_id.strip())
        valid = isinstance(pet_id, int) and not isinstance(pet_id, bool)
        if not valid or not 1 <= pet_id <= INT64_MAX:
            raise InvalidOrder(
                f"id must be a whole number from 1 to {INT64_MAX}, got {row['id']!r}")
        pet["id"] = pet_id
    name = row.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
        raise InvalidOrder(f"name must be 1 to {NAME_MAX} characters, got {name!r}")
    pet["name"] = name.strip()
    return pet
