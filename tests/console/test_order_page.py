"""An order's page (docs/console.md, "An order's page"), as a signed-in visitor sees it: its
fields and its pet, its story in time order (who placed, shipped, cancelled it, when and
from where, and what the store does not record, said so), the actions its state allows
coming back to it, the search box that finds it by its number, a clear page for a bad or
unknown id, and text anyone can put in shown as text."""

from __future__ import annotations

import html
import re
from typing import Any

from app.core import orders
from app.core.storage import Store
from tests.console.conftest import Visitor, row
from tests.support import make_key

INT64_PAST = "9223372036854775808"


def _place(visitor: Visitor, secret: str, key: str, pet: int = 10) -> dict[str, Any]:
    """An order placed through v2's API with the key's secret, as a storefront places it."""
    answer = visitor.client.post("/v2/store/orders", json={"petId": pet, "quantity": 1},
                                 headers={"Authorization": f"Bearer {secret}",
                                          "Idempotency-Key": key})
    assert answer.status_code == 201, answer.text
    placed: dict[str, Any] = answer.json()
    return placed


def _steps(page: str) -> list[str]:
    """The story's steps, in the page's order."""
    return re.findall(r'<li class="step [a-z]+" id="step-([a-z]+)"', page)


def _step(page: str, what: str) -> str:
    """The text of one step of the story, its markup gone, its spaces made one."""
    found = re.search(rf'<li class="step {what}" id="step-{what}">(.*?)</li>\s*(?=<li class='
                      r'"step|</ol>)', page, re.S)
    assert found, f"the story has no step {what}"
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", found.group(1))).split())


def _times(page: str, what: str) -> list[str]:
    """The datetime of each <time> of a step."""
    part = page.split(f'id="step-{what}"', 1)[1].split("</li>\n", 1)[0]
    return re.findall(r'<time datetime="([^"]+)"', part)


def _link(page: str, text: str) -> str:
    found = re.search(rf'<a [^>]*href="([^"]+)"[^>]*>{re.escape(text)}</a>', page)
    assert found, f"the page has no link {text!r}"
    return html.unescape(found.group(1))


def _form(page: str, action: str) -> dict[str, str]:
    found = re.search(rf'<form class="action" method="post" data-action="{action}" '
                      r'action="[^"]+">(.*?)</form>', page, re.S)
    assert found, f"the page has no form to {action}"
    return {name: html.unescape(value)
            for name, value in re.findall(r'name="([^"]+)" value="([^"]*)"', found.group(1))}


def test_an_orders_story_says_who_placed_shipped_and_cancelled_it(signed_in: Visitor,
                                                                   store: Store) -> None:
    secret = make_key(store, name="storefront")
    key_id = store.list_keys()[-1].id
    shipped = _place(signed_in, secret, "first")
    cancelled = _place(signed_in, secret, "second")
    answer = signed_in.client.post(f"/v2/store/orders/{shipped['id']}/ship",
                                   json={"shipDate": "2026-11-27T09:30:00Z"},
                                   headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 200, answer.text

    page = signed_in.get(f"/console/orders/{shipped['id']}").text
    assert _steps(page) == ["placed", "shipped"]
    placing = _step(page, "placed")
    assert f"by API key {key_id} (storefront)" in placing
    assert "Not recorded: the API does not record a client's address" in placing
    assert len(_times(page, "placed")) == 1
    shipping = _step(page, "shipped")
    assert _times(page, "shipped") == ["2026-11-27T09:30:00Z"]
    assert "ship date" in shipping and "Not recorded: by whom and from which address" in (
        shipping)
    assert secret not in page and secret[:12] not in page  # a key's name and id, never it

    # Cancelled in the console, from its page: the cancel's confirmation and back here.
    here = f"/console/orders/{cancelled['id']}"
    signed_in.get(here)
    confirmation = signed_in.get(_link(signed_in.page, "Cancel…"))
    assert confirmation.status_code == 200 and _link(confirmation.text, "Keep the order") == here
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', confirmation.text))
    done = signed_in.post(f"{here}/cancel", {"version": fields["version"], "to": "order"})
    assert done.headers["location"] == f"{here}?done=cancel&order={cancelled['id']}"
    page = signed_in.follow(done).text
    assert f"Order {cancelled['id']} is cancelled." in page
    assert _steps(page) == ["placed", "cancelled"]
    cancelling = _step(page, "cancelled")
    assert "by console user owner from testclient" in cancelling
    assert "Not recorded" not in cancelling
    record = store.order_record(cancelled["id"])
    assert record is not None and record.cancelled_at is not None
    assert [at[:19] for at in _times(page, "cancelled")] == [record.cancelled_at[:19]]
    placed_at, cancelled_at = _times(page, "placed")[0], _times(page, "cancelled")[0]
    assert placed_at <= cancelled_at  # in time order
    assert 'id="actions"' not in page  # a cancelled order has nothing left to do
    # The other order, shipped through the API, was not touched.
    assert store.get_order(shipped["id"])["status"] == "shipped"  # type: ignore[index]


def test_an_imported_order_says_what_is_not_recorded(signed_in: Visitor) -> None:
    page = signed_in.get("/console/orders/3").text  # imported as cancelled, by nobody
    assert _steps(page) == ["placed", "cancelled"]
    assert "Not recorded: When it was placed, and by which API key" in _step(page, "placed")
    assert "Not recorded: When it was cancelled." in _step(page, "cancelled")
    assert "neither an API key nor a console user cancelled it" in _step(page, "cancelled")


def test_the_actions_shown_are_those_the_state_allows_and_come_back(signed_in: Visitor,
                                                                     store: Store) -> None:
    shown = {n: signed_in.get(f"/console/orders/{n}").text for n in (1, 2, 3)}
    assert "Ship" in shown[1] and _form(shown[1], "ship")["to"] == "order"
    assert _link(shown[1], "Cancel…").startswith("/console/orders/1/cancel?version=")
    assert 'data-action="complete"' not in shown[1]
    assert _form(shown[2], "complete")["version"] == str(store.order_version(2))
    assert 'data-action="ship"' not in shown[2] and "Cancel…" not in shown[2]
    assert 'id="actions"' not in shown[3]

    # Shipped from its page: the page again, saying so, its story naming the user.
    signed_in.get("/console/orders/1")
    shipped = signed_in.post("/console/orders/1/ship", {**_form(signed_in.page, "ship"),
                                                        "shipDate": "2026-11-28"})
    assert shipped.headers["location"] == "/console/orders/1?done=ship&order=1"
    page = signed_in.follow(shipped).text
    assert "Order 1 is shipped." in page and _steps(page) == ["placed", "shipped"]
    assert "by console user owner from testclient" in _step(page, "shipped")
    assert _times(page, "shipped")[1] == "2026-11-28T00:00:00Z"  # when, then the ship date
    completed = signed_in.post("/console/orders/1/complete", _form(page, "complete"))
    page = signed_in.follow(completed).text
    assert _steps(page) == ["placed", "shipped", "completed"]
    assert "by console user owner from testclient" in _step(page, "completed")
    assert store.get_order(1)["complete"] is True  # type: ignore[index]

    # A page shown before a change acts on nothing, and says so here.
    stale = _form(signed_in.get("/console/orders/4").text, "ship")
    orders.cancel(store, 4, None)  # meanwhile, through the API or the CLI
    refused = signed_in.post("/console/orders/4/ship", stale)
    assert refused.headers["location"] == "/console/orders/4?refused=changed&order=4"
    assert "Order 4 changed meanwhile" in signed_in.follow(refused).text


def test_the_board_links_each_order_to_its_page(signed_in: Visitor) -> None:
    board = signed_in.get("/console/orders").text
    assert '<a href="/console/orders/2">2</a>' in row(board, "order-2")
    page = signed_in.get("/console/orders/2")
    assert page.status_code == 200 and "<h1>Order 2</h1>" in page.text
    assert re.search(r'<dt>Quantity</dt><dd id="quantity">1</dd>', page.text)
    assert '<dd id="status">shipped</dd>' in page.text


def test_the_search_box_goes_to_the_order(signed_in: Visitor) -> None:
    board = signed_in.get("/console/orders").text
    assert 'action="/console/orders/find"' in board and 'name="id"' in board
    for typed in ("2", " 2 ", "#2", "002"):
        found = signed_in.get("/console/orders/find", params={"id": typed})
        assert (found.status_code, found.headers["location"]) == (303, "/console/orders/2")
    assert "<h1>Order 2</h1>" in signed_in.follow(found).text
    for typed in ("99", INT64_PAST, "9" * 30, "0"):  # a number no order has: its 404
        gone = signed_in.follow(signed_in.get("/console/orders/find",
                                              params={"id": typed}))
        assert gone.status_code == 404 and "No such page" in gone.text
    unknown = signed_in.get("/console/orders/99")
    assert unknown.status_code == 404 and "No order has the id 99." in unknown.text
    for typed in ("abc", "1.5", "-1", "١٢", "2 3"):
        refused = signed_in.get("/console/orders/find", params={"id": typed})
        assert refused.status_code == 400, typed
        assert "is not an order number" in html.unescape(refused.text)
    empty = signed_in.get("/console/orders/find", params={"id": ""})
    assert empty.status_code == 400 and "Type an order&#39;s number" in empty.text


def test_a_bad_id_in_the_path_is_a_404_page(signed_in: Visitor) -> None:
    for path in ("abc", "0", "-1", "1.5", INT64_PAST, "9" * 400, "%C2%B2"):
        answer = signed_in.get(f"/console/orders/{path}")
        assert answer.status_code == 404, path
        assert "No such page" in answer.text


def test_text_a_client_wrote_is_shown_as_text(signed_in: Visitor, store: Store) -> None:
    store.import_pets([{"id": 10, "name": "<script>alert(1)</script><b>Rex</b>"}])
    secret = make_key(store, name="<img src=x onerror=alert(2)>")
    placed = _place(signed_in, secret, "<i>k</i>")
    page = signed_in.get(f"/console/orders/{placed['id']}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&lt;b&gt;Rex&lt;/b&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "<script>alert" not in page and "<b>Rex" not in page and "<img src=x" not in page
    assert _link(page, '10 · <span class="pet-name">&lt;script&gt;alert(1)&lt;/script&gt;'
                       '&lt;b&gt;Rex&lt;/b&gt;</span>') == "/console/pets/10"
    searched = signed_in.get("/console/orders/find", params={"id": "<b>x</b>"})
    assert searched.status_code == 400 and "&lt;b&gt;x&lt;/b&gt;" in searched.text
