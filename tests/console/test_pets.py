"""The catalogue and its stock in the console (D32-D35), as a signed-in visitor sees them:
the list filtered and paged as listPets is, adding (once for the form's key), editing at
the version the page showed, receiving and writing off stock, withdrawing and restoring; the core's
refusals as sentences, nothing changed by a refused form, each action in the audit log, and
text anyone can put in shown as text."""

from __future__ import annotations

import re

from app.core import pets
from app.core.storage import Store
from tests.console.conftest import Visitor, walk_pages

# The orders of conftest: order 1 (pending, 2 units) holds pet 10, order 4 (pending, 3)
# pet 30.
CATALOGUE = [
    {"id": 10, "name": "Rex", "category": "dog", "tags": ["good", "big"], "stock": 5},
    {"id": 20, "name": "Tom", "category": "cat", "tags": ["good"]},
    {"id": 30, "name": "Kit", "category": "cat", "stock": 3},
    {"id": 40, "name": "Old", "category": "dog", "stock": 0},
]


def _row_ids(page: str) -> list[int]:
    return [int(found) for found in re.findall(r'<tr id="pet-(\d+)"', page)]


def _field(page: str, name: str) -> str:
    found = re.search(rf'name="{name}" value="([^"]*)"', page)
    assert found, f"the page has no {name}"
    return found.group(1)


def _figures(page: str) -> dict[str, str]:
    return dict(re.findall(r'<dd id="([a-z-]+)">([^<]*)<', page))


def _audit(store: Store, count: int) -> list[tuple[str | None, str, str]]:
    return [(e.user_name, e.action, e.detail) for e in store.audit_entries(count)]


def test_the_pets_are_filtered_as_list_pets_filters_them(signed_in: Visitor,
                                                         store: Store) -> None:
    store.import_pets(CATALOGUE)
    pets.withdraw(store, 40)
    signed_in.get("/console/pets")
    assert _row_ids(signed_in.page) == [10, 20, 30]  # the withdrawn left out
    row = signed_in.page.split('<tr id="pet-30"', 1)[1].split("</tr>", 1)[0]
    assert re.findall(r'<td class="(stock|reserved|available|status)">([^<]*)<', row) == [
        ("stock", "3"), ("reserved", "3"), ("available", "0"), ("status", "pending")]
    signed_in.get("/console/pets?status=available&status=withdrawn")
    assert _row_ids(signed_in.page) == [10, 20, 40]
    signed_in.get("/console/pets?tag=big,nothing")
    assert _row_ids(signed_in.page) == [10]
    signed_in.get("/console/pets?category=cat&tag=good")
    assert _row_ids(signed_in.page) == [20]
    refused = signed_in.get("/console/pets?status=lost")
    assert refused.status_code == 400
    assert "Status may list only these values: available" in refused.text


def test_the_pets_page_by_cursor(signed_in: Visitor, store: Store) -> None:
    store.import_pets([{"id": n, "name": f"pet {n}"} for n in range(1, 131)])
    seen = walk_pages(signed_in, "/console/pets", _row_ids)
    assert seen == list(range(1, 131))
    edited = signed_in.get("/console/pets?cursor=edited")
    assert edited.status_code == 400 and "start from the first page" in edited.text


def test_a_pet_is_added_once_however_often_its_form_is_sent(signed_in: Visitor,
                                                            store: Store) -> None:
    signed_in.get("/console/pets/new")
    form = {"key": _field(signed_in.page, "key"), "name": "Rex", "category": "dog",
            "tags": "good, big", "photoUrls": "https://example.com/rex.jpg", "stock": "4"}
    added = signed_in.post("/console/pets/new", form)
    pet_id = int(re.search(r"/console/pets/(\d+)", added.headers["location"]).group(1))  # type: ignore[union-attr]
    page = signed_in.follow(added).text
    assert f"Pet {pet_id} is added." in page
    assert {k: v for k, v in _figures(page).items() if k != "status"} == {
        "stock": "4", "reserved": "0", "available": "4"}
    signed_in.get("/console/pets/new")
    again = signed_in.post("/console/pets/new", form)  # the same form, sent again
    assert "had been applied already" in signed_in.follow(again).text
    assert [p["id"] for p in store.list_pets()] == [pet_id]
    assert store.get_versioned_pet(pet_id)[0] == {  # type: ignore[index]
        "id": pet_id, "name": "Rex", "category": "dog", "tags": ["good", "big"],
        "photoUrls": ["https://example.com/rex.jpg"], "stock": 4, "reserved": 0,
        "available": 4, "status": "available"}
    assert _audit(store, 1) == [("owner", "pet added", f"pet {pet_id}: Rex")]


def test_a_pet_the_rules_refuse_is_not_added_and_the_form_says_why(signed_in: Visitor,
                                                                   store: Store) -> None:
    signed_in.get("/console/pets/new")
    refused = signed_in.post("/console/pets/new", {
        "key": _field(signed_in.page, "key"), "name": "  ", "stock": "4"})
    assert refused.status_code == 400 and "Name must not be empty." in refused.text
    tags = signed_in.post("/console/pets/new", {
        "key": _field(signed_in.page, "key"), "name": "Rex", "tags": "a, a"})
    assert tags.status_code == 400 and "Tags must not list one value twice." in tags.text
    assert 'value="Rex"' in tags.text  # the form keeps what was typed
    keyless = signed_in.post("/console/pets/new", {"name": "Rex"})
    assert keyless.status_code == 400
    assert store.list_pets() == []


def test_a_name_with_control_or_direction_characters_is_the_forms_error(
        signed_in: Visitor, store: Store) -> None:
    # D37: the core's rule, the API's and the CLI's, said on the form that was sent.
    signed_in.get("/console/pets/new")
    for field, value, label in (("name", "\u202egnp.exe", "Name"),
                                ("category", "do\r\ngs", "Category"),
                                ("tags", "big, \x1b[2J", "Tags")):
        refused = signed_in.post("/console/pets/new", {
            "key": _field(signed_in.page, "key"), "name": "Rex", field: value})
        assert refused.status_code == 400, field
        assert f"{label} must not hold control characters" in refused.text
    assert store.list_pets() == []
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/10")
    version = _field(signed_in.page, "version")
    edited = signed_in.post("/console/pets/10/edit", {"version": version, "name": "Rex\x07"})
    assert edited.status_code == 400 and "Name must not hold control" in edited.text
    assert _audit(store, 1)[0][1] == "edit pet refused"
    # A NUL, which no field takes, is refused before any page reads the form (inputs.py).
    nul = signed_in.post("/console/pets/10/edit", {"version": version, "name": "Rex\x00"})
    assert nul.status_code == 400 and "holds a NUL character" in nul.text
    assert pets.get_versioned(store, 10)[0]["name"] == "Rex"


def test_a_pet_is_edited_at_the_version_its_page_showed(signed_in: Visitor,
                                                        store: Store) -> None:
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/10")
    version = _field(signed_in.page, "version")
    pets.update(store, 10, {"name": "Rex the Second"})  # someone else, meanwhile
    stale = signed_in.post("/console/pets/10/edit", {
        "version": version, "name": "Max", "category": "dog", "tags": "", "stock": "5"})
    assert stale.status_code == 409
    assert "Pet 10 changed meanwhile; nothing was saved." in stale.text
    assert 'value="Rex the Second"' in stale.text  # the page shows the pet as it is now
    saved = signed_in.post("/console/pets/10/edit", {
        "version": _field(stale.text, "version"), "name": "Max", "category": "",
        "tags": "good", "stock": "9"})
    assert "Pet 10 is saved." in signed_in.follow(saved).text
    pet = store.get_versioned_pet(10)[0]  # type: ignore[index]
    assert (pet["name"], "category" in pet, pet["tags"], pet["stock"]) == (
        "Max", False, ["good"], 9)
    assert _audit(store, 2) == [("owner", "pet edited", "pet 10"),
                                ("owner", "edit pet refused", "pet 10: changed meanwhile")]


def test_a_stock_below_what_pending_orders_hold_is_refused(signed_in: Visitor,
                                                           store: Store) -> None:
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/10")
    refused = signed_in.post("/console/pets/10/edit", {
        "version": _field(signed_in.page, "version"), "name": "Rex", "stock": "1"})
    assert refused.status_code == 409
    assert ("Pending orders hold 2 units of pet 10, so its stock cannot be 1; it must be "
            "at least 2.") in refused.text
    assert 'value="1"' in refused.text  # what was typed, to correct
    written_off = signed_in.post("/console/pets/10/stock", {
        "key": _field(refused.text, "key"), "direction": "write-off", "units": "4",
        "reason": "broken"})
    assert written_off.status_code == 409 and "it must be at least 2" in written_off.text
    assert store.get_versioned_pet(10)[0]["stock"] == 5  # type: ignore[index]


def test_stock_is_received_and_written_off_once_for_each_form(signed_in: Visitor,
                                                              store: Store) -> None:
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/30")
    assert _figures(signed_in.page)["status"] == "pending"
    form = {"key": _field(signed_in.page, "key"), "direction": "receive", "units": "7",
            "reason": "delivery 12"}
    received = signed_in.post("/console/pets/30/stock", form)
    page = signed_in.follow(received).text
    assert "The stock of pet 30 is received." in page
    assert _figures(page) == {"status": "available", "stock": "10", "reserved": "3",
                              "available": "7"}
    again = signed_in.post("/console/pets/30/stock", form)
    assert "had been applied already" in signed_in.follow(again).text
    off = signed_in.post("/console/pets/30/stock", {
        "key": _field(signed_in.page, "key"), "direction": "write-off", "units": "2",
        "reason": "<b>ill</b>"})
    page = signed_in.follow(off).text
    assert "The stock of pet 30 is written off." in page and _figures(page)["stock"] == "8"
    assert _audit(store, 2) == [
        ("owner", "stock written off", "pet 30: -2 (<b>ill</b>)"),
        ("owner", "stock received", "pet 30: +7 (delivery 12)")]
    audit = signed_in.get("/console/audit").text
    assert "&lt;b&gt;ill&lt;/b&gt;" in audit and "<b>ill" not in audit
    signed_in.get("/console/pets/30")
    zero = signed_in.post("/console/pets/30/stock", {
        "key": _field(signed_in.page, "key"), "direction": "receive", "units": "0"})
    assert zero.status_code == 400 and "Units must not be 0" in zero.text


def test_a_stock_not_tracked_cannot_be_adjusted(signed_in: Visitor, store: Store) -> None:
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/20")
    refused = signed_in.post("/console/pets/20/stock", {
        "key": _field(signed_in.page, "key"), "direction": "receive", "units": "3"})
    assert refused.status_code == 409
    assert "The stock of pet 20 is not tracked, so it cannot be adjusted" in refused.text
    assert _audit(store, 1)[0][1] == "adjust stock refused"


def test_a_stock_form_of_no_known_direction_is_refused_and_recorded(signed_in: Visitor,
                                                                    store: Store) -> None:
    """Only receive and write-off: "sideways", or none, is neither, never a receipt."""
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/30")
    sideways = signed_in.post("/console/pets/30/stock", {
        "key": _field(signed_in.page, "key"), "direction": "sideways", "units": "3"})
    assert sideways.status_code == 400
    assert "What to do must be one of receive, write-off." in sideways.text
    none = signed_in.post("/console/pets/30/stock", {
        "key": _field(signed_in.page, "key"), "units": "3"})
    assert none.status_code == 400 and "What to do must be one of" in none.text
    assert _figures(none.text)["stock"] == "3"
    assert store.get_versioned_pet(30)[0]["stock"] == 3  # type: ignore[index]
    refusal = ("owner", "adjust stock refused",
               "pet 30: What to do must be one of receive, write-off.")
    assert _audit(store, 2) == [refusal, refusal]


def test_a_withdrawn_pet_takes_no_new_order_and_stays(signed_in: Visitor,
                                                      store: Store) -> None:
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/10")
    withdrawn = signed_in.post("/console/pets/10/withdraw")
    page = signed_in.follow(withdrawn).text
    assert "Pet 10 is withdrawn from the catalogue" in page
    assert _figures(page)["status"] == "withdrawn" and 'id="withdraw"' not in page
    # None to order, as the inventory says; its stock and held units still shown (D37).
    assert {name: _figures(page)[name] for name in ("stock", "reserved", "available")} == {
        "stock": "5", "reserved": "2", "available": "0"}
    assert _audit(store, 1) == [("owner", "pet withdrawn", "pet 10")]
    assert signed_in.get("/console/pets/99").status_code == 404


def test_a_withdrawn_pet_is_restored_from_its_page(signed_in: Visitor, store: Store) -> None:
    store.import_pets(CATALOGUE)
    pets.withdraw(store, 10)
    store.adjust_stock(10, 2, 1, "k", "fp", "2026-11-28T10:00:00Z")  # received meanwhile
    page = signed_in.get("/console/pets/10").text
    assert 'id="restore"' in page and 'action="/console/pets/10/restore"' in page
    assert 'id="withdraw"' not in page
    version = store.pet_version(10)
    restored = signed_in.post("/console/pets/10/restore")
    assert restored.headers["location"] == "/console/pets/10?done=restored&pet=10"
    page = signed_in.follow(restored).text
    assert "Pet 10 is back in the catalogue; it takes orders again." in page
    # Its stock as it is now, what pending order 1 holds, and what is left to order.
    assert _figures(page) == {"status": "available", "stock": "7", "reserved": "2",
                              "available": "5"}
    assert 'id="withdraw"' in page and 'id="restore"' not in page
    assert store.pet_version(10) > version  # type: ignore[operator]
    assert store.inventory() == store.inventory_counted()
    assert _audit(store, 1) == [("owner", "pet restored", "pet 10")]
    assert 10 in _row_ids(signed_in.get("/console/pets").text)  # listed again


def test_a_restore_of_a_pet_not_withdrawn_or_unknown_is_refused(signed_in: Visitor,
                                                                store: Store) -> None:
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/20")
    version = store.pet_version(20)
    refused = signed_in.post("/console/pets/20/restore")
    assert refused.status_code == 409
    assert ("Pet 20 is in the catalogue, not withdrawn: there is nothing to restore."
            in refused.text)
    assert _figures(refused.text)["status"] == "available"
    assert store.pet_version(20) == version
    assert _audit(store, 1) == [("owner", "restore pet refused", "pet 20: Pet 20 is in the "
                                 "catalogue, not withdrawn: there is nothing to restore.")]
    for path in ("/console/pets/99/restore", "/console/pets/abc/restore",
                 "/console/pets/0/restore", "/console/pets/9223372036854775808/restore"):
        assert signed_in.post(path).status_code == 404, path
    # Without the page's token, or from another site: nothing, even for a withdrawn pet.
    pets.withdraw(store, 30)
    assert signed_in.post("/console/pets/30/restore", token="forged").status_code == 403
    assert signed_in.post("/console/pets/30/restore",
                          headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert store.get_versioned_pet(30)[0]["status"] == "withdrawn"  # type: ignore[index]
    assert signed_in.get("/console/pets/30/restore").status_code == 404  # only a POST acts


def test_a_pets_text_is_shown_as_text(signed_in: Visitor, store: Store) -> None:
    store.import_pets([{"id": 10, "name": "<script>alert(1)</script>", "category": "<i>c",
                        "tags": ["<b>t</b>"]}])
    for path in ("/console/pets", "/console/pets/10"):
        page = signed_in.get(path).text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "<script>alert" not in page and "<b>t</b>" not in page and "<i>c" not in page


def test_a_pets_form_from_another_site_changes_nothing(signed_in: Visitor,
                                                       store: Store) -> None:
    store.import_pets(CATALOGUE)
    signed_in.get("/console/pets/10")
    refused = signed_in.post("/console/pets/10/withdraw",
                             headers={"Sec-Fetch-Site": "cross-site"})
    assert refused.status_code == 403
    assert store.get_versioned_pet(10)[0]["status"] == "available"  # type: ignore[index]
