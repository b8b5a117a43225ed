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
    ({"name": 7}, "name", "type"),
    ({"name": "Rex", "category": 7}, "category", "type"),
    ({"name": "Rex", "category": ""}, "category", "minLength"),
    ({"name": "Rex", "tags": [7]}, "tags", "type"),
    ({"name": "Rex", "photoUrls": "https://example.com/a.jpg"}, "photoUrls", "type"),
    ({"name": "Rex", "photoUrls": [7]}, "photoUrls", "photo_url"),
    ({"name": "Rex", "photoUrls": ["https://example.com/" + "a" * 1981]}, "photoUrls",
     "photo_url"),
    ({"name": "Rex", "photoUrls": [f"https://example.com/{n}.jpg" for n in range(21)]},
     "photoUrls", "maxItems"),
    ({"name": "Rex", "photoUrls": ["https://example.com/a\x01.jpg"]}, "photoUrls",
     "photo_url"),
    ({"name": "Rex", "photoUrls": ["http://[::1/a.jpg"]}, "photoUrls", "photo_url"),
    ({"name": "Rex", "photoUrls": ["example.com/a.jpg"]}, "photoUrls", "photo_url"),
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


def test_a_body_may_hold_the_largest_of_each_member() -> None:
    body = {"name": "n" * 200, "category": "c" * 100, "tags": [f"{n:050}" for n in range(20)],
            "photoUrls": [f"https://example.com/{n:01980}" for n in range(20)],
            "stock": 1_000_000_000}
    assert len(body["photoUrls"][0]) == 2000
    assert pets.new_pet(body) == body


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


def test_an_unknown_pet_is_named_in_the_refusal(store: Store) -> None:
    for call in (pets.get, pets.get_versioned, pets.get_json):
        with pytest.raises(PetNotFound) as refusal:
            call(store, 9)
        assert str(refusal.value) == "No pet has the id 9."


def test_a_stock_s_bounds_are_taken_and_said() -> None:
    assert pets.new_pet({"name": "Rex", "stock": 1_000_000_000})["stock"] == 1_000_000_000
    assert pets.new_pet({"name": "Rex", "stock": 0})["stock"] == 0
    too_many = refused(pets.new_pet, {"name": "Rex", "stock": 1_000_000_001})
    assert too_many.sentence == "stock must be a whole number from 0 to 1000000000."


def test_claims_hold_a_key_until_it_is_released() -> None:
    claims = pets.Claims()
    held = claims.claim(1, "k")
    with pytest.raises(IdempotencyKeyInUse):
        claims.claim(1, "k")
    assert claims.claim(2, "k") == (2, "k")  # another key's own
    claims.release(held)
    assert claims.claim(1, "k") == (1, "k")


def test_an_adjustment_s_reason_may_be_200_characters(store: Store) -> None:
    pets.add(store, {"name": "Rex", "stock": 1}, 1, "k")
    assert pets.adjust(store, 1, 1, "r" * 200, 1, "a").pet["stock"] == 2
    too_long = refused(pets.adjust, store, 1, 1, "r" * 201, 1, "b")
    assert (too_long.name, too_long.rule) == ("reason", "maxLength")
    assert refused(pets.adjust, store, 1, 1, 7, 1, "b").name == "reason"
    assert pets.get_versioned(store, 1)[0]["stock"] == 2


def test_a_key_that_adjusted_one_pet_adjusts_no_other(store: Store) -> None:
    store.import_pets([{"id": 1, "name": "Rex", "stock": 1}, {"id": 2, "name": "Tom",
                                                               "stock": 1}])
    pets.adjust(store, 1, 4, None, 1, "a")
    with pytest.raises(IdempotencyKeyReused):
        pets.adjust(store, 2, 4, None, 1, "a")
    assert [pets.get_versioned(store, n)[0]["stock"] for n in (1, 2)] == [5, 1]


def test_an_adjustment_is_logged_once_with_its_reason(store: Store,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    pets.add(store, {"name": "Rex", "stock": 1}, 1, "k")
    with caplog.at_level("INFO", logger="petstore.stock"):
        pets.adjust(store, 1, 4, "a delivery", 3, "a")
        pets.adjust(store, 1, 4, "a delivery", 3, "a")  # a retry: replayed, not logged
        pets.adjust(store, 1, -2, None, 3, "b")
    assert [r.getMessage() for r in caplog.records] == [
        "stock of pet 1 adjusted by +4 (key 3): a delivery",
        "stock of pet 1 adjusted by -2 (key 3): no reason given"]


def test_a_cursor_of_the_pets_filters_holding_no_id_is_refused(catalogue: Store) -> None:
    from app.core import paging

    query = pets.pet_query()
    for position in ("1", True, None, 1.5):
        cursor = paging.bound_cursor(pets._made_for(query), position)
        refusal = refused(pets.page, catalogue, query, 3, cursor)
        assert (refusal.name, refusal.rule) == ("cursor", "cursor_edited")


def test_a_page_that_holds_the_last_pet_has_no_next(catalogue: Store) -> None:
    query = pets.pet_query()
    whole = pets.page(catalogue, query, limit=4)
    assert names(whole) == ["Rex", "Tom", "Kit", "Pip"] and whole.next is None
    first = pets.page(catalogue, query, limit=2)
    assert names(pets.page(catalogue, query, 2, first.next)) == ["Kit", "Pip"]


def test_a_walk_goes_past_the_largest_page(store: Store) -> None:
    store.import_pets({"id": n, "name": f"Pet {n}"} for n in range(1, 1203))
    walked = [orjson.loads(text)["id"] for text in pets.walk(store, pets.pet_query())]
    assert walked == list(range(1, 1203))


@pytest.mark.parametrize(("row", "message"), [
    (["Rex"], "each pet must be an object, got list"),
    ({"name": "Rex", "status": "sold", "age": 3},
     "unknown field(s) age, status; the fields are id, name, category, tags, photoUrls, "
     "stock"),
    ({"id": "x", "name": "Rex"},
     "id must be a whole number from 1 to 9223372036854775807, got 'x'"),
    ({"id": True, "name": "Rex"},
     "id must be a whole number from 1 to 9223372036854775807, got True"),
    ({"id": "0", "name": "Rex"},
     "id must be a whole number from 1 to 9223372036854775807, got '0'"),
    ({"id": 9223372036854775808, "name": "Rex"},
     "id must be a whole number from 1 to 9223372036854775807, got 9223372036854775808"),
])
def test_an_imported_row_s_refusal_says_what_is_wrong(row: Any, message: str) -> None:
    with pytest.raises(orders.InvalidOrder) as refusal:
        pets.pet_from_row(row)
    assert str(refusal.value) == message


def test_an_imported_row_s_id_may_be_empty_or_the_largest() -> None:
    assert pets.pet_from_row({"id": "", "name": "Rex"}) == {
        "name": "Rex", "tags": [], "photoUrls": []}
    assert pets.pet_from_row({"id": "9223372036854775807", "name": "Rex"})["id"] == (
        9223372036854775807)


UNREADABLE = ("must not hold control characters (such as NUL, a tab, a line break or ESC) "
              "or the characters that turn the direction of text (U+202A to U+202E, "
              "U+2066 to U+2069): it is text for a person to read.")


@pytest.mark.parametrize(("status", "tag", "category", "name", "sentence"), [
    (["lost"], None, None, "status",
     "status may list only these values: available, pending, sold, withdrawn."),
    (None, [""], None, "tag", "tag may list only tags of 1 to 50 characters."),
    (None, ["t" * 51], None, "tag", "tag may list only tags of 1 to 50 characters."),
    (None, [7], None, "tag", "tag may list only tags of 1 to 50 characters."),
    (None, ["a\x00b"], None, "tag", f"tag {UNREADABLE}"),
    (None, None, "", "category", "category must be at most 100 characters long."),
    (None, None, "c" * 101, "category", "category must be at most 100 characters long."),
    (None, None, "a\x00b", "category", f"category {UNREADABLE}"),
])
def test_a_list_s_filters_are_refused_naming_the_one_at_fault(
        status: Any, tag: Any, category: Any, name: str, sentence: str) -> None:
    refusal = refused(pets.pet_query, status, tag, category)
    assert (refusal.name, refusal.sentence) == (name, sentence)


def test_a_list_s_filters_take_their_largest_and_one_form() -> None:
    query = pets.pet_query(["sold", "available", "sold"], ["t" * 50, "a", "a"], "c" * 100)
    assert query == pets.PetQuery(("available", "sold"), ("a", "t" * 50), "c" * 100)


@pytest.mark.parametrize(("body", "sentence"), [
    ({"name": "Rex", "tags": "dog"}, "tags must be a list of values."),
    ({"name": "Rex", "tags": ["dog", 7]}, "tags must be a list of values."),
    ({"name": "Rex", "photoUrls": "https://example.com/a.jpg"},
     "photoUrls must be a list of values."),
    ({"name": 7}, "name must be a string of text."),
    ({"name": "Rex", "category": 7}, "category must be a string of text."),
    ({"name": "Rex", "category": ""}, "category must not be empty."),
    ({"name": " "}, "name must not be empty."),
    (["Rex"], "The request body must be a JSON object."),
    ({"name": "Rex", "status": "sold"}, "status is not a member of this request body; its "
     "members are name, category, tags, photoUrls, stock."),
])
def test_a_member_of_the_wrong_type_is_said_to_be(body: Any,
                                                  sentence: str) -> None:
    assert refused(pets.new_pet, body).sentence == sentence
