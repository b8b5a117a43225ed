"""The webhook endpoints of v2 2.3.0 over HTTP, in process (D28): each belongs to
the key that made it, every refusal is an Error with a code the YAML lists, and a receiver
on loopback gets each change signed. Every response is validated against the document."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook

from app.core.config import Settings
from app.core.storage import Store
from app.web import PetstoreApp, create_app
from app.web.routing import operations
from tests.receivers import Receiver, receiving
from tests.support import assert_error, make_key, text_id
from tests.web.test_fast_answers import requests_for
from tests.web.test_key_lifecycle import read_key

ENDPOINTS = "/v2/webhook-endpoints"


@pytest.fixture
def loopback(settings: Settings) -> Settings:
    return settings.replace(webhook_allowed_networks="127.0.0.0/8", webhook_timeout=2.0,
                            webhook_lease_seconds=3.0)


@pytest.fixture
def app(loopback: Settings, store: Store) -> PetstoreApp:
    store.import_orders([{"id": 1, "petId": 1, "quantity": 1}])
    return create_app(loopback)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with receiving() as receiver:
        yield receiver


@pytest.fixture
def other(store: Store) -> dict[str, str]:
    """Another key's header (made before the app starts, as keys are looked up then)."""
    return {"Authorization": f"Bearer {make_key(store, name='other')}"}


@pytest.fixture
def reader(store: Store) -> dict[str, str]:
    return {"Authorization": f"Bearer {read_key(store)}"}


def _create(client: Any, auth: dict[str, str], url: str, **body: Any) -> Any:
    return client.post(ENDPOINTS, json={"url": url, **body}, headers=auth)


def test_an_endpoint_is_created_with_its_secret_once_then_read_changed_and_deleted(
        client: Any, auth: dict[str, str], receiver: Receiver) -> None:
    created = _create(client, auth, receiver.url, types=["order.shipped"], description="wh")
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["secret"].startswith("whsec_")
    assert created.headers["location"] == f"{ENDPOINTS}/{body['id']}"
    assert body["url"] == receiver.url and body["types"] == ["order.shipped"]
    assert body["enabled"] is True
    one = client.get(created.headers["location"], headers=auth)
    assert one.status_code == 200 and "secret" not in one.json()
    listed = client.get(ENDPOINTS, headers=auth).json()["endpoints"]
    assert [e["id"] for e in listed] == [body["id"]]
    changed = client.patch(created.headers["location"], json={"types": [], "enabled": False},
                           headers=auth)
    assert changed.status_code == 200, changed.text
    assert changed.json()["enabled"] is False and changed.json()["types"] == []
    assert changed.json()["disabledReason"] == "disabled by its owner"
    again = client.patch(created.headers["location"], json={"enabled": True}, headers=auth)
    assert again.json()["enabled"] is True and "disabledReason" not in again.json()
    assert client.delete(f"{ENDPOINTS}/{body['id']}", headers=auth).status_code == 204
    assert_error(client.get(created.headers["location"], headers=auth), 404,
                 "webhook_endpoint_not_found")


def test_a_key_never_sees_another_keys_endpoints(other: dict[str, str], client: Any,
                                                  auth: dict[str, str],
                                                  receiver: Receiver) -> None:
    mine = _create(client, auth, receiver.url).json()["id"]
    assert client.get(ENDPOINTS, headers=other).json() == {"endpoints": []}
    # Walked from the document: every operation on one endpoint, its valid request.
    walked = [operation for operation in operations()
              if operation.template.startswith(f"{ENDPOINTS}/{{endpointId}}")]
    assert {"GET", "PATCH", "DELETE", "POST"} <= {operation.method for operation in walked}
    for operation in walked:
        method, path, headers, body, _ = next(requests_for(operation, mine))
        answer = client.request(method, path, headers=[*headers, *other.items()],
                                content=body)
        assert_error(answer, 404, "webhook_endpoint_not_found")


def test_a_read_key_gets_403_on_every_webhook_operation(reader: dict[str, str],
                                                        client: Any, auth: dict[str, str],
                                                        receiver: Receiver) -> None:
    endpoint = _create(client, auth, receiver.url).json()["id"]
    before = client.get(f"{ENDPOINTS}/{endpoint}", headers=auth).json()
    walked = [operation for operation in operations()
              if "webhooks" in operation.definition.get("tags", ())]
    assert len(walked) >= 9, "the document's webhook operations"
    for operation in walked:
        method, path, headers, body, _ = next(requests_for(operation, endpoint))  # valid
        answer = client.request(method, path, headers=[*headers, *reader.items()],
                                content=body)
        assert_error(answer, 403, "insufficient_scope")
        assert answer.headers["www-authenticate"] == 'Bearer error="insufficient_scope"'
    # Nothing changed: the endpoint is as it was made, with no attempt.
    assert client.get(f"{ENDPOINTS}/{endpoint}", headers=auth).json() == before
    assert client.get(f"{ENDPOINTS}/{endpoint}/deliveries", headers=auth).json()[
        "deliveries"] == []
    assert [e["id"] for e in client.get(ENDPOINTS, headers=auth).json()["endpoints"]] == [
        endpoint]


@pytest.mark.parametrize(("url", "names"), [
    ("hooks.example.com/in", "url"), ("ftp://example.com/", "url"),
    ("http://user:secret@127.0.0.1/", "userinfo"), ("http://127.0.0.1/" + "a" * 2040, "url"),
], ids=["no-scheme", "ftp", "userinfo", "too-long"])
def test_a_malformed_url_is_400_naming_it(client: Any, auth: dict[str, str], url: str,
                                          names: str) -> None:
    body = assert_error(_create(client, auth, url), 400, "invalid_request")
    assert names in body["message"]


def test_an_unknown_type_or_member_is_400(client: Any, auth: dict[str, str]) -> None:
    body = assert_error(_create(client, auth, "http://127.0.0.1/", types=["order.deleted"]),
                        400, "invalid_request")
    assert "order.deleted" in body["message"] or "types" in body["message"]
    assert_error(_create(client, auth, "http://127.0.0.1/", secret="mine"), 400,
                 "invalid_request")


@pytest.mark.parametrize("text", ["\u202ewarehouse", "ware\x1b[2Jhouse", "a\nb", "\x00",
                                  "\u2067x\u2069"], ids=text_id)
def test_a_description_with_control_or_direction_characters_is_400_naming_it(
        client: Any, auth: dict[str, str], text: str) -> None:
    # A description is a name people read (D37).
    refused = assert_error(_create(client, auth, "http://127.0.0.1/", description=text), 400,
                           "invalid_request", "description")
    assert refused["message"].startswith("description must not hold control characters")
    assert client.get(ENDPOINTS, headers=auth).json() == {"endpoints": []}
    made = _create(client, auth, "http://127.0.0.1/", description="The warehouse \u2014 north")
    assert made.status_code == 201, made.text
    location = made.headers["location"]
    assert_error(client.patch(location, json={"description": text}, headers=auth), 400,
                 "invalid_request", "description")
    assert client.get(location, headers=auth).json()["description"] == (
        "The warehouse \u2014 north")


def test_half_a_surrogate_pair_in_a_description_is_400(client: Any,
                                                      auth: dict[str, str]) -> None:
    sent = client.post(ENDPOINTS, content=b'{"url": "http://127.0.0.1/", "description": '
                       b'"\\udfff"}', headers={**auth, "Content-Type": "application/json"})
    assert_error(sent, 400, "invalid_request")
    assert client.get(ENDPOINTS, headers=auth).json() == {"endpoints": []}


def test_a_key_has_at_most_16_endpoints(client: Any, auth: dict[str, str]) -> None:
    for n in range(16):
        assert _create(client, auth, f"http://127.0.0.1:9/{n}").status_code == 201
    assert_error(_create(client, auth, "http://127.0.0.1:9/17"), 409,
                 "webhook_endpoint_limit_reached")


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://[::1]/", "http://169.254.169.254/", "http://10.0.0.1/",
    "http://[::ffff:127.0.0.1]/", "http://0/", "http://2130706433/", "http://localhost/",
])
def test_without_allowed_networks_every_inner_address_is_422(
        settings: Settings, store: Store, url: str) -> None:
    app = create_app(settings)
    secret = make_key(store)
    with app.test_client() as client:
        answer = _create(client, {"Authorization": f"Bearer {secret}"}, url)
    assert_error(answer, 422, "webhook_url_not_allowed", param="url")


def test_changes_reach_the_receiver_signed_in_order_and_the_deliveries_are_listed(
        client: Any, auth: dict[str, str], receiver: Receiver) -> None:
    created = _create(client, auth, receiver.url).json()
    placed = client.post("/v2/store/orders", json={"petId": 3, "quantity": 2},
                         headers={**auth, "Idempotency-Key": "k1"}).json()
    client.post(f"/v2/store/orders/{placed['id']}/ship", headers=auth)
    got = receiver.wait_until(lambda got: any(r.message["type"] == "order.shipped"
                                              for r in got))
    messages = [Webhook(created["secret"]).verify(r.body, r.headers) for r in got]
    assert [(m["type"], m["data"]["id"], m["data"]["status"]) for m in messages] in (
        [("order.placed", placed["id"], "pending"), ("order.shipped", placed["id"], "shipped")],
        # The deliverer read the order after it shipped: one message, as it is now (D28).
        [("order.shipped", placed["id"], "shipped")])
    assert client.post(f"{ENDPOINTS}/{created['id']}/test", headers=auth).status_code == 200
    page = client.get(f"{ENDPOINTS}/{created['id']}/deliveries?limit=1", headers=auth).json()
    assert page["deliveries"][0]["status"] == 204 and page["next"]
    rest = client.get(f"{ENDPOINTS}/{created['id']}/deliveries",
                      params={"limit": 10, "cursor": page["next"]}, headers=auth).json()
    assert rest["next"] is None
    assert page["deliveries"][0]["id"] > rest["deliveries"][0]["id"]


def test_a_ping_is_sent_now_and_verifies_and_a_rotation_signs_with_both(
        client: Any, auth: dict[str, str], receiver: Receiver) -> None:
    created = _create(client, auth, receiver.url).json()
    rotated = client.post(f"{ENDPOINTS}/{created['id']}/rotate-secret",
                          json={"graceSeconds": 60}, headers=auth)
    assert rotated.status_code == 200, rotated.text
    assert rotated.json()["secret"] != created["secret"]
    assert "previousSecretUntil" in rotated.json()
    tested = client.post(f"{ENDPOINTS}/{created['id']}/test", headers=auth)
    assert tested.status_code == 200, tested.text
    assert tested.json()["delivered"] is True and tested.json()["status"] == 204
    ping = receiver.wait_for(1)[0]
    for secret in (created["secret"], rotated.json()["secret"]):
        assert Webhook(secret).verify(ping.body, ping.headers)["type"] == "ping"


def test_a_replay_with_an_edited_cursor_is_400_and_without_one_starts_over(
        client: Any, auth: dict[str, str], receiver: Receiver) -> None:
    created = _create(client, auth, receiver.url).json()
    replay = f"{ENDPOINTS}/{created['id']}/replay"
    body = assert_error(client.post(replay, json={"after": "bm90IGEgY3Vyc29y"}, headers=auth),
                        400, "invalid_request")
    assert "after" in body["message"]
    assert client.post(replay, json={}, headers=auth).status_code == 202
    first = receiver.wait_for(1)[0].message
    assert first["data"]["id"] == 1 and first["type"] == "order.changed"  # an import


def test_an_endpoint_chooses_pet_types_and_replays_from_a_cursor_of_the_pets_feed(
        client: Any, auth: dict[str, str], receiver: Receiver, store: Store) -> None:
    """D39: the pets' types are chosen as the orders' are (all twelve at once at most), and
    a replay takes a cursor of either feed: from the pets' one, the pets changed after it
    come again, with the same webhook-ids."""
    every = ["order.placed", "order.shipped", "order.completed", "order.cancelled",
             "order.changed", "pet.created", "pet.updated", "pet.withdrawn", "pet.restored",
             "pet.out_of_stock", "pet.back_in_stock", "pet.changed"]
    created = _create(client, auth, receiver.url, types=list(reversed(every)))
    assert created.status_code == 201, created.text
    assert created.json()["types"] == every
    assert_error(_create(client, auth, receiver.url, types=[*every, "pet.created"]), 400,
                 "invalid_request")
    assert_error(_create(client, auth, receiver.url, types=["pet.deleted"]), 400,
                 "invalid_request")

    store.import_pets([{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}])
    got = receiver.wait_until(lambda got: len(got) == 2)
    assert [(r.message["type"], r.message["data"]["id"]) for r in got] == [
        ("pet.created", 1), ("pet.created", 2)]
    page = client.get("/v2/pet-changes", params={"limit": 1}, headers=auth).json()
    assert [p["id"] for p in page["pets"]] == [1]
    replay = f"{ENDPOINTS}/{created.json()['id']}/replay"
    assert client.post(replay, json={"after": page["next"]}, headers=auth).status_code == 202
    again = receiver.wait_until(lambda got: len(got) == 3)[-1]
    assert (again.message["type"], again.message["data"]["id"]) == ("pet.created", 2)
    assert again.id == got[1].id  # the same change: the same webhook-id


def test_metrics_show_attempts_by_outcome_and_endpoints_by_state(
        loopback: Settings, store: Store, receiver: Receiver) -> None:
    from tests.web.test_metrics import sample

    secret = make_key(store)
    app = create_app(loopback.replace(metrics_allow="*"))
    auth = {"Authorization": f"Bearer {secret}"}
    with app.test_client() as client:
        before = client.get("/metrics").text
        created = _create(client, auth, receiver.url).json()
        _create(client, auth, "http://127.0.0.1:9/")
        client.patch(f"{ENDPOINTS}/{created['id']}", json={"enabled": False}, headers=auth)
        client.patch(f"{ENDPOINTS}/{created['id']}", json={"enabled": True}, headers=auth)
        store.import_orders([{"id": 1, "petId": 1, "quantity": 1}])
        receiver.wait_for(1)
        text = ""
        for _ in range(100):  # the refused one's attempt is recorded after its failure
            text = client.get("/metrics").text
            if sample(text, "petstore_webhook_endpoints", state="retrying") == 1:
                break
            time.sleep(0.05)
    delivered = (sample(text, "petstore_webhook_attempts_total", outcome="delivered")
                 - sample(before, "petstore_webhook_attempts_total", outcome="delivered"))
    assert delivered >= 1
    assert sample(text, "petstore_webhook_attempts_total", outcome="no_answer") >= 1
    assert sample(text, "petstore_webhook_endpoints", state="delivering") == 1
    assert sample(text, "petstore_webhook_endpoints", state="retrying") == 1
    assert f'petstore_webhook_lag_seconds{{endpoint="{created["id"]}"}}' in text


def test_a_body_that_is_not_json_is_400(client: Any, auth: dict[str, str],
                                        receiver: Receiver) -> None:
    created = _create(client, auth, receiver.url).json()
    for method, path in (("post", ENDPOINTS), ("patch", f"{ENDPOINTS}/{created['id']}"),
                         ("post", f"{ENDPOINTS}/{created['id']}/replay")):
        answer = getattr(client, method)(path, content=b"\xc2\xadl\xffug\xfe",
                                         headers={**auth, "Content-Type": "application/json"})
        assert_error(answer, 400, "invalid_request")
