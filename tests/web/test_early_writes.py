"""Writes answered early (app/web/early_writes.py), at the edges the generated requests of
tests/web/test_fast_answers.py do not reach: chunked bodies, lengths and ids of thousands
of digits, bodies nested past the recursion limit, and a client that leaves mid-body. Each
request below is sent, in the same order, to the served app and to the long way (the same
chain without its fast layers, chain.LONG_WAY), each over its own copy of the same orders
and keys. Both must answer alike: status, body and headers. The plainly valid ones must
have been answered early, and all others the long way."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core import orders
from app.core.config import Settings
from app.web import early_writes
from tests.web.conftest import ORDERS, compared_headers, served_and_long_way

JSON = {"Content-Type": "application/json"}
PLACE = "/v2/store/orders"
BODY = b'{"petId": 7, "quantity": 1}'


def _chunks() -> Iterator[bytes]:
    yield BODY[:10]
    yield BODY[10:]


# (method, path, headers beyond the write key's Authorization, body, answered early)
REQUESTS: list[tuple[str, str, Any, Any, bool]] = [
    ("POST", PLACE, {**JSON, "Idempotency-Key": "a"}, BODY, True),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "a"}, BODY, True),  # replayed
    ("POST", PLACE, {**JSON, "Idempotency-Key": "a"}, b'{"petId": 8, "quantity": 1}', True),
    ("POST", PLACE, {**JSON, "Idempotency-Key": '"quoted"'},
     b'{"petId": 7, "quantity": 2, "shipDate": "2026-12-01T10:00:00+01:00"}', True),
    ("POST", PLACE, JSON, BODY, False),  # no Idempotency-Key
    ("POST", PLACE, {**JSON, "Idempotency-Key": "k" * 300}, BODY, False),
    ("POST", PLACE, [*JSON.items(), ("Idempotency-Key", "b"), ("Idempotency-Key", "c")],
     BODY, False),
    ("POST", PLACE, {"Content-Type": "text/plain", "Idempotency-Key": "d"}, BODY, False),
    ("POST", PLACE, {"Content-Type": "application/json; charset=utf-8",
                     "Idempotency-Key": "e"}, BODY, False),
    ("POST", PLACE, {"Idempotency-Key": "f"}, BODY, False),  # no Content-Type
    ("POST", PLACE, {**JSON, "Idempotency-Key": "g"}, b'{"petId": 7,', False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "h"}, b'{"petId": "\xff"}', False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "i"}, b"[1, 2]", False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "j"}, b"null", False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "k"}, b'{"petId": 7, "quantity": 0}', False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "l"},
     b'{"petId": 7, "quantity": 1, "status": "shipped"}', False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "m"},
     b'{"petId": 7, "quantity": 1, "shipDate": "tomorrow"}', False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "n"}, b"", False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "o"}, b" " * 17_000, False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "p"}, _chunks, False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "p2"}, b"[" * 5000 + b"]" * 5000, False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "p3", "Content-Length": "0" * 5000}, b"",
     False),
    ("POST", PLACE + "?limit=1", {**JSON, "Idempotency-Key": "q"}, BODY, False),
    ("POST", PLACE + "/", {**JSON, "Idempotency-Key": "r"}, BODY, False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "s", "Authorization": None}, BODY, False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "t", "Authorization": "read"}, BODY, False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "u", "Authorization": "twice"}, BODY,
     False),
    ("POST", PLACE, {**JSON, "Idempotency-Key": "v", "Authorization": "Bearer psk_nope"},
     BODY, False),
    ("POST", "/v2/store/orders/1/ship", {}, None, True),
    ("POST", "/v2/store/orders/1/ship", {}, None, True),  # shipped already: as it is
    ("POST", "/v2/store/orders/4/ship", JSON, b'{"shipDate": "2026-11-20T10:00:00Z"}', True),
    ("POST", "/v2/store/orders/999/ship", {}, None, True),  # 404
    ("POST", "/v2/store/orders/01/ship", {}, None, False),
    ("POST", "/v2/store/orders/9223372036854775808/ship", {}, None, False),
    ("POST", "/v2/store/orders/-3/ship", {}, None, True),  # 404, as the document says
    ("POST", "/v2/store/orders/" + "1" * 5000 + "/ship", {}, None, False),
    ("POST", "/v2/store/orders/3/ship", {"Content-Type": "text/plain"}, None, False),
    ("POST", "/v2/store/orders/3/ship", JSON, b'{"shipDate": 5}', False),
    ("POST", "/v2/store/orders/2/complete", {"If-Match": '"2"'}, None, True),  # 412
    ("POST", "/v2/store/orders/2/complete", {"If-Match": '"x' + "x" * 8200 + '"'}, None,
     False),
    ("POST", "/v2/store/orders/2/complete", {"If-Match": b'"\xb9"'}, None, True),  # 412
    ("POST", "/v2/store/orders/2/complete", {"If-Match": '"' + "1" * 5000 + '"'}, None, True),
    ("POST", "/v2/store/orders/2/complete", {}, None, True),
    ("POST", "/v2/store/orders/2/complete", JSON, b"{}", False),  # a body not declared
    ("DELETE", "/v2/store/orders/5", {"If-Match": '"1"'}, None, True),
    ("DELETE", "/v1/store/orders/6", {}, None, True),
    ("DELETE", "/v1/store/orders/6", {}, None, True),  # cancelled already: 204 again
    ("DELETE", "/v1/store/orders/2", {}, None, True),  # shipped: 409
    ("DELETE", "/v1/store/orders/abc", {}, None, False),
    ("DELETE", "/v1/store/orders/7?x=1", {}, None, False),  # v1 ignores the query (D6)
    ("DELETE", "/v1/store/orders/8", JSON, b"{}", False),  # a body, ignored (D6)
    ("DELETE", "/v1/store/orders/" + "1" * 5000, {}, None, False),
    ("DELETE", "/v1/store/orders/9", {"Content-Length": "0" * 5000}, None, True),
]


def _apps(settings: Settings, tmp_path: Path) -> tuple[Any, Any, dict[str, str]]:
    return served_and_long_way(
        settings, tmp_path, [*ORDERS, *({"id": i, "petId": i} for i in range(5, 10))])


def _headers(given: Any, bearer: dict[str, str]) -> list[tuple[str, str]]:
    pairs = list(given.items()) if isinstance(given, dict) else list(given)
    authorization = dict(pairs).get("Authorization", "write")
    pairs = [(k, v) for k, v in pairs if k != "Authorization"]
    if authorization == "twice":
        return [*pairs, ("Authorization", bearer["write"]), ("Authorization", bearer["write"])]
    if authorization is None:
        return pairs
    return [*pairs, ("Authorization", bearer.get(authorization, authorization))]


def test_every_write_answers_as_the_long_way_and_only_plain_ones_early(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    early, long, bearer = _apps(settings, tmp_path)
    # A ship without a date ships now: both apps must read the same now.
    monkeypatch.setattr(orders, "utc_now", lambda: "2026-11-25T12:00:00Z")
    answered_early: list[str] = []
    answer = early_writes.answer_call

    async def recording(threads: Any, handler: Any, call: Any, send: Any) -> None:
        answered_early.append(call.path)
        await answer(threads, handler, call, send)

    monkeypatch.setattr(early_writes, "answer_call", recording)
    for method, path, given, body, plain in REQUESTS:
        headers = _headers(given, bearer)
        answers = []
        for client in (early, long):
            content = body() if callable(body) else body
            answers.append(client.request(method, path, headers=headers, content=content))
        seen = [(a.status_code, a.content, compared_headers(a)) for a in answers]
        assert seen[0] == seen[1], (method, path, given)
        assert seen[0][0] < 500, (method, path, given, seen[0])
        assert (answered_early[-1:] == [path.split("?")[0]]) == plain, (method, path, given)
        answered_early.clear()
    with caplog.at_level(logging.INFO, "petstore.access"):
        early.request("POST", PLACE, headers=_headers({**JSON, "Idempotency-Key": "w"}, bearer),
                      content=BODY)
    line = next(r for r in caplog.records if r.name == "petstore.access")
    assert (line.path, line.status, line.key_id) == (PLACE, 201, 1)


def test_a_client_that_leaves_mid_body_is_logged_as_the_long_way_logs_it(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    early, long, bearer = _apps(settings, tmp_path)
    headers = [(k.lower().encode(), v.encode()) for k, v in _headers(
        {**JSON, "Idempotency-Key": "left", "Content-Length": str(len(BODY))}, bearer)]

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

    with early, long, caplog.at_level(logging.INFO, "petstore.access"):
        statuses = [client.portal.call(leave, client.app) for client in (early, long)]
    lines = [(r.path, r.status, r.key_id) for r in caplog.records if r.name == "petstore.access"]
    assert statuses[0] == statuses[1]
    assert lines[0] == lines[1] and lines[0][:1] == (PLACE,) and lines[0][2] == 1, lines
