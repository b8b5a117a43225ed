"""The webhooks pages (D35 over D28), as a signed-in visitor sees them: every endpoint with
its state (enabled, failing with its next attempt, disabled with its reason) and its lag;
an endpoint's deliveries newest first; a test message sent to a real receiver on
loopback; enabling, disabling, rotating the secret, replaying from a time or a feed
cursor; each in the audit log, and every text a key's owner or a receiver wrote shown as
text. The deliverer is off here: what it does is tests/web's and the browser test's."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from app.core import feed, webhooks
from app.core.config import Settings
from app.core.orders import utc_now
from app.core.storage import Store
from tests.console.conftest import Visitor, cell, form_key, row
from tests.receivers import Receiver, receiving

LOOPBACK = webhooks.networks("127.0.0.0/8")


@pytest.fixture
def console_settings(console_settings: Settings) -> Settings:
    return console_settings.replace(webhook_allowed_networks="127.0.0.0/8",
                            webhook_timeout=2.0, webhooks_enabled=False)


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
    assert "0 orders with a change not yet delivered" in signed_in.page
    replayed = signed_in.post(f"/console/webhooks/{endpoint_id}/replay", {"after": cursor})
    page = signed_in.follow(replayed).text
    assert "The endpoint goes on from the point asked" in page
    assert "1 order with a change not yet delivered" in page and "Enabled." in page
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
    assert "2 orders with a change not yet delivered" in signed_in.follow(replayed).text
    assert store.get_webhook_endpoint(endpoint_id).position == first - 1  # type: ignore[union-attr]
    bad = signed_in.post(f"/console/webhooks/{endpoint_id}/replay", {"since": "monday"})
    assert bad.status_code == 400 and "not a time" in bad.text
