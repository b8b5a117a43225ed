"""Writing through v2 over HTTP, in process (D22-D25): placing orders under an
Idempotency-Key, shipping and completing them, strong ETags and If-Match, and an Error for
every refusal. Every response is validated against openapi/petstore-v2.yaml, and carries
the rate-limit headers."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from app.core.storage import Store
from app.web.routing import operations
from tests.support import assert_error, wrap_store
from tests.web.test_fast_answers import requests_for
from tests.web.test_key_lifecycle import read_key

LIST = "/v2/store/orders"
RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")
NEW = {"petId": 7, "quantity": 2, "shipDate": "2026-12-01T11:00:00+01:00"}


def place(client: Any, auth: dict[str, str], body: Any = None, key: str | None = "k-1",
          **headers: str) -> Any:
    sent = {**auth, **({"Idempotency-Key": key} if key is not None else {}), **headers}
    return client.post(LIST, json=NEW if body is None else body, headers=sent)


def test_a_new_order_sent_without_a_content_type_is_read_as_json(
        client: Any, auth: dict[str, str]) -> None:
    """Connexion validates a body without Content-Type as the document's application/json;
    the order is placed from it (it was a 500 while Flask handed the body over as bytes)."""
    placed = client.post(LIST, content=b'{"petId": 7, "quantity": 2}',
                         headers={**auth, "Idempotency-Key": "bare"})
    assert placed.status_code == 201, placed.text
    assert placed.json()["petId"] == 7
    assert placed.headers["location"] == f"{LIST}/{placed.json()['id']}"


def test_placing_an_order_answers_201_with_its_location_and_etag(
        client: Any, auth: dict[str, str]) -> None:
    placed = place(client, auth)
    assert placed.status_code == 201, placed.text
    order = placed.json()
    assert order == {"id": 5, "petId": 7, "quantity": 2, "shipDate": "2026-12-01T10:00:00Z",
                     "complete": False, "status": "pending"}
    assert placed.headers["location"] == f"{LIST}/5"
    assert placed.headers["etag"] == '"1"'
    assert "idempotent-replayed" not in placed.headers
    for header in RATE_HEADERS:
        assert header in placed.headers
    fetched = client.get(placed.headers["location"], headers=auth)
    assert fetched.json() == order and fetched.headers["etag"] == '"1"'


def test_the_same_key_and_body_replay_the_first_answer_and_place_nothing(
        client: Any, auth: dict[str, str], store: Store) -> None:
    first = place(client, auth)
    client.post(f"{LIST}/5/ship", headers=auth)  # the order moves on
    # The same body, its members in another order: the same request (D23).
    again = place(client, auth, {"shipDate": NEW["shipDate"], "quantity": 2, "petId": 7})
    assert again.status_code == 201
    assert again.content == first.content
    assert again.headers["location"] == first.headers["location"]
    assert again.headers["etag"] == first.headers["etag"] == '"1"'
    assert again.headers["idempotent-replayed"] == "true"
    assert store.count_orders() == 5


def test_the_same_key_with_another_body_is_422_and_places_nothing(
        client: Any, auth: dict[str, str], store: Store) -> None:
    place(client, auth)
    reused = place(client, auth, {**NEW, "quantity": 3})
    assert_error(reused, 422, "idempotency_key_reused")
    for header in RATE_HEADERS:
        assert header in reused.headers
    assert store.count_orders() == 5


NOT_ASCII = ("Idempotency-Key must hold only printable ASCII characters (letters, digits, "
             "punctuation and spaces), 1 to 255 of them.")


@pytest.mark.parametrize(("given", "says"), [
    (None, "Idempotency-Key is required: send a key of your own making with each new order, "
           "such as a UUID (1 to 255 printable ASCII characters), so that a retry with the "
           "same key places the order only once."),
    (b"", "Idempotency-Key must not be empty: it takes 1 to 255 printable ASCII characters."),
    (b'"', None),
    (b"caf\xc3\xa9", NOT_ASCII),
    (b"a\tb", NOT_ASCII),
    (b"k" * 256, "Idempotency-Key is too long: it may hold at most 255 printable ASCII "
                 "characters."),
])
def test_a_missing_or_malformed_idempotency_key_is_400_saying_which_rule(
        client: Any, auth: dict[str, str], store: Store, given: bytes | None,
        says: str | None) -> None:
    """Each rule the header breaks has its own sentence, which tells the client how to
    make a key that will do; nothing is placed."""
    before = store.count_orders()
    headers = {} if given is None else {"Idempotency-Key": given}
    response = client.post(LIST, json=NEW, headers={**auth, **headers})
    if says is None:  # a lone quote is a key of one character, not a quoted empty one
        assert response.status_code == 201
        return
    assert assert_error(response, 400, "invalid_request")["message"] == says
    assert store.count_orders() == before


@pytest.mark.parametrize(("body", "named"), [
    ({**NEW, "id": 9}, "id"), ({**NEW, "status": "shipped"}, "status"),
    ({**NEW, "complete": True}, "complete"), ({"quantity": 1}, "petId"),
    ({**NEW, "quantity": 0}, "quantity"), ({**NEW, "quantity": 10001}, "quantity"),
    ({**NEW, "petId": 0}, "petId"), ({**NEW, "shipDate": "2026-12-01T10:00:00"}, "shipDate"),
    ([NEW], None), ("order", None),
])
def test_a_body_that_is_not_a_new_order_is_400_naming_what_is_wrong(
        client: Any, auth: dict[str, str], store: Store, body: Any, named: str | None) -> None:
    response = place(client, auth, body)
    message = assert_error(response, 400, "invalid_request", named)["message"]
    if named is None:  # the body as a whole
        assert message == "The request body must be a JSON object."
        assert "param" not in response.json()
    else:
        assert message.startswith(f"{named} ")
    # Nothing was placed and the key was kept for nothing: corrected, it places.
    assert place(client, auth).status_code == 201
    assert store.count_orders() == 5


def test_a_body_that_is_not_json_is_415_or_400(client: Any, auth: dict[str, str]) -> None:
    sent = {**auth, "Idempotency-Key": "k-1"}
    assert_error(client.post(LIST, content=b"petId=7", headers={
        **sent, "Content-Type": "application/x-www-form-urlencoded"}), 415,
        "unsupported_media_type")
    assert_error(client.post(LIST, content=b"{", headers={
        **sent, "Content-Type": "application/json"}), 400, "invalid_request")
    assert_error(client.post(LIST, content=b'{"petId": "\xff"}', headers={
        **sent, "Content-Type": "application/json"}), 400, "invalid_request")


def test_a_body_over_16_kib_is_413_whether_announced_or_streamed(
        client: Any, auth: dict[str, str]) -> None:
    big = b'{"petId": 7, "quantity": 1, "x": "' + b"a" * 17_000 + b'"}'
    sent = {**auth, "Idempotency-Key": "k-1", "Content-Type": "application/json"}
    response = client.post(LIST, content=big, headers=sent)
    assert_error(response, 413, "payload_too_large")
    for header in RATE_HEADERS:
        assert header in response.headers

    def chunks() -> Any:  # no Content-Length: sent chunked
        for start in range(0, len(big), 4096):
            yield big[start:start + 4096]

    assert_error(client.post(LIST, content=chunks(), headers=sent), 413, "payload_too_large")


def test_a_body_sent_chunked_is_read_as_one_with_its_length(
        client: Any, auth: dict[str, str]) -> None:
    sent = {**auth, "Idempotency-Key": "k-chunked", "Content-Type": "application/json"}

    def chunks() -> Any:  # no Content-Length: sent chunked
        yield b'{"petId": 7, '
        yield b'"quantity": 2}'

    placed = client.post(LIST, content=chunks(), headers=sent)
    assert placed.status_code == 201, placed.text
    assert placed.json()["petId"] == 7 and placed.json()["quantity"] == 2
    shipped = client.post(f"{LIST}/{placed.json()['id']}/ship", headers=auth, content=iter(
        [b'{"shipDate": ', b'"2026-12-01T10:00:00Z"}']))
    assert shipped.status_code == 200 and shipped.json()["shipDate"] == "2026-12-01T10:00:00Z"


def test_a_key_being_placed_is_409_in_use_with_retry_after(
        app: Any, client: Any, auth: dict[str, str]) -> None:
    entered, release = threading.Event(), threading.Event()

    class Slow:
        def __init__(self, inner: Store) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        def place_order(self, *args: Any, **kwargs: Any) -> Any:
            entered.set()
            release.wait(10)
            return self.inner.place_order(*args, **kwargs)

    wrap_store(app, Slow)
    first: list[Any] = []
    thread = threading.Thread(target=lambda: first.append(place(client, auth)))
    thread.start()
    try:
        assert entered.wait(10)
        busy = place(client, auth)
        assert_error(busy, 409, "idempotency_key_in_use")
        assert int(busy.headers["retry-after"]) >= 1
    finally:
        release.set()
        thread.join(10)
    assert first[0].status_code == 201
    assert place(client, auth).headers["idempotent-replayed"] == "true"


def test_a_read_key_may_not_call_any_operation_that_needs_write(
        client: Any, store: Store) -> None:
    """Walked from the documents: a valid request to every operation marked x-scope: write
    (placing, shipping, completing and cancelling orders among them) is 403
    insufficient_scope for a read key, and changes nothing."""
    auth = {"Authorization": f"Bearer {read_key(store)}"}
    writes = [operation for operation in operations() if operation.writes]
    assert {"POST", "DELETE"} <= {operation.method for operation in writes}
    before = client.get(f"{LIST}?limit=100", headers=auth).json()
    for operation in writes:
        method, path, headers, body, _ = next(requests_for(operation, 1))  # the valid one
        response = client.request(method, path, headers=[*headers, *auth.items()],
                                  content=body)
        assert_error(response, 403, "insufficient_scope")
    assert client.get(f"{LIST}?limit=100", headers=auth).json() == before


# ship, complete, If-Match --------------------------------------------------------------


def test_ship_moves_a_pending_order_once_and_refuses_a_cancelled_one(
        client: Any, auth: dict[str, str]) -> None:
    shipped = client.post(f"{LIST}/1/ship", json={"shipDate": "2026-11-30T10:00:00Z"},
                          headers=auth)
    assert shipped.status_code == 200, shipped.text
    assert shipped.json()["status"] == "shipped"
    assert shipped.json()["shipDate"] == "2026-11-30T10:00:00Z"
    assert shipped.headers["etag"] == '"2"'
    again = client.post(f"{LIST}/1/ship", headers=auth)  # a retry: unchanged
    assert again.status_code == 200 and again.json() == shipped.json()
    assert again.headers["etag"] == '"2"'
    body = assert_error(client.post(f"{LIST}/3/ship", headers=auth), 409, "order_cancelled")
    assert "cannot be shipped" in body["message"]
    assert_error(client.post(f"{LIST}/99/ship", headers=auth), 404, "order_not_found")
    assert_error(client.post(f"{LIST}/abc/ship", headers=auth), 400, "invalid_request")
    assert "shipDate" in assert_error(
        client.post(f"{LIST}/4/ship", json={"shipDate": "soon"}, headers=auth),
        400, "invalid_request")["message"]


# A date-time the document's format takes but UTC cannot hold: an hour before the year 1.
BEFORE_YEAR_ONE = "0001-01-01T00:00:00+01:00"


def test_a_ship_date_before_the_year_1_in_utc_is_400_naming_it_and_changes_nothing(
        client: Any, auth: dict[str, str], store: Store) -> None:
    """Placing and shipping alike: the sentence of docs/errors.md, with param shipDate."""
    says = ("shipDate must be a date-time with an offset between the years 1 and 9999 in "
            "UTC, such as 2026-12-01T10:00:00Z.")
    for refused in (place(client, auth, {**NEW, "shipDate": BEFORE_YEAR_ONE}),
                    client.post(f"{LIST}/1/ship", json={"shipDate": BEFORE_YEAR_ONE},
                                headers=auth)):
        assert assert_error(refused, 400, "invalid_request", "shipDate")["message"] == says
        for header in RATE_HEADERS:
            assert header in refused.headers
    assert store.count_orders() == 4
    assert client.get(f"{LIST}/1", headers=auth).json()["status"] == "pending"


def test_ship_without_a_date_ships_now(client: Any, auth: dict[str, str]) -> None:
    shipped = client.post(f"{LIST}/4/ship", headers=auth)
    assert shipped.status_code == 200 and shipped.json()["shipDate"].startswith("20")


def test_complete_moves_a_shipped_order_and_refuses_pending_and_cancelled_ones(
        client: Any, auth: dict[str, str]) -> None:
    assert_error(client.post(f"{LIST}/1/complete", headers=auth), 409, "order_not_shipped")
    client.post(f"{LIST}/1/ship", headers=auth)
    done = client.post(f"{LIST}/1/complete", headers=auth)
    assert done.status_code == 200 and done.json()["complete"] is True
    assert done.headers["etag"] == '"3"'
    again = client.post(f"{LIST}/1/complete", headers=auth)  # a retry: unchanged
    assert again.json() == done.json() and again.headers["etag"] == '"3"'
    assert_error(client.post(f"{LIST}/3/complete", headers=auth), 409, "order_cancelled")
    assert_error(client.post(f"{LIST}/99/complete", headers=auth), 404, "order_not_found")


@pytest.mark.parametrize(("method", "path", "after"), [
    ("DELETE", f"{LIST}/1", "cancelled"), ("POST", f"{LIST}/1/ship", "shipped"),
    ("POST", f"{LIST}/2/complete", "shipped")])  # order 2 is shipped and complete already
def test_if_match_with_an_old_etag_is_412_and_changes_nothing(
        client: Any, auth: dict[str, str], method: str, path: str, after: str) -> None:
    order_url = path.removesuffix("/ship").removesuffix("/complete")
    before = client.get(order_url, headers=auth)
    current = before.headers["etag"]
    for stale in ('"7"', 'W/"1"', '"7", "8"'):
        refused = client.request(method, path, headers={**auth, "If-Match": stale})
        assert_error(refused, 412, "precondition_failed")
        assert refused.headers["etag"] == current
        assert client.get(order_url, headers=auth).json() == before.json()
    moved = client.request(method, path, headers={**auth, "If-Match": f'"9", {current}'})
    assert moved.status_code in (200, 204), moved.text
    assert client.get(order_url, headers=auth).json()["status"] == after


def test_if_match_on_an_unknown_order_is_404(client: Any, auth: dict[str, str]) -> None:
    assert_error(client.delete(f"{LIST}/99", headers={**auth, "If-Match": '"1"'}), 404,
                 "order_not_found")


def test_a_single_order_has_a_strong_etag_that_every_change_raises(
        client: Any, auth: dict[str, str], store: Store) -> None:
    first = client.get(f"{LIST}/2", headers=auth)
    assert first.headers["etag"] == '"1"'
    assert client.get(f"{LIST}/2", headers={**auth, "If-None-Match": '"1"'}).status_code == 304
    store.cancel_order(1, None, "2026-11-24T10:00:00Z")  # unrelated: order 2 stays as it was
    assert client.get(f"{LIST}/2", headers={**auth, "If-None-Match": '"1"'}).status_code == 304
    store.import_orders([{"id": 2, "status": "shipped", "complete": False}], upsert=True)
    # ... a change from outside the API (the CLI, another host) raises its version.
    changed = client.get(f"{LIST}/2", headers={**auth, "If-None-Match": '"1"'})
    assert changed.status_code == 200 and changed.headers["etag"] == '"2"'


def test_entity_tags_are_compared_as_rfc_9110_says(client: Any,
                                                  auth: dict[str, str]) -> None:
    # If-None-Match compares weakly (a weak tag of the version matches its strong one),
    # If-Match strongly (it does not); a comma inside a quoted tag is part of the tag.
    order = f"{LIST}/2"
    for given, status in (('W/"1"', 304), ('"1,2"', 200), ('"x,y", W/"1"', 304), ("*", 304)):
        seen = client.get(order, headers={**auth, "If-None-Match": given})
        assert seen.status_code == status, given
    pending = f"{LIST}/1"
    for given in ('W/"1"', '"1,2"', '"1, 2"'):
        assert_error(client.post(f"{pending}/ship", headers={**auth, "If-Match": given}),
                     412, "precondition_failed")
    moved = client.post(f"{pending}/ship", headers={**auth, "If-Match": '"0,1", "1"'})
    assert moved.status_code == 200 and moved.headers["etag"] == '"2"'


def test_each_write_counts_once_against_the_quota(client: Any, auth: dict[str, str]) -> None:
    def remaining(response: Any) -> int:
        return int(response.headers["x-ratelimit-remaining"])

    seen = [remaining(client.get(f"{LIST}/1", headers=auth))]
    seen.append(remaining(place(client, auth)))
    seen.append(remaining(place(client, auth)))  # a replay counts too
    seen.append(remaining(client.post(f"{LIST}/5/ship", headers=auth)))
    seen.append(remaining(client.post(f"{LIST}/5/complete", headers=auth)))
    seen.append(remaining(client.post(f"{LIST}/5/complete", headers={**auth,
                                                                    "If-Match": '"1"'})))
    assert seen == list(range(seen[0], seen[0] - 6, -1))
