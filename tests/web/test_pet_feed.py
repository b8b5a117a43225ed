"""The feed of changed pets over HTTP, in process (D39): every change a client makes through
either version (a pet added, renamed, its stock received, an order placed, cancelled and
shipped, the pet withdrawn) brings the pet again, as getPet answers it, in the order of the
changes; a long poll is answered soon after a change; a cursor of the other feed, an
edited one or another database's is refused. Every response is validated against
openapi/petstore-v2.yaml."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from app.core.config import Settings
from app.core.storage import Store, open_store
from app.web import create_app
from tests.support import assert_error, make_key, wait_until
from tests.web.test_feed import RATE_HEADERS, _waiting
from tests.web.test_pets_v2 import REX, add, adjust, order, patch, pet

PET_FEED = "/v2/pet-changes"
ORDER_FEED = "/v2/store/order-changes"


def _changes(client: Any, auth: dict[str, str], after: str | None = None,
             **params: Any) -> dict[str, Any]:
    answer = client.get(PET_FEED, params={**({"after": after} if after else {}), **params},
                        headers=auth)
    assert answer.status_code == 200, answer.text
    for header in RATE_HEADERS:
        assert header in answer.headers
    body: dict[str, Any] = answer.json()
    return body


def test_every_change_of_a_pet_by_any_path_brings_it_again_as_it_is(
        client: Any, auth: dict[str, str]) -> None:
    start = _changes(client, auth)
    assert start == {"pets": [], "next": start["next"]}  # a shop without a catalogue
    pet_id = add(client, auth).json()["id"]
    added = _changes(client, auth, start["next"])
    assert added["pets"] == [pet(client, auth, pet_id)]
    assert added["pets"][0]["available"] == 3

    cursor = added["next"]
    seen = []
    steps = [
        lambda: patch(client, auth, pet_id, {"name": "Rex II"}),
        lambda: adjust(client, auth, pet_id, {"delta": 2}, "receive-1"),
        lambda: order(client, auth, pet_id, 5, "order-1"),
    ]
    for step in steps:
        assert step().status_code in (200, 201)
        page = _changes(client, auth, cursor)
        seen.append(page["pets"])
        cursor = page["next"]
    names_and_available = [[(p["name"], p["available"]) for p in pets] for pets in seen]
    assert names_and_available == [[("Rex II", 3)], [("Rex II", 5)], [("Rex II", 0)]]
    sold_out = seen[-1][0]
    assert (sold_out["reserved"], sold_out["status"]) == (5, "pending")

    # Through v1 and the orders' operations: each moves what is available.
    other = order(client, auth, pet_id, 1, "order-2")
    assert_error(other, 422, "out_of_stock")  # refused: nothing changed, nothing comes
    assert _changes(client, auth, cursor) == {"pets": [], "next": cursor}
    placed = client.get("/v2/store/orders", params={"petId": pet_id},
                        headers=auth).json()["orders"][0]["id"]
    assert client.delete(f"/v1/store/orders/{placed}", headers=auth).status_code == 204
    back = _changes(client, auth, cursor)
    assert [(p["id"], p["available"], p["reserved"]) for p in back["pets"]] == [(pet_id, 5, 0)]

    # Three changes since a cursor come as one pet, as it is now (a compacted feed).
    assert client.delete(f"/v2/pets/{pet_id}", headers=auth).status_code == 204
    assert patch(client, auth, pet_id, {"category": "cats"}).status_code == 200
    latest = _changes(client, auth, cursor)
    assert latest["pets"] == [pet(client, auth, pet_id)]
    assert (latest["pets"][0]["status"], latest["pets"][0]["available"],
            latest["pets"][0]["category"]) == ("withdrawn", 0, "cats")
    assert _changes(client, auth, latest["next"]) == {"pets": [], "next": latest["next"]}


def test_pets_come_in_the_order_of_their_changes_a_page_at_a_time(
        client: Any, auth: dict[str, str]) -> None:
    ids = [add(client, auth, {**REX, "name": f"Pet {n}"}, key=f"pet-{n}").json()["id"]
           for n in range(5)]
    patch(client, auth, ids[1], {"name": "Changed"})
    pages, cursor = [], None
    while True:
        page = _changes(client, auth, cursor, limit=2)
        pages.append([p["id"] for p in page["pets"]])
        cursor = page["next"]
        if len(page["pets"]) < 2:
            break
    assert pages == [[ids[0], ids[2]], [ids[3], ids[4]], [ids[1]]]


def test_a_waiting_request_is_answered_soon_after_a_pet_changes(
        client: Any, auth: dict[str, str]) -> None:
    pet_id = add(client, auth).json()["id"]
    cursor = _changes(client, auth)["next"]
    before, done = _waiting(), []

    def place() -> None:
        wait_until(lambda: _waiting() > before, message="no request waited")
        assert order(client, auth, pet_id, 3, "order-1").status_code == 201
        done.append(time.monotonic())

    placing = threading.Thread(target=place)
    placing.start()
    answer = _changes(client, auth, cursor, wait=20)
    answered = time.monotonic()
    placing.join(10)
    assert [(p["id"], p["available"]) for p in answer["pets"]] == [(pet_id, 0)]
    # D26's half second after the commit, with room for a loaded machine (`make bench`
    # prints the real figure).
    assert 0 <= answered - done[0] < 3, answered - done[0]


def test_a_cursor_of_the_orders_feed_an_edited_one_or_another_database_s_is_refused(
        client: Any, auth: dict[str, str], settings: Settings, tmp_path: Path) -> None:
    add(client, auth)
    cursor = _changes(client, auth)["next"]
    orders_cursor = client.get(ORDER_FEED, headers=auth).json()["next"]
    for after in (orders_cursor, cursor[:-1], cursor[:10] + "x" + cursor[11:]):
        refused = client.get(PET_FEED, params={"after": after}, headers=auth)
        body = assert_error(refused, 400, "invalid_request")
        assert body["param"] == "after" and "after" in body["message"]
        for header in RATE_HEADERS:
            assert header in refused.headers
    # And the other way: a pet feed's cursor is not the orders feed's.
    assert_error(client.get(ORDER_FEED, params={"after": cursor}, headers=auth), 400,
                 "invalid_request")
    for name, value in (("limit", 0), ("limit", 1001), ("wait", 31)):
        body = assert_error(client.get(PET_FEED, params={name: value}, headers=auth), 400,
                            "invalid_request")
        assert name in body["message"]

    other_settings = settings.replace(database=str(tmp_path / "other.db"))
    other = open_store(other_settings)
    other.import_pets([{"id": i, "name": f"Pet {i}"} for i in range(1, 30)])
    other_auth = {"Authorization": f"Bearer {make_key(other)}"}
    with create_app(other_settings).test_client() as other_client:
        refused = other_client.get(PET_FEED, params={"after": cursor}, headers=other_auth)
    assert_error(refused, 410, "resync_required")
    for header in RATE_HEADERS:
        assert header in refused.headers
    other.dispose()


def test_the_pet_feed_needs_a_key(client: Any, store: Store) -> None:
    assert_error(client.get(PET_FEED), 401, "missing_api_key")
