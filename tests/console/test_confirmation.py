"""Confirmation before an act that cannot be undone (docs/console.md): the button that
cancels an order, revokes a key or withdraws a pet leads to a page that says what will
happen and changes nothing; that page's form does the act, at the action's own URL. Each
works without script; a second look at a thing already done says so, with no form."""

from __future__ import annotations

import html
import re

from app.core import orders, pets
from app.core.storage import Store
from tests.console.conftest import Visitor, row
from tests.support import make_key

FORM = re.compile(r'<form class="action confirm" id="confirm" method="post" '
                  r'action="([^"]+)">(.*?)</form>', re.S)


def _link(page: str, text: str) -> str:
    """The href of the page's link whose text is text."""
    found = re.search(rf'<a [^>]*href="([^"]+)"[^>]*>{re.escape(text)}</a>', page)
    assert found, f"the page has no link {text!r}"
    return html.unescape(found.group(1))


def _status(store: Store, pet_id: int) -> str:
    return str(pets.get_versioned(store, pet_id)[0]["status"])


def _confirm(visitor: Visitor) -> tuple[str, dict[str, str]]:
    """The confirmation page's form: where it posts, and its fields."""
    found = FORM.search(visitor.page)
    assert found, "the page has no confirmation form"
    fields = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', found.group(2)))
    return found.group(1), {name: html.unescape(value) for name, value in fields.items()}


def test_an_order_is_cancelled_only_from_its_confirmation(signed_in: Visitor,
                                                          store: Store) -> None:
    board = signed_in.get("/console/orders?status=pending&petId=10").text
    link = _link(row(board, "order-1"), "Cancel…")
    assert link.startswith("/console/orders/1/cancel?version=")
    assert 'action="/console/orders/1/cancel"' not in board  # no form cancels at once
    shown = signed_in.get(link)
    assert shown.status_code == 200 and store.get_order(1)["status"] == "pending"  # type: ignore[index]
    assert "<h1>Cancel order 1?</h1>" in shown.text and "cancelled for good" in shown.text
    assert _link(shown.text, "Keep the order") == (
        "/console/orders?status=pending&petId=10&sort=-id")
    action, fields = _confirm(signed_in)
    assert action == "/console/orders/1/cancel"
    assert fields["version"] == str(store.order_version(1))
    done = signed_in.post(action, {k: v for k, v in fields.items() if k != "token"})
    assert done.headers["location"] == (
        "/console/orders?status=pending&petId=10&sort=-id&done=cancel&order=1")
    assert store.get_order(1)["status"] == "cancelled"  # type: ignore[index]
    # Again: it is cancelled, and the page says so, with nothing to send.
    again = signed_in.get("/console/orders/1/cancel")
    assert "only a pending order can be cancelled" in again.text and not FORM.search(again.text)


def test_an_order_changed_since_the_board_goes_back_to_the_board(signed_in: Visitor,
                                                                  store: Store) -> None:
    link = _link(row(signed_in.get("/console/orders").text, "order-4"), "Cancel…")
    orders.ship(store, 4)  # through the API or the CLI, while the board was open
    back = signed_in.get(link)
    assert back.status_code == 303
    assert "Order 4 changed meanwhile; nothing was done." in signed_in.follow(back).text
    assert store.get_order(4)["status"] == "shipped"  # type: ignore[index]


def test_a_key_is_revoked_only_from_its_confirmation(signed_in: Visitor,
                                                     store: Store) -> None:
    make_key(store, name="storefront <shop>")
    (key,) = store.list_keys()
    page = signed_in.get("/console/keys").text
    link = _link(page, "Revoke…")
    assert link == f"/console/keys/{key.id}/revoke"
    shown = signed_in.get(link)
    assert f"<h1>Revoke key {key.id}?</h1>" in shown.text
    assert "storefront &lt;shop&gt;" in shown.text and "refused (401) within 2 seconds" in (
        shown.text)
    assert store.get_key(key.id).revoked_at is None  # type: ignore[union-attr]
    action, _ = _confirm(signed_in)
    done = signed_in.post(action)
    assert f"Key {key.id} is revoked" in signed_in.follow(done).text
    assert store.get_key(key.id).revoked_at is not None  # type: ignore[union-attr]
    again = signed_in.get(link)
    assert "is revoked already" in again.text and not FORM.search(again.text)


def test_a_pet_is_withdrawn_only_from_its_confirmation(signed_in: Visitor,
                                                       store: Store) -> None:
    store.import_pets([{"id": 10, "name": "Rex", "category": "dog", "stock": 5}])
    link = _link(signed_in.get("/console/pets/10").text, "Withdraw from the catalogue…")
    shown = signed_in.get(link)
    assert "<h1>Withdraw pet 10?</h1>" in shown.text and "takes no new order" in shown.text
    assert _status(store, 10) == "available"
    action, _ = _confirm(signed_in)
    assert action == "/console/pets/10/withdraw"
    assert "is withdrawn" in signed_in.follow(signed_in.post(action)).text
    assert _status(store, 10) == "withdrawn"
    pets.withdraw(store, 10)  # again, elsewhere: nothing changes
    again = signed_in.get(link)
    assert "is withdrawn already" in again.text and not FORM.search(again.text)


def test_a_confirmation_of_nothing_is_a_404(signed_in: Visitor) -> None:
    for path in ("/console/orders/99/cancel", "/console/keys/99/revoke",
                 "/console/pets/99/withdraw", "/console/orders/x/cancel"):
        assert signed_in.get(path).status_code == 404, path
