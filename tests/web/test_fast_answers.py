"""Fast answers hold to the long way's, for every operation of the documents.

The served chain answers some requests sooner than Connexion's routing, security and
validation would (a repeated read from its kept answer): app/web/chain.py names those
layers FAST. Here every request is
sent, in the same order, to the served app and to the long way (the same chain without the
FAST layers), each over its own copy of the same orders and keys, and both must answer
alike: status, body and the headers a client reads. The requests are generated from the
documents, for every operation: a valid one (sent twice, then again with the ETag it got),
and invalid path parameters, query parameters, headers, bodies, media types and keys. So a
new operation is covered by adding it to a document; and an operation that qualifies for a
fast path (a @kept read) must have been answered fast at least once.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from connexion.utils import get_function_from_name

from app.core import orders
from app.core.config import Settings
from app.web.conditional import is_kept
from app.web.routing import Operation, operations
from tests.web.conftest import ORDERS, compared_headers, served_and_long_way

# Members whose values are random by design: a webhook endpoint's secret, shown once, and
# a cursor, which names its database (D26: a cursor of another database is refused).
RANDOM_MEMBERS = frozenset({"secret", "next"})
CURSOR = re.compile(r"(cursor|after)=[^&>]*")
NOW = "2026-11-25T12:00:00Z"

Request = tuple[str, str, list[tuple[str, str]], bytes | None, str]  # ..., what it tries


def sample(schema: dict[str, Any]) -> Any:
    """A value the schema accepts: its example, enum or default where it gives one, else
    the smallest value of its type."""
    for given in ("example", "default"):
        if given in schema:
            return schema[given]
    if "enum" in schema:
        return schema["enum"][0]
    if "allOf" in schema:
        return sample(schema["allOf"][0])
    kind = schema.get("type")
    if kind == "integer":
        return max(int(schema.get("minimum", 1)), 1)
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        return [sample(schema.get("items", {}))] * max(int(schema.get("minItems", 1)), 1)
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {name: sample(properties[name]) for name in schema.get("required", ())
                if not properties.get(name, {}).get("readOnly")}
    text_format = schema.get("format")
    if text_format == "date-time":
        return "2026-12-01T10:00:00Z"
    if text_format in ("uri", "url"):
        return "http://127.0.0.1:9/hook"  # refused as not public (D28), without a lookup
    return "a" * max(int(schema.get("minLength", 1)), 1)


def _query(pairs: list[tuple[str, Any]]) -> str:
    def text(value: Any) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, list):
            return ",".join(text(v) for v in value)
        return str(value)

    return "&".join(f"{name}={text(value)}" for name, value in pairs)


def requests_for(operation: Operation, path_id: int) -> Iterator[Request]:
    """A valid request to the operation and its invalid variations."""
    parameters = operation.parameters
    path = operation.template
    for parameter in parameters:
        if parameter["in"] == "path":
            path = path.replace("{" + parameter["name"] + "}", str(path_id))
    headers = [(p["name"], str(sample(p.get("schema", {})))) for p in parameters
               if p["in"] == "header" and p.get("required")]
    content = operation.definition.get("requestBody", {}).get("content", {})
    media_type = next(iter(content), "application/json")  # each takes one JSON type
    body_schema = content.get(media_type, {}).get("schema")
    body = orjson.dumps(sample(body_schema)) if body_schema is not None else None
    if body is not None:
        headers.append(("Content-Type", media_type))
    method = operation.method
    yield method, path, headers, body, "valid"
    if method == "GET":
        yield method, path, headers, body, "valid, again"
    queries = [(p["name"], sample(p.get("schema", {}))) for p in parameters
               if p["in"] == "query"]
    if queries:
        yield method, f"{path}?{_query(queries[:2])}", headers, body, "valid query"
        yield method, f"{path}?{queries[0][0]}=%00x", headers, body, "bad query value"
    yield method, f"{path}?zzz=1", headers, body, "unknown query"
    for parameter in parameters:
        if parameter["in"] == "path":
            for bad in ("abc", "01", "9223372036854775808", "-3", "999999"):
                yield (method, operation.template.replace("{" + parameter["name"] + "}", bad),
                       headers, body, f"path {parameter['name']}={bad}")
        if parameter["in"] == "header":
            name = parameter["name"]
            others = [(k, v) for k, v in headers if k != name]
            longest = int(parameter.get("schema", {}).get("maxLength", 300))
            yield method, path, [*others, (name, "x" * (longest + 1))], body, f"{name} too long"
            yield method, path, [*others, (name, "b"), (name, "c")], body, f"{name} twice"
            if parameter.get("required"):
                yield method, path, others, body, f"no {name}"
            if name.lower() in ("if-match", "if-none-match"):
                yield method, path, [*others, (name, '"1"')], body, f"{name} version 1"
                yield method, path, [*others, (name, 'W/"x"')], body, f"{name} weak"
    if body_schema is not None:
        plain = [(k, v) for k, v in headers if k != "Content-Type"]
        sampled = sample(body_schema)
        yield method, path, headers, b"{", "body not JSON"
        yield method, path, headers, b"[]", "body an array"
        yield method, path, headers, b"null", "body null"
        yield method, path, headers, orjson.dumps({**sampled, "zzz": 1}), "body extra member"
        for member in list(sampled)[:2]:
            wrong = {**sampled, member: [] if not isinstance(sampled[member], list) else 1}
            yield method, path, headers, orjson.dumps(wrong), f"body {member} wrong type"
            missing = {k: v for k, v in sampled.items() if k != member}
            yield method, path, headers, orjson.dumps(missing), f"body without {member}"
        yield method, path, [*plain, ("Content-Type", "text/plain")], body, "text/plain"
        if media_type != "application/json":
            yield (method, path, [*plain, ("Content-Type", "application/json")], body,
                   "application/json")
        yield method, path, plain, body, "no Content-Type"
        yield method, path, headers, b"", "empty body"
    elif method in ("POST", "PATCH"):
        yield method, path, [*headers, ("Content-Type", "application/json")], b"{}", "a body"
    for key in ("none", "read", "unknown", "twice"):
        yield method, path, [*headers, ("Authorization", key)], body, f"key {key}"


def _apps(settings: Settings, tmp_path: Path) -> tuple[Any, Any, dict[str, str]]:
    # Anonymous requests count per address: with Business's numbers none is refused.
    return served_and_long_way(
        settings.replace(anonymous_plan="business"), tmp_path,
        [*ORDERS, *({"id": i, "petId": i} for i in range(5, 40))],
        # A catalogue whose pets the path ids name, tracked and not (D32, D33).
        [{"id": i, "name": f"pet {i}", **({"stock": 50} if i % 2 else {})}
         for i in range(1, 60)])


def _headers(given: list[tuple[str, str]], bearer: dict[str, str]) -> list[tuple[str, str]]:
    authorization = dict(given).get("Authorization", "write")
    pairs = [(k, v) for k, v in given if k != "Authorization"]
    if authorization == "twice":
        return [*pairs, ("Authorization", bearer["write"]), ("Authorization", bearer["write"])]
    if authorization == "none":
        return pairs
    return [*pairs, ("Authorization", bearer[authorization])]


def _seen(response: Any) -> tuple[int, Any, dict[str, str | None]]:
    """What a client sees of an answer: status, body (JSON parsed, random members
    masked), and every header but conftest's NOT_COMPARED."""
    body: Any = response.content
    if response.headers.get("content-type") == "application/json" and body:
        body = orjson.loads(body)
        if isinstance(body, dict):
            body = {k: ("(random)" if k in RANDOM_MEMBERS and isinstance(v, str) else v)
                    for k, v in body.items()}
    headers = compared_headers(response)
    if "link" in headers:
        headers["link"] = CURSOR.sub(r"\1=(random)", headers["link"] or "")
    if isinstance(body, dict) and "(random)" in body.values():  # its length follows theirs
        headers["content-length"] = None
    return response.status_code, body, headers


def _fast_operations() -> dict[str, str]:
    """Resolved operation id -> the fast layer that may answer it."""
    found = {}
    for operation in operations():
        handler = get_function_from_name(operation.id)
        if is_kept(handler):
            found[operation.id] = "kept"
    return found


def test_every_operation_answers_fast_as_the_long_way(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    served, long, bearer = _apps(settings, tmp_path)
    # A ship without a date ships now: both apps must read the same now.
    monkeypatch.setattr(orders, "utc_now", lambda: NOW)
    fast = _fast_operations()
    answered_fast: dict[str, set[str]] = {}
    metered = [operation for operation in operations() if operation.api.metered]
    assert fast, "some operation has a fast path"
    path_ids = iter(range(1, 1000))
    with caplog.at_level(logging.INFO, "petstore.access"):
        for operation in metered:
            path_id = next(path_ids) if operation.method != "GET" else 1
            etag = None
            for method, path, given, body, tries in requests_for(operation, path_id):
                headers = _headers(given, bearer)
                if tries == "valid, again" and etag is not None:
                    headers.append(("If-None-Match", etag))
                caplog.clear()
                answers = [client.request(method, path, headers=headers, content=body)
                           for client in (served, long)]
                seen = [_seen(answer) for answer in answers]
                what = (operation.id, tries, method, path)
                assert seen[0] == seen[1], what
                assert seen[0][0] < 500, (what, seen[0])
                if tries == "valid":
                    etag = answers[0].headers.get("etag")
                lines = [r for r in caplog.records if r.name == "petstore.access"]
                assert len(lines) == 2, what
                served_line, long_line = lines
                assert long_line.answered_by == "long", what
                assert (served_line.path, served_line.status, served_line.key_id) == (
                    long_line.path, long_line.status, long_line.key_id), what
                if served_line.answered_by != "long":
                    answered_fast.setdefault(operation.id, set()).add(served_line.answered_by)
    missing = {op: way for op, way in fast.items()
               if way not in answered_fast.get(op, set())
               and any(o.id == op and o.api.metered for o in metered)}
    assert not missing, f"never answered by their fast path: {missing}"
    assert set(answered_fast) <= set(fast), answered_fast
