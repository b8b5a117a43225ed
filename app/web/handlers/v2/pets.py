"""Handlers of the v2 operations tagged `pets`: the catalogue (D32), the stock an order
holds (D33) and the inventory (D34). The reads are kept per caller and revision (@kept:
every change to a pet or an order raises the revision); the writes are answered without
Flask (@direct), as the orders' are."""

from __future__ import annotations

import json
from typing import Any

import flask
import orjson

from app.core import orders, paging, pets
from app.web.conditional import if_match_version, kept, order_etag, tagged_json
from app.web.direct import NO_CONTENT, Answer, Call, direct, json_answer
from app.web.handlers import next_link, services


@kept()
def list_pets(limit: int = paging.LIMIT_DEFAULT, cursor: str | None = None,
              status: list[str] | None = None, tag: list[str] | None = None,
              category: str | None = None) -> flask.Response:
    """GET /pets: one page of the pets the filters select, by id."""
    query = pets.pet_query(status=status, tag=tag, category=category)
    page = pets.page(services().store, query, limit, cursor)
    body = b'{"pets":[%s],"next":%s}' % (b",".join(_bytes(pet) for pet in page.pets),
                                         orjson.dumps(page.next))
    return tagged_json(body, {"Link": next_link(page.next)} if page.next else None)


@kept()
def get_pet(petId: int) -> flask.Response:
    """GET /pets/{petId}: one pet, with the strong ETag of its version."""
    pet, version = pets.get_versioned(services().store, petId)
    return tagged_json(orjson.dumps(pet), tag=order_etag(version))


@kept()
def get_inventory() -> flask.Response:
    """GET /store/inventory: units by order status and the tracked stock, of one moment."""
    return tagged_json(orjson.dumps(pets.inventory(services().store)))


@direct
def add_pet(call: Call) -> Answer:
    """POST /pets: add a pet under its Idempotency-Key, or replay the first answer to that
    key (D32, as placing an order, D23)."""
    key = orders.idempotency_key(call.header(b"idempotency-key"))
    written = pets.add(call.services.store, _body(call), call.token_info["key_id"], key)
    headers = [("Location", f"{call.path}/{written.pet['id']}"),
               ("ETag", order_etag(written.version))]
    if written.replayed:
        headers.append(("Idempotent-Replayed", "true"))
    return json_answer(201, orjson.dumps(written.pet), headers)


@direct
def update_pet(call: Call) -> Answer:
    """PATCH /pets/{petId}: a JSON merge patch of the pet, at the version If-Match names
    (D32, D25)."""
    pet_id = call.path_id("petId")
    version = _if_match(call, pet_id)
    written = pets.update(call.services.store, pet_id, _body(call), version)
    return json_answer(200, orjson.dumps(written.pet), [("ETag", order_etag(written.version))])


@direct
def adjust_stock(call: Call) -> Answer:
    """POST /pets/{petId}/adjust-stock: units received or written off, once per
    Idempotency-Key (D33)."""
    pet_id = call.path_id("petId")
    key = orders.idempotency_key(call.header(b"idempotency-key"))
    body = _body(call)
    written = pets.adjust(call.services.store, pet_id, body["delta"], body.get("reason"),
                          call.token_info["key_id"], key)
    headers = [("ETag", order_etag(written.version))]
    if written.replayed:
        headers.append(("Idempotent-Replayed", "true"))
    return json_answer(200, orjson.dumps(written.pet), headers)


@direct
def withdraw_pet(call: Call) -> Answer:
    """DELETE /pets/{petId}: the pet takes no new order; again changes nothing (D32)."""
    pets.withdraw(call.services.store, call.path_id("petId"))
    return NO_CONTENT


def _body(call: Call) -> Any:
    """The request's body, which validation has found a JSON object."""
    return json.loads(call.body)


def _bytes(pet: str | bytes) -> bytes:
    return pet if isinstance(pet, bytes) else pet.encode()


def _if_match(call: Call, pet_id: int) -> int | None:
    """The version the request's If-Match allows the change at (conditional.if_match_version)."""
    return if_match_version(call.header(b"if-match"),
                            lambda: pets.version(call.services.store, pet_id))
