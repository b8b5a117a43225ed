"""Handlers of the v2 operations tagged `pets`: the catalogue (D32), the stock an order
holds (D33) and the inventory (D34). The reads are kept per caller and revision (@kept:
every change to a pet or an order raises the revision)."""

from __future__ import annotations

from typing import Any

import orjson
from connexion.lifecycle import ConnexionResponse

from app.core import orders, paging, pets
from app.web.conditional import Tagged, if_match_version, kept, order_etag, tagged_json
from app.web.handlers import (
    header,
    json_response,
    next_link,
    no_content,
    request_json,
    request_path,
    services,
)


@kept
def list_pets(limit: int = paging.LIMIT_DEFAULT, cursor: str | None = None,
              status: list[str] | None = None, tag: list[str] | None = None,
              category: str | None = None) -> Tagged:
    """GET /pets: one page of the pets the filters select, by id."""
    query = pets.pet_query(status=status, tag=tag, category=category)
    page = pets.page(services().store, query, limit, cursor)
    body = b'{"pets":[%s],"next":%s}' % (b",".join(_bytes(pet) for pet in page.pets),
                                         orjson.dumps(page.next))
    return tagged_json(body, {"Link": next_link(page.next)} if page.next else None)


@kept
def get_pet(petId: int) -> Tagged:
    """GET /pets/{petId}: one pet, with the strong ETag of its version."""
    pet, version = pets.get_versioned(services().store, petId)
    return tagged_json(orjson.dumps(pet), tag=order_etag(version))


@kept
def get_inventory() -> Tagged:
    """GET /store/inventory: units by order status and the tracked stock, of one moment."""
    return tagged_json(orjson.dumps(pets.inventory(services().store)))


def add_pet(body: dict[str, Any], token_info: dict[str, Any]) -> ConnexionResponse:
    """POST /pets: add a pet under its Idempotency-Key, or replay the first answer to that
    key (D32, as placing an order, D23)."""
    key = orders.idempotency_key(header("Idempotency-Key"))
    written = pets.add(services().store, request_json(body), token_info["key_id"], key)
    headers = {"Location": f"{request_path()}/{written.pet['id']}",
               "ETag": order_etag(written.version)}
    if written.replayed:
        headers["Idempotent-Replayed"] = "true"
    return json_response(201, orjson.dumps(written.pet), headers)


def update_pet(petId: int, body: dict[str, Any]) -> ConnexionResponse:
    """PATCH /pets/{petId}: a JSON merge patch of the pet, at the version If-Match names
    (D32, D25)."""
    version = _if_match(petId)
    written = pets.update(services().store, petId, request_json(body), version)
    return json_response(200, orjson.dumps(written.pet), {"ETag": order_etag(written.version)})


def adjust_stock(petId: int, body: dict[str, Any], token_info: dict[str, Any]) -> ConnexionResponse:
    """POST /pets/{petId}/adjust-stock: units received or written off, once per
    Idempotency-Key (D33)."""
    key = orders.idempotency_key(header("Idempotency-Key"))
    given = request_json(body)
    written = pets.adjust(services().store, petId, given["delta"], given.get("reason"),
                          token_info["key_id"], key)
    headers = {"ETag": order_etag(written.version)}
    if written.replayed:
        headers["Idempotent-Replayed"] = "true"
    return json_response(200, orjson.dumps(written.pet), headers)


def withdraw_pet(petId: int) -> ConnexionResponse:
    """DELETE /pets/{petId}: the pet takes no new order; again changes nothing (D32)."""
    pets.withdraw(services().store, petId)
    return no_content()


def _bytes(pet: str | bytes) -> bytes:
    return pet if isinstance(pet, bytes) else pet.encode()


def _if_match(pet_id: int) -> int | None:
    """The version the request's If-Match allows the change at (conditional.if_match_version)."""
    return if_match_version(header("If-Match"), lambda: pets.version(services().store, pet_id))
