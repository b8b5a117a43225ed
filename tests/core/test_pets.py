"""The catalogue's rules (app/core/pets.py, D32-D34) over a real SQLite file: what an addPet
body, a merge patch and an adjustment may hold, each refusal naming the member at fault;
idempotency keys shared with placing; and the list's filters and cursors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from app.core import orders, pets
from app.core.config import Settings
from app.core.errors import (
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidParameter,
    OutOfStock,
    PetNotFound,
    PetNotWithdrawn,
    PetWithdrawn,
)
from app.core.storage import Store, open_store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = open_store(Settings(database=str(tmp_path / "pets.db")))
    yield opened
    opened.dispose()


def refused(call: Any, *args: Any) -> InvalidParameter:
    with pytest.raises(InvalidParameter) as caught:
        call(*args)
    return caught.value


@pytest.mark.parametrize(("body", "name", "rule"), [
    ({}, "name", "required"),
    ([], "The request body", "type"),
    ({"name": None}, "name", "null_name"),
    ({"name": " "}, "name", "minLength"),
    ({"name": "x" * 201}, "name", "maxLength"),
    ({"name": "Rex", "category": "c" * 101}, "category", "maxLength"),
    ({"name": "Rex", "tags": ["a", "a"]}, "tags", "uniqueItems"),
    ({"name": "Rex", "tags": [""]}, "tags", "tag_length"),
    ({"name": "Rex", "tags": ["t" * 51]}, "tags", "tag_length"),
    ({"name": "Rex", "tags": [str(n) for n in range(21)]}, "tags", "maxItems"),
    ({"name": "Rex", "tags": "dog"}, "tags", "type"),
    ({"name": "Rex", "photoUrls": ["ftp://example.com/a.jpg"]}, "photoUrls", "photo_url"),
    ({"name": "Rex", "photoUrls": ["https://"]}, "photoUrls", "photo_url"),
    ({"name": "Rex", "photoUrls": ["https://example.com/a b.jpg"]}, "photoUrls",
     "photo_url"),
    ({"name": "Rex", "stock": -1}, "stock", "type"),
    ({"name": "Rex", "stock": 1_000_000_001}, "stock", "type"),
    ({"name": "Rex", "stock": True}, "stock", "type"),
    ({"name": "Rex", "stock": 1.5}, "stock", "type"),
    ({"name": "Rex", "status": "sold"}, "status", "additionalProperties"),
    ({"name": "Rex", "id": 3}, "id", "additionalProperties"),
    ({"name": "Rex", "reserved": 0}, "reserved", "additionalProperties"),
])
def test_an_add_pet_body_is_refused_naming_the_member_at_fault(body: Any, name: str,
                                                               rule: str) -> None:
    problem = refused(pets.new_pet, body)
    assert (problem.name, problem.rule) == (name, rule)
    assert problem.sentence.startswith(name) and problem.sentence.endswith(".")


def test_a_valid_body_keeps_what_it_gives_and_lists_always() -> None:
    assert pets.new_pet({"name": "Rex"}) == {"name": "Rex", "tags": [], "photoUrls": []}
    assert pets.new_pet({"name": "Rex", "category": None, "stock": None, "tags": None}) == {
        "name": "Rex", "tags": [], "photoUrls": []}
    assert pets.new_pet({"name": "Rex", "category": "dogs", "tags": ["a", "b"],
                         "photoUrls": ["http://x.example/1.png"], "stock": 0}) == {
        "name": "Rex", "category": "dogs", "tags": ["a", "b"],
        "photoUrls": ["http://x.example/1.png"], "stock": 0}


def test_a_merge_patch_names_what_it_sets_and_null_removes() -> None:
    assert pets.changes({"category": None, "stock": None, "tags": None,
                         "photoUrls": None}) == {"category": None, "stock": None,
                                                 "tags": [], "photo_urls": []}
    assert refused(pets.changes, {"name": None}).rule == "null_name"
    assert refused(pets.changes, {"available": 3}).name == "available"
    assert pets.changes({}) == {}


def test_adding_under_a_key_replays_and_refuses_another_body(store: Store) -> None:
    first = pets.add(store, {"name": "Rex", "stock": 2}, 1, "k")
    assert not first.replayed and first.pet["id"] == 1
    again = pets.add(store, {"stock": 2, "name": "Rex"}, 1, "k")  # members in another order
    assert again.replayed and again.pet == first.pet
    with pytest.raises(IdempotencyKeyReused) as reused:
        pets.add(store, {"name": "Tom"}, 1, "k")
    assert "new request" in reused.value.message
    # A body refused by the rules keeps no key.
    refused(pets.add, store, {"name": ""}, 1, "fresh")
    assert pets.add(store, {"name": "Kit"}, 1, "fresh").pet["id"] == 2


def test_a_key_used_to_place_an_order_adds_no_pet_and_the_reverse(store: Store) -> None:
    pets.add(store, {"name": "Rex"}, 1, "pet-key")
    placing = orders.Placing()
    placing.place(store, {"petId": 1, "quantity": 1}, 1, "order-key")
    with pytest.raises(IdempotencyKeyReused):
        pets.add(store, {"name": "Rex"}, 1, "order-key")
    with pytest.raises(IdempotencyKeyReused):
        placing.place(store, {"petId": 1, "quantity": 1}, 1, "pet-key")
    with pytest.raises(IdempotencyKeyReused):
        pets.adjust(store, 1, 1, None, 1, "pet-key")


def test_a_key_in_use_is_refused_at_once(store: Store) -> None:
    claim = pets.CLAIMS.claim(1, "busy")
    try:
        with pytest.raises(IdempotencyKeyInUse):
            pets.add(store, {"name": "Rex"}, 1, "busy")
        with pytest.raises(IdempotencyKeyInUse):
            pets.adjust(store, 1, 1, None, 1, "busy")
    finally:
        pets.CLAIMS.release(claim)


def test_an_adjustment_names_what_is_wrong(store: Store) -> None:
    pets.add(store, {"name": "Rex", "stock": 1}, 1, "k")
    assert refused(pets.adjust, store, 1, 0, None, 1, "a").rule == "nonzero"
    assert refused(pets.adjust, store, 1, "3", None, 1, "a").name == "delta"
    assert refused(pets.adjust, store, 1, True, None, 1, "a").name == "delta"
    assert refused(pets.adjust, store, 1, 1, "r" * 201, 1, "a").name == "reason"
    written = pets.adjust(store, 1, 4, "a delivery", 1, "a")
    assert written.pet["stock"] == 5
    # the same key with another reason is another request
    with pytest.raises(IdempotencyKeyReused):
        pets.adjust(store, 1, 4, "another", 1, "a")


def test_getting_and_withdrawing(store: Store) -> None:
    pets.add(store, {"name": "Rex", "stock": 3}, 1, "k")
    pet, version = pets.get_versioned(store, 1)
    body, same = pets.get_json(store, 1)
    assert orjson.loads(body) == pet and same == version == pets.version(store, 1)
    assert pets.get(store, 1) == {"id": 1, "name": "Rex"}  # v1's
    pets.withdraw(store, 1)
    pets.withdraw(store, 1)
    assert pets.get_versioned(store, 1)[0]["status"] == "withdrawn"
    with pytest.raises(PetWithdrawn):
        orders.Placing().place(store, {"petId": 1, "quantity": 1}, 1, "o")
    for call in (pets.get_versioned, pets.get_json, pets.withdraw, pets.restore):
        with pytest.raises(PetNotFound):
            call(store, 9)
    assert pets.version(store, 9) is None


def test_restoring_takes_back_only_a_withdrawn_pet(store: Store) -> None:
    pets.add(store, {"name": "Rex", "stock": 3}, 1, "k")
    with pytest.raises(PetNotWithdrawn) as refused:
        pets.restore(store, 1)
    assert refused.value.message == ("Pet 1 is in the catalogue, not withdrawn: there is "
                                     "nothing to restore.")
    pets.withdraw(store, 1)
    pets.restore(store, 1)
    assert pets.get_versioned(store, 1)[0]["status"] == "available"
    orders.Placing().place(store, {"petId": 1, "quantity": 3}, 1, "o")
    with pytest.raises(PetNotWithdrawn):  # again: refused, the pet as it is
        pets.restore(store, 1)


def test_placing_through_the_rule_refuses_out_of_stock(store: Store) -> None:
    pets.add(store, {"name": "Rex", "stock": 1}, 1, "k")
    placing = orders.Placing()
    placing.place(store, {"petId": 1, "quantity": 1}, 1, "a")
    with pytest.raises(OutOfStock) as refusal:
        placing.place(store, {"petId": 1, "quantity": 1}, 1, "b")
    assert refusal.value.param == "quantity"


def names(page: pets.Page) -> list[str]:
    return [orjson.loads(text)["name"] for text in page.pets]


@pytest.fixture
def catalogue(store: Store) -> Store:
    store.import_pets([
        {"id": 1, "name": "Rex", "category": "dogs", "tags": ["big", "brown"], "stock": 2},
        {"id": 2, "name": "Tom", "category": "cats", "tags": ["small"]},
        {"id": 3, "name": "Kit", "category": "cats", "tags": ["small", "brown"], "stock": 0},
        {"id": 4, "name": "Old", "tags": ["big"]},
        {"id": 5, "name": "Pip", "category": "birds", "stock": 1},
    ])
    store.withdraw_pet(4)
    orders.Placing().place(store, {"petId": 5, "quantity": 1}, 1, "a")
    return store


@pytest.mark.parametrize(("status", "tag", "category", "expected"), [
    (None, None, None, ["Rex", "Tom", "Kit", "Pip"]),
    (["withdrawn"], None, None, ["Old"]),
    (["available", "withdrawn"], None, None, ["Rex", "Tom", "Old"]),
    (["sold"], None, None, ["Kit"]),
    (["pending"], None, None, ["Pip"]),
    (None, ["brown"], None, ["Rex", "Kit"]),
    (None, ["big", "small"], None, ["Rex", "Tom", "Kit"]),
    (None, None, "cats", ["Tom", "Kit"]),
    (None, ["brown"], "cats", ["Kit"]),
    (["available"], ["big"], None, ["Rex"]),
])
def test_the_list_filters_by_status_tag_and_category(catalogue: Store, status: Any,
                                                     tag: Any, category: Any,
                                                     expected: list[str]) -> None:
    query = pets.pet_query(status, tag, category)
    assert names(pets.page(catalogue, query)) == expected
    assert [orjson.loads(t)["name"] for t in pets.walk(catalogue, query)] == expected


def test_the_list_walks_by_cursor_and_refuses_an_edited_or_foreign_one(
        catalogue: Store) -> None:
    query = pets.pet_query()
    first = pets.page(catalogue, query, limit=3)
    assert names(first) == ["Rex", "Tom", "Kit"] and first.next is not None
    second = pets.page(catalogue, query, limit=3, cursor=first.next)
    assert names(second) == ["Pip"] and second.next is None
    edited = first.next[:5] + ("B" if first.next[5] == "A" else "A") + first.next[6:]
    assert refused(pets.page, catalogue, query, 3, edited).rule == "cursor_edited"
    other = refused(pets.page, catalogue, pets.pet_query(category="cats"), 3, first.next)
    assert (other.name, other.rule) == ("cursor", "cursor_other_pet_query")
    from app.core import paging

    orders_cursor = paging.encode_cursor(paging.order_query(), paging.Position(None, 1))
    assert refused(pets.page, catalogue, query, 3, orders_cursor).name == "cursor"
    assert refused(pets.page, catalogue, query, 0).name == "limit"
    assert refused(pets.pet_query, ["lost"]).name == "status"


def test_the_inventory(catalogue: Store) -> None:
    assert pets.inventory(catalogue) == {
        "orders": {"pending": 1, "shipped": 0, "cancelled": 0},
        "stock": {"onHand": 3, "reserved": 1, "available": 2}}


@pytest.mark.parametrize(("row", "expected"), [
    ({"id": "3", "name": " Rex ", "tags": "a|b", "photoUrls": "", "stock": "4",
      "category": ""},
     {"id": 3, "name": "Rex", "tags": ["a", "b"], "photoUrls": [], "stock": 4}),
    ({"name": "Rex", "tags": '["a", "b c"]'},
     {"name": "Rex", "tags": ["a", "b c"], "photoUrls": []}),
    ({"name": "Rex", "tags": ["a"], "stock": 2},
     {"name": "Rex", "tags": ["a"], "photoUrls": [], "stock": 2}),
])
def test_an_imported_row_may_hold_every_field(row: dict[str, Any],
                                              expected: dict[str, Any]) -> None:
    assert pets.pet_from_row(row) == expected


def test_an_imported_row_is_refused_naming_its_field() -> None:
    with pytest.raises(orders.InvalidOrder, match="stock must be a whole number"):
        pets.pet_from_row({"name": "Rex", "stock": "many"})
    with pytest.raises(orders.InvalidOrder, match="unknown field"):
        pets.pet_from_row({"name": "Rex", "status": "sold"})
