"""The webhooks pages (D35 over D28), as a signed-in visitor sees them: every endpoint with
its state (enabled, failing with its next attempt, disabled with its reason) and its lag;
adding one (its secret shown once, the shop's own: no API key sees it), editing it, and
each refusal of the API's rules on the form kept as it was sent, with nothing changed;
deleting it only from its confirmation page; an endpoint's deliveries newest first; a test
message sent to a real receiver on loopback; enabling, disabling, rotating the secret,
replaying from a time or a feed cursor; each in the audit log, and every text a key's
owner or a receiver wrote shown as text. The deliverer is off here: what it does is
tests/web's and the browser test's."""

from __future__ import annotations

import html
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from markupsafe import escape

from app.core import feed, webhook_urls, webhooks
from app.core.config import Settings
from app.core.orders import utc_now
from app.core.storage import Store
from app.core.storage.records import WebhookEndpoint
from app.web import PetstoreApp, create_app
from tests.console.conftest import ORDERS, Visitor, cell, form_key, row
from tests.receivers import Receiver, receiving
from tests.support import make_key

LOOPBACK = webhook_urls.networks("127.0.0.0/8")


@pytest.fixture
def console_settings(console_settings: Settings) -> Settings:
    return console_settings.replace(webhook_allowed_networks="127.0.0.0/8",
                            webhook_timeout=2.0, webhooks_enabled=False)


@pytest.fixture
def storefront(store: Store) -> str:
    """An API key's secret, made before the app starts (as keys are read then)."""
    return make_key(store, name="storefront")


@pytest.fixture
def app(console_settings: Settings, store: Store, storefront: str) -> PetstoreApp:
    store.import_orders(ORDERS)
    return create_app(console_settings)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as found:
        yield found


def _endpoint(store: Store, url: str, description: str = "") -> int:
    endpoint, _ = webhooks.create(store, None, url, None, description, LOOPBACK)
    return endpoint.id


def _row(page: str, number: int) -> str:
    return row(page, f"endpoint-{number}")


def _audit(store: Store, count: int) -> list[tuple[str, str]]:
    return [(e.action, e.detail) for e in store.audit_entries(count)]


def test_every_endpoint_shows_its_state_and_lag(signed_in: Visitor, store: Store) -> None:
    fine = _endpoint(store, "http://127.0.0.1:9/fine", "<b>shop</b>")
    failing = _endpoint(store, "http://127.0.0.1:9/failing")
    disabled = _endpoint(store, "http://127.0.0.1:9/<script>")
    store.import_orders([{"id": 50, "petId": 1, "quantity": 1},
                         {"id": 51, "petId": 1, "quantity": 1}])
    store.update_webhook_endpoint(failing, {"attempt": 2, "next_attempt_at": 4102444800.0})
    store.update_webhook_endpoint(disabled, {"enabled": False,
                                             "disabled_reason": "answered 500 10 times"})
    page = signed_in.get("/console/webhooks").text
    assert cell(_row(page, fine), "state") == "Enabled."
    assert cell(_row(page, failing), "state") == (
        "Failing: 2 failed attempts of one message; next attempt at <time datetime="
        '"2100-01-01T00:00:00Z" title="2100-01-01 00:00:00 UTC">2100-01-01 00:00 UTC</time>.')
    assert cell(_row(page, disabled), "state") == "Disabled: answered 500 10 times."
    assert [cell(_row(page, e), "lag") for e in (fine, failing, disabled)] == ["2"] * 3
    assert "&lt;b&gt;shop&lt;/b&gt;" in page and "<b>shop" not in page
    assert "/&lt;script&gt;" in page and "<script>" not in page


def test_a_test_message_reaches_a_receiver_and_its_delivery_is_listed(
        signed_in: Visitor, store: Store, receiver: Receiver) -> None:
    endpoint_id = _endpoint(store, receiver.url)
    signed_in.get(f"/console/webhooks/{endpoint_id}")
    sent = signed_in.post(f"/console/webhooks/{endpoint_id}/test")
    page = signed_in.follow(sent).text
    assert "The test message was delivered." in page
    assert receiver.wait_for(1)[0].message["type"] == "ping"
    row = page.split('<tbody>', 2)[1].split("</tr>", 1)[0]
    assert (cell(row, "type"), cell(row, "status"), cell(row, "error")) == (
        "ping", "204", "")
    action, detail = _audit(store, 1)[0]
    assert action == "webhook test sent" and detail.endswith(": delivered")


def test_a_broken_receiver_is_shown_with_its_error_and_its_answer_as_text(
        signed_in: Visitor, store: Store) -> None:
    answer = b"<script>alert(1)</script>" + b"x" * 300
    with receiving(answer=lambda _: (500, {}, answer)) as broken:
        endpoint_id = _endpoint(store, broken.url)
        signed_in.get(f"/console/webhooks/{endpoint_id}")
        sent = signed_in.post(f"/console/webhooks/{endpoint_id}/test")
    page = signed_in.follow(sent).text
    assert "The test message was not delivered" in page
    row = page.split('<tbody>', 2)[1].split("</tr>", 1)[0]
    assert (cell(row, "status"), cell(row, "error")) == ("500", "answered 500")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in row and "<script>alert" not in page
    assert "<details>" in row  # the rest of the answer, on asking


def test_an_endpoint_is_disabled_and_enabled_again(signed_in: Visitor, store: Store) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/")
    signed_in.get(f"/console/webhooks/{endpoint_id}")
    off = signed_in.post(f"/console/webhooks/{endpoint_id}/disable")
    page = signed_in.follow(off).text
    assert "The endpoint is disabled" in page
    assert "Disabled: disabled by its owner." in page
    on = signed_in.post(f"/console/webhooks/{endpoint_id}/enable")
    assert "The endpoint is enabled" in signed_in.follow(on).text
    assert store.get_webhook_endpoint(endpoint_id).enabled  # type: ignore[union-attr]
    assert _audit(store, 2) == [("webhook enabled", f"endpoint {endpoint_id}"),
                                ("webhook disabled", f"endpoint {endpoint_id}")]
    assert signed_in.post("/console/webhooks/99/disable").status_code == 404


def test_a_secret_is_rotated_and_shown_once(signed_in: Visitor, store: Store) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/")
    old = store.get_webhook_endpoint(endpoint_id).secret  # type: ignore[union-attr]
    signed_in.get(f"/console/webhooks/{endpoint_id}")
    rotate = f"/console/webhooks/{endpoint_id}/rotate"
    refused = signed_in.post(rotate, {"key": form_key(signed_in.page, rotate),
                                      "graceHours": "x"})
    assert refused.status_code == 400 and "whole number of hours" in refused.text
    sent = {"key": form_key(signed_in.page, rotate), "graceHours": "2"}
    rotated = signed_in.post(rotate, sent)
    assert rotated.status_code == 200 and rotated.headers["cache-control"] == "no-store"
    now = store.get_webhook_endpoint(endpoint_id)
    assert now is not None and now.previous_secret == old
    assert f'id="secret">{now.secret}</code>' in rotated.text
    assert now.secret not in signed_in.get(f"/console/webhooks/{endpoint_id}").text
    assert _audit(store, 1) == [("webhook secret rotated",
                                 f"endpoint {endpoint_id}, old secret for 2 h")]
    again = signed_in.post(rotate, sent)  # a double click, or a reload of the answer
    assert again.status_code == 200 and 'id="again"' in again.text
    renewed = store.get_webhook_endpoint(endpoint_id)
    assert renewed is not None and f'id="secret">{renewed.secret}</code>' in again.text
    assert renewed.secret != now.secret
    # A second rotation would have made the first's unseen secret the old one.
    assert (renewed.previous_secret, renewed.previous_until) == (old, now.previous_until)
    assert _audit(store, 1) == [("webhook secret renewed",
                                 f"endpoint {endpoint_id}: its form was sent again")]


def test_a_replay_goes_back_to_a_feed_cursor(signed_in: Visitor, store: Store) -> None:
    cursor = feed.latest(store)
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/")
    store.import_orders([{"id": 60, "petId": 1, "quantity": 1}])
    before = store.get_webhook_endpoint(endpoint_id)
    store.update_webhook_endpoint(endpoint_id, {"position": store.revision(),
                                                "order_id": 2**63 - 1, "attempt": 3})
    signed_in.get(f"/console/webhooks/{endpoint_id}")
    assert "0 orders or pets with a change not yet delivered" in signed_in.page
    replayed = signed_in.post(f"/console/webhooks/{endpoint_id}/replay", {"after": cursor})
    page = signed_in.follow(replayed).text
    assert "The endpoint goes on from the point asked" in page
    assert "1 order or pet with a change not yet delivered" in page and "Enabled." in page
    now = store.get_webhook_endpoint(endpoint_id)
    assert now is not None and (now.position, now.attempt) == (before.position, 0)  # type: ignore[union-attr]
    edited = signed_in.post(f"/console/webhooks/{endpoint_id}/replay", {"after": "nope"})
    assert edited.status_code == 400 and "not a feed cursor" in edited.text
    neither = signed_in.post(f"/console/webhooks/{endpoint_id}/replay", {})
    assert neither.status_code == 400
    assert "Give a time, or a point in the change feed" in neither.text
    assert _audit(store, 1)[0] == ("webhook replayed",
                                   f"endpoint {endpoint_id}, after a feed cursor")


def test_a_replay_from_a_time_sends_again_what_was_attempted_since(signed_in: Visitor,
                                                                   store: Store) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/")
    store.import_orders([{"id": 70, "petId": 1, "quantity": 1}])
    first = store.revision()
    store.import_orders([{"id": 71, "petId": 1, "quantity": 1}])
    for order_id, position in ((70, first), (71, store.revision())):
        store.record_webhook_attempt(
            endpoint_id=endpoint_id, webhook_id=f"msg_{order_id}_{position}",
            type="order.changed", attempt=1, status=204, duration_ms=3.0, response="",
            error=None, now=utc_now())
    store.update_webhook_endpoint(endpoint_id, {"position": store.revision(),
                                                "order_id": 2**63 - 1})
    signed_in.get(f"/console/webhooks/{endpoint_id}")
    later = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 3600))
    nothing = signed_in.post(f"/console/webhooks/{endpoint_id}/replay", {"since": later})
    assert "No message was sent to this endpoint since then" in signed_in.follow(
        nothing).text
    earlier = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 3600))
    replayed = signed_in.post(f"/console/webhooks/{endpoint_id}/replay", {"since": earlier})
    assert "2 orders or pets with a change not yet delivered" in signed_in.follow(replayed).text
    assert store.get_webhook_endpoint(endpoint_id).position == first - 1  # type: ignore[union-attr]
    bad = signed_in.post(f"/console/webhooks/{endpoint_id}/replay", {"since": "monday"})
    assert bad.status_code == 400 and "not a time" in bad.text


# adding, editing, deleting -------------------------------------------------------------

ADD = "/console/webhooks"
SECRET = re.compile(r'id="secret">(whsec_[A-Za-z0-9+/=]+)</code>')
CONFIRM = re.compile(r'<form class="action confirm" id="confirm" method="post" '
                     r'action="([^"]+)">', re.S)


def _endpoints(store: Store) -> list[WebhookEndpoint]:
    return webhooks.endpoints(store, None)


def _add(visitor: Visitor, url: str, types: list[str] | None = None,
         description: str = "", key: str | None = None) -> Any:
    """The list's form to add an endpoint, sent as filled (its key: the page's own)."""
    if key is None:
        visitor.get("/console/webhooks")
        key = form_key(visitor.page, ADD)
    return visitor.post(ADD, {"key": key, "url": url, "types": types or [],
                              "description": description})


def _field(page: str, form_id: str, name: str) -> str:
    """The value a form's input of this name shows (as text)."""
    form = page.split(f'id="{form_id}"', 1)[1].split("</form>", 1)[0]
    found = re.search(rf'<input name="{name}"[^>]* value="([^"]*)"', form)
    assert found, f"the form {form_id} has no {name}"
    return html.unescape(found.group(1))


def _ticked(page: str, form_id: str) -> list[str]:
    form = page.split(f'id="{form_id}"', 1)[1].split("</form>", 1)[0]
    return re.findall(r'name="types" value="([^"]+)" checked', form)


def test_an_endpoint_is_added_its_secret_shown_once_and_its_test_message_signed_by_it(
        signed_in: Visitor, store: Store, receiver: Receiver, storefront: str) -> None:
    added = _add(signed_in, receiver.url, ["order.shipped", "order.placed"],
                 "  Accounting <tool>  ")
    assert added.status_code == 200 and added.headers["cache-control"] == "no-store"
    (endpoint,) = _endpoints(store)
    assert (endpoint.url, endpoint.types, endpoint.description, endpoint.api_key_id) == (
        receiver.url, ("order.placed", "order.shipped"), "Accounting <tool>", None)
    found = SECRET.search(added.text)
    assert found and found.group(1) == endpoint.secret
    assert f"Endpoint {endpoint.id} is added" in added.text and 'id="again"' not in added.text
    # A second look shows it nowhere: not the endpoint's page, not the list.
    for path in (f"/console/webhooks/{endpoint.id}", "/console/webhooks"):
        page = signed_in.get(path).text
        assert endpoint.secret not in page and "whsec_" not in page, path
    listed = _row(signed_in.get("/console/webhooks").text, endpoint.id)
    assert cell(listed, "key") == "the shop"
    assert cell(listed, "description") == "Accounting &lt;tool&gt;"
    assert cell(listed, "types") == "order.placed, order.shipped"
    # The shop's own: no API key sees it in the API.
    answer = signed_in.client.get("/v2/webhook-endpoints",
                                  headers={"Authorization": f"Bearer {storefront}"})
    assert answer.status_code == 200 and answer.json() == {"endpoints": []}
    # The secret shown is the one that signs: its test message verifies with it.
    signed_in.get(f"/console/webhooks/{endpoint.id}")
    signed_in.follow(signed_in.post(f"/console/webhooks/{endpoint.id}/test"))
    receiver.wait_for(1)
    assert [m["type"] for m in receiver.verified(found.group(1))] == ["ping"]
    entries = store.audit_entries(10)
    assert ("webhook added", f"endpoint {endpoint.id} to 127.0.0.1, types order.placed, "
                             "order.shipped") in [(e.action, e.detail) for e in entries]
    assert not any("whsec_" in e.detail or "/hooks" in e.detail for e in entries)


def test_the_pets_types_are_offered_and_an_endpoint_takes_them(
        signed_in: Visitor, store: Store) -> None:
    """D39: the add form offers every type, the pets' with the orders'; an endpoint added
    with pet types lists them, and one with none says it gets every order's change."""
    page = signed_in.get("/console/webhooks").text
    offered = re.findall(r'name="types" value="([^"]+)"', page)
    assert offered == list(webhooks.TYPES) and "pet.out_of_stock" in offered
    assert "a pet's are sent only where ticked" in page
    added = _add(signed_in, "http://127.0.0.1:9/shop", ["pet.back_in_stock",
                                                        "pet.out_of_stock"])
    assert added.status_code == 200
    assert "the changes of the types pet.out_of_stock, pet.back_in_stock are sent" in added.text
    plain = _endpoint(store, "http://127.0.0.1:9/plain")
    listed = signed_in.get("/console/webhooks").text
    (endpoint, _) = _endpoints(store)
    assert cell(_row(listed, endpoint.id), "types") == "pet.out_of_stock, pet.back_in_stock"
    assert cell(_row(listed, plain), "types") == "every order&#39;s"


def test_an_add_sent_again_adds_one_endpoint_and_shows_the_secret_that_signs(
        signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/webhooks")
    key = form_key(signed_in.page, ADD)
    first = _add(signed_in, "http://127.0.0.1:9/a", key=key)
    again = _add(signed_in, "http://127.0.0.1:9/a", key=key)  # a reload of the answer
    (endpoint,) = _endpoints(store)
    assert again.status_code == 200 and 'id="again"' in again.text
    shown = SECRET.search(again.text)
    assert shown and shown.group(1) == endpoint.secret
    assert endpoint.secret not in first.text
    assert _audit(store, 1) == [("webhook secret renewed",
                                 f"endpoint {endpoint.id}: its form was sent again")]


def test_an_endpoint_is_edited(signed_in: Visitor, store: Store) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/old", "old note")
    page = signed_in.get(f"/console/webhooks/{endpoint_id}").text
    assert _field(page, "edit", "url") == "http://127.0.0.1:9/old"
    assert _field(page, "edit", "description") == "old note" and _ticked(page, "edit") == []
    edit = f"/console/webhooks/{endpoint_id}/edit"
    saved = signed_in.post(edit, {"url": "http://127.0.0.2:9/new",
                                  "types": ["order.cancelled"], "description": "new <note>"})
    page = signed_in.follow(saved).text
    assert "The endpoint is saved" in page
    assert 'id="url">http://127.0.0.2:9/new<' in page
    assert 'id="description">new &lt;note&gt;<' in page
    assert _ticked(page, "edit") == ["order.cancelled"]
    now = store.get_webhook_endpoint(endpoint_id)
    assert now is not None and (now.url, now.types, now.description) == (
        "http://127.0.0.2:9/new", ("order.cancelled",), "new <note>")
    assert _audit(store, 1) == [("webhook edited", f"endpoint {endpoint_id} to 127.0.0.2: "
                                                   "url, types, description changed")]
    # The same form again: nothing to change, nothing recorded.
    same = signed_in.post(edit, {"url": now.url, "types": ["order.cancelled"],
                                 "description": "new <note>"})
    assert "nothing changed" in signed_in.follow(same).text
    assert store.get_webhook_endpoint(endpoint_id) == now
    assert _audit(store, 1)[0][0] == "webhook edited"


REFUSED = [
    pytest.param({"url": "http://[::1]:9/hooks"},
                 "The webhook URL reaches ::1, an address that is not public", id="loopback"),
    pytest.param({"url": "http://169.254.169.254/latest/meta-data"},
                 "reaches 169.254.169.254, an address that is not public", id="link-local"),
    pytest.param({"url": "ftp://127.0.0.1/hooks"},
                 "The URL must begin with http:// or https://.", id="scheme"),
    pytest.param({"url": "http://user:pw@127.0.0.1:9/"},
                 "The URL must not carry a user name or password", id="userinfo"),
    pytest.param({"types": ["order.placed", "order.refunded"]},
                 "The types holds order.refunded, not a message type", id="unknown-type"),
    pytest.param({"description": "x" * (webhooks.DESCRIPTION_MAX + 1)},
                 "The description must be at most 500 characters long.", id="long"),
    pytest.param({"description": "\x1b[2Jpaid"},
                 "The description must not hold control characters", id="escape"),
    pytest.param({"description": "invoice\u202egnp.exe"},
                 "The description must not hold control characters", id="bidi"),
]


@pytest.mark.parametrize(("sent", "sentence"), REFUSED)
def test_an_add_the_api_would_refuse_is_refused_on_the_form_kept(
        signed_in: Visitor, store: Store, sent: dict[str, Any], sentence: str) -> None:
    form = {"url": "http://127.0.0.1:9/hooks", "types": ["order.placed"],
            "description": "note", **sent}
    refused = _add(signed_in, **form)
    assert refused.status_code == 400 and sentence in html.unescape(refused.text)
    assert "Nothing was added." in refused.text
    assert _endpoints(store) == []
    assert _field(refused.text, "add-webhook", "url") == form["url"]
    assert _field(refused.text, "add-webhook", "description") == form["description"]
    assert _ticked(refused.text, "add-webhook") == [
        t for t in webhooks.TYPES if t in form["types"]]
    assert str(escape(form["description"])) in refused.text  # as text, never markup
    action, detail = _audit(store, 1)[0]
    assert action == "add webhook refused" and sentence in detail
    # Corrected, the same form (its key let go by the refusal) adds it.
    fixed = _add(signed_in, "http://127.0.0.1:9/hooks",
                 key=form_key(refused.text, ADD))
    assert fixed.status_code == 200 and len(_endpoints(store)) == 1


@pytest.mark.parametrize(("sent", "sentence"), REFUSED)
def test_an_edit_the_api_would_refuse_is_refused_on_the_form_kept(
        signed_in: Visitor, store: Store, sent: dict[str, Any], sentence: str) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/hooks", "note")
    before = store.get_webhook_endpoint(endpoint_id)
    signed_in.get(f"/console/webhooks/{endpoint_id}")
    form = {"url": "http://127.0.0.1:9/hooks", "types": [], "description": "note", **sent}
    refused = signed_in.post(f"/console/webhooks/{endpoint_id}/edit", form)
    assert refused.status_code == 400 and sentence in html.unescape(refused.text)
    assert "Nothing was saved." in refused.text
    assert store.get_webhook_endpoint(endpoint_id) == before
    assert _field(refused.text, "edit", "url") == form["url"]
    assert _field(refused.text, "edit", "description") == form["description"]
    assert 'id="url">http://127.0.0.1:9/hooks<' in refused.text  # the endpoint as it is
    action, detail = _audit(store, 1)[0]
    assert action == "edit webhook refused" and detail.startswith(f"endpoint {endpoint_id}: ")


def test_a_nul_is_refused_before_any_page_reads_it(signed_in: Visitor, store: Store) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/hooks", "note")
    before = store.get_webhook_endpoint(endpoint_id)
    added = _add(signed_in, "http://127.0.0.1:9/a", description="a\x00b")
    assert added.status_code == 400 and "holds a NUL character" in added.text
    signed_in.get(f"/console/webhooks/{endpoint_id}")
    edited = signed_in.post(f"/console/webhooks/{endpoint_id}/edit",
                            {"url": "http://127.0.0.1:9/\x00", "description": "note"})
    assert edited.status_code == 400 and "holds a NUL character" in edited.text
    assert _endpoints(store) == [before]


def test_an_endpoint_is_deleted_only_from_its_confirmation(signed_in: Visitor,
                                                           store: Store) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/hooks", "accounting")
    page = signed_in.get(f"/console/webhooks/{endpoint_id}").text
    link = re.search(r'<a class="button" href="([^"]+)">Delete the endpoint…</a>', page)
    assert link and link.group(1) == f"/console/webhooks/{endpoint_id}/delete"
    assert f'<form class="action" method="post" action="{link.group(1)}"' not in page
    shown = signed_in.get(link.group(1))
    assert shown.status_code == 200
    assert f"<h1>Delete webhook endpoint {endpoint_id}?</h1>" in shown.text
    assert "deleted for good, with its log of deliveries" in shown.text
    assert "accounting" in shown.text and "the shop" in shown.text
    assert _endpoints(store) != []  # the page changed nothing
    action = CONFIRM.search(shown.text)
    assert action and action.group(1) == link.group(1)
    done = signed_in.post(action.group(1))
    assert done.headers["location"] == (
        f"/console/webhooks?done=deleted&webhook={endpoint_id}")
    assert f"Endpoint {endpoint_id} is deleted" in signed_in.follow(done).text
    assert store.get_webhook_endpoint(endpoint_id) is None
    assert _audit(store, 1) == [("webhook deleted", f"endpoint {endpoint_id}")]


def test_a_key_s_endpoint_says_its_key_loses_it(signed_in: Visitor, store: Store) -> None:
    (key,) = store.list_keys()
    endpoint, _ = webhooks.create(store, key.id, "http://127.0.0.1:9/", None, "", LOOPBACK)
    assert cell(_row(signed_in.get("/console/webhooks").text, endpoint.id),
                "key") == f"API key {key.id}"
    shown = signed_in.get(f"/console/webhooks/{endpoint.id}/delete").text
    assert f"API key {key.id}, which made it, no longer finds it." in shown


def test_a_stale_or_unknown_endpoint_is_a_404_page(signed_in: Visitor, store: Store) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/hooks")
    signed_in.get(f"/console/webhooks/{endpoint_id}/delete")  # its pages, open
    kept = signed_in.token()
    webhooks.delete(store, None, endpoint_id)  # elsewhere: the CLI, another owner
    for method, path, form in (
            ("post", f"/console/webhooks/{endpoint_id}/delete", {}),
            ("post", f"/console/webhooks/{endpoint_id}/edit",
             {"url": "http://127.0.0.1:9/x", "description": ""}),
            ("get", f"/console/webhooks/{endpoint_id}/delete", {}),
            ("get", f"/console/webhooks/{endpoint_id}", {}),
            ("post", "/console/webhooks/99/edit", {"url": "ftp://x"}),
            ("get", "/console/webhooks/x/delete", {}),
            ("post", "/console/webhooks/9223372036854775808/delete", {})):
        answer = (signed_in.post(path, form, token=kept) if method == "post"
                  else signed_in.get(path))
        assert answer.status_code == 404, (method, path)
        assert "No such page" in answer.text and "text/html" in answer.headers[
            "content-type"]
    assert [action for action, _ in _audit(store, 20) if "webhook" in action] == []


def test_the_forms_need_the_page_s_token(signed_in: Visitor, store: Store) -> None:
    endpoint_id = _endpoint(store, "http://127.0.0.1:9/hooks", "note")
    before = store.get_webhook_endpoint(endpoint_id)
    signed_in.get("/console/webhooks")
    key = form_key(signed_in.page, ADD)
    for path, form in ((ADD, {"key": key, "url": "http://127.0.0.1:9/a"}),
                       (f"/console/webhooks/{endpoint_id}/edit",
                        {"url": "http://127.0.0.1:9/b", "description": "changed"}),
                       (f"/console/webhooks/{endpoint_id}/delete", {})):
        for token in ("", "not-the-token"):
            refused = signed_in.post(path, form, token=token)
            assert refused.status_code == 403, (path, token)
            assert "did not come from this console" in refused.text
    assert _endpoints(store) == [before]
