"""Writes at the edges the generated requests of tests/test_schemathesis.py rarely reach:
chunked bodies, lengths and ids of thousands of digits, bodies nested past the recursion
limit, headers sent twice, and a client that leaves mid-body. Each request is sent in
order to one app over the same orders and keys, and answered as its document says: the
status, and for a refusal the Error's code, with no 500 among them."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from app.core import orders
from app.core.config import Settings
from app.core.storage import open_store
from app.web import create_app
from tests.web.conftest import ORDERS, unmetered_keys

JSON = {"Content-Type": "application/json"}
PLACE = "/v2/store/orders"
BODY = b'{"petId": 7, "quantity": 1}'
INVALID, STALE, MEDIA = "invalid_request", "precondition_failed", "unsupported_media_type"


def _chunks() -> Iterator[bytes]:
    yield BODY[:10]
    yield BODY[10:]


# (method, path, headers beyond the write key's Authorization, body, status, Error code)
REQUESTS: list[tuple[str, str, Any, Any, int, str | None]] = [
    ("POST", PLACE, {**JSON, "Idempotency-Key": "a"}, BODY, 201, None),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "a"}, BODY, 201, None),  # replayed
    ("POST", PLACE, {**JSON, "Idempotency-Key": "a"}, b'{"petId": 8, "quantity": 1}', 422,
     "idempotency_key_reused"),
    ("POST", PLACE, {**JSON, "Idempotency-Key": '"quoted"'},
     b'{"petId": 7, "quantity": 2, "shipDate": "2026-12-01T10:00:00+01:00"}', 201, None),
    ("POST", PLACE, JSON, BODY, 400, INVALID),  # no Idempotency-Key
    ("POST", PLACE, {**JSON, "Idempotency-Key": "k" * 300}, BODY, 400, INVALID),
    ("POST", PLACE, [*JSON.items(), ("Idempotency-Key", "b"), ("Idempotency-Key", "c")],
     BODY, 201, None),
    ("POST", PLACE, {"Content-Type": "text/plain", "Idempotency-Key": "d"}, BODY, 415, MEDIA),
    ("POST", PLACE, {"Content-Type": "application/json; charset=utf-8",
                     "Idempotency-Key": "e"}, BODY, 201, None),
    ("POST", PLACE, {"Idempotency-Key": "f"}, BODY, 201, None),  # no Content-Type
    ("POST", PLACE, {**JSON, "Idempotency-Key": "g"}, b'{"petId": 7,', 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "h"}, b'{"petId": "\xff"}', 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "i"}, b"[1, 2]", 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "j"}, b"null", 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "k"}, b'{"petId": 7, "quantity": 0}', 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "l"},
     b'{"petId": 7, "quantity": 1, "status": "shipped"}', 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "m"},
     b'{"petId": 7, "quantity": 1, "shipDate": "tomorrow"}', 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "n"}, b"", 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "o"}, b" " * 17_000, 413, "payload_too_large"),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "p"}, _chunks, 201, None),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "p2"}, b"[" * 5000 + b"]" * 5000, 400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "p3", "Content-Length": "0" * 5000}, b"",
     400, INVALID),
    ("POST", PLACE + "?limit=1", {**JSON, "Idempotency-Key": "q"}, BODY, 400, INVALID),
    ("POST", PLACE + "/", {**JSON, "Idempotency-Key": "r"}, BODY, 404, "not_found"),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "s", "Authorization": None}, BODY, 401,
     "missing_api_key"),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "t", "Authorization": "read"}, BODY, 403,
     "insufficient_scope"),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "u", "Authorization": "twice"}, BODY,
     400, INVALID),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "v", "Authorization": "Bearer psk_nope"},
     BODY, 401, "invalid_api_key"),
    ("POST", "/v2/store/orders/1/ship", {}, None, 200, None),
    ("POST", "/v2/store/orders/1/ship", {}, None, 200, None),  # shipped already: as it is
    ("POST", "/v2/store/orders/4/ship", JSON, b'{"shipDate": "2026-11-20T10:00:00Z"}', 200, None),
    ("POST", "/v2/store/orders/999/ship", {}, None, 404, "order_not_found"),
    ("POST", "/v2/store/orders/01/ship", {}, None, 400, INVALID),
    ("POST", "/v2/store/orders/9223372036854775808/ship", {}, None, 400, INVALID),
    ("POST", "/v2/store/orders/-3/ship", {}, None, 404, "order_not_found"),  # as the document says
    ("POST", "/v2/store/orders/" + "1" * 5000 + "/ship", {}, None, 400, INVALID),
    ("POST", "/v2/store/orders/3/ship", {"Content-Type": "text/plain"}, None, 415, MEDIA),
    ("POST", "/v2/store/orders/3/ship", JSON, b'{"shipDate": 5}', 400, INVALID),
    ("POST", "/v2/store/orders/2/complete", {"If-Match": '"2"'}, None, 412, STALE),
    ("POST", "/v2/store/orders/2/complete", {"If-Match": '"x' + "x" * 8200 + '"'}, None,
     400, INVALID),
    ("POST", "/v2/store/orders/2/complete", {"If-Match": b'"\xb9"'}, None, 412, STALE),
    ("POST", "/v2/store/orders/2/complete", {"If-Match": '"' + "1" * 5000 + '"'}, None, 412, STALE),
    ("POST", "/v2/store/orders/2/complete", {}, None, 200, None),
    ("POST", "/v2/store/orders/2/complete", JSON, b"{}", 200, None),  # a body not declared
    ("DELETE", "/v2/store/orders/5", {"If-Match": '"1"'}, None, 204, None),
    ("DELETE", "/v1/store/orders/6", {}, None, 204, None),
    ("DELETE", "/v1/store/orders/6", {}, None, 204, None),  # cancelled already
    ("DELETE", "/v1/store/orders/2", {}, None, 409, "order_already_shipped"),  # shipped
    ("DELETE", "/v1/store/orders/abc", {}, None, 400, INVALID),
    ("DELETE", "/v1/store/orders/7?x=1", {}, None, 204, None),  # v1 ignores the query (D6)
    ("DELETE", "/v1/store/orders/8", JSON, b"{}", 204, None),  # a body, ignored (D6)
    ("DELETE", "/v1/store/orders/" + "1" * 5000, {}, None, 400, INVALID),
    ("DELETE", "/v1/store/orders/9", {"Content-Length": "0" * 5000}, None, 204, None),
]


@pytest.fixture
def bearer(settings: Settings) -> dict[str, str]:
    """A write key and a read key no quota stops, over the orders of ORDERS and five more."""
    store = open_store(settings)
    try:
        store.import_orders([*ORDERS, *({"id": i, "petId": i} for i in range(5, 10))])
        return unmetered_keys(store)
    finally:
        store.close()


def _headers(given: Any, bearer: dict[str, str]) -> list[tuple[str, str]]:
    pairs = list(given.items()) if isinstance(given, dict) else list(given)
    authorization = dict(pairs).get("Authorization", "write")
    pairs = [(k, v) for k, v in pairs if k != "Authorization"]
    if authorization == "twice":
        return [*pairs, ("Authorization", bearer["write"]), ("Authorization", bearer["write"])]
    if authorization is None:
        return pairs
    return [*pairs, ("Authorization", bearer.get(authorization, authorization))]


def test_every_write_at_an_edge_is_answered_as_its_document_says(
    settings: Settings, bearer: dict[str, str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A ship without a date ships now.
    monkeypatch.setattr(orders, "utc_now", lambda: "2026-11-25T12:00:00Z")
    client = create_app(settings).test_client()
    for method, path, given, body, status, code in REQUESTS:
        answer = client.request(method, path, headers=_headers(given, bearer),
                                content=body() if callable(body) else body)
        what = (method, path[:60], given if isinstance(given, list) else sorted(given))
        assert answer.status_code == status, (what, answer.text)
        if code is None:
            continue
        error = answer.json()
        assert (error["code"], error["status"]) == (code, status), what
        assert "Traceback" not in error["message"], what
        assert "x-ratelimit-limit" in answer.headers, what


def test_a_client_that_leaves_mid_body_is_logged_with_its_key(
    settings: Settings, bearer: dict[str, str], caplog: pytest.LogCaptureFixture,
) -> None:
    """Nothing is answered to a client that has gone, and its request is logged once, with
    the key that sent it."""
    headers = [(k.lower().encode(), v.encode()) for k, v in _headers(
        {**JSON, "Idempotency-Key": "left", "Content-Length": str(len(BODY))}, bearer)]
    client = create_app(settings).test_client()

    async def leave(app: Any) -> list[Any]:
        pieces = iter([{"type": "http.request", "body": BODY[:5], "more_body": True},
                       {"type": "http.disconnect"}])
        sent: list[Any] = []

        async def receive() -> Any:
            return next(pieces, {"type": "http.disconnect"})

        async def send(message: Any) -> None:
            sent.append(message)

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                 "method": "POST", "scheme": "http", "path": PLACE, "raw_path": PLACE.encode(),
                 "root_path": "", "query_string": b"", "headers": headers,
                 "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
        await app(scope, receive, send)
        return [m.get("status") for m in sent if m["type"] == "http.response.start"]

    with client, caplog.at_level(logging.INFO, "petstore.access"):
        statuses = client.portal.call(leave, client.app)
    lines = [(r.path, r.status, r.key_id) for r in caplog.records if r.name == "petstore.access"]
    assert len(lines) == 1 and lines[0][0] == PLACE and lines[0][2] == 1, lines
    assert statuses in ([], [lines[0][1]]), (statuses, lines)
    store = open_store(settings)
    try:
        assert store.order_version(10) is None  # nothing was placed
    finally:
        store.close()
