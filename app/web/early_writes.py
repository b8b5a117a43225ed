"""Writes answered early: a write answered without Flask (direct.py) whose request is
plainly valid is answered right inside Connexion's exception middleware, before its
document server, routing, security and validation, which could only let it through."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft4Validator
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.services import Services
from app.core.storage.records import ApiKey
from app.web.bodies import MAX_BODY_BYTES, content_length, lone_surrogate, replay
from app.web.bridge import HandlerThreads
from app.web.connexion_internals import CANONICAL_INTEGER, JSONBodyValidator, ParameterValidator
from app.web.direct import Answer, Call, answer_call
from app.web.exchange import exchange
from app.web.routing import Operation, operations
from app.web.security import authorization_headers, key_info

# The JSON media types a direct operation may take its body in: its document declares one.
JSON_TYPES = ("application/json", "application/merge-patch+json")
JSON = b"application/json"


@dataclass(frozen=True)
class Write:
    """What a direct operation's document asks of a request, as EarlyWrites checks it."""

    operation: Operation
    handler: Callable[[Call], Answer]
    method: str
    path: re.Pattern[str]  # its path parameters captured by name
    path_parameters: dict[str, Draft4Validator]  # all integers (StrictURIParser's D7)
    headers: dict[bytes, tuple[bool, Draft4Validator]]  # name -> (required, validator)
    body: Any  # the body's validator; None when the operation takes no body
    body_required: bool  # whether a request without a body is refused
    content_type: bytes | None  # the one JSON media type the document declares for it


def plan(operation: Operation, handler: Callable[[Call], Answer]) -> Write | None:
    """The Write of a direct operation; None when it declares something this does not
    check, and so always goes the long way."""
    path_parameters, headers = {}, {}
    for parameter in operation.parameters:
        schema = parameter.get("schema", {})
        validator = ParameterValidator.validator(parameter)
        if parameter["in"] == "path" and schema.get("type") == "integer":
            path_parameters[parameter["name"]] = validator
        elif parameter["in"] == "header" and schema.get("type") == "string":
            headers[parameter["name"].lower().encode("latin-1")] = (
                bool(parameter.get("required")), validator)
        else:  # a query parameter, a cookie, another type: Connexion's to read
            return None
    body, body_required, content_type = None, False, None
    if "requestBody" in operation.definition:
        request_body = operation.definition["requestBody"]
        content = request_body.get("content", {})
        if len(content) != 1 or next(iter(content)) not in JSON_TYPES:
            return None
        media_type, described = next(iter(content.items()))
        schema = described.get("schema")
        if schema is None:
            return None
        content_type = media_type.encode("latin-1")
        body = JSONBodyValidator.validator_for(schema)
        # Connexion reads a missing body as the schema's default, where it has one.
        body_required = bool(request_body.get("required")) and schema.get("default") is None
    pattern = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(operation.template))
    return Write(operation, handler, operation.method, re.compile(pattern),
                 path_parameters, headers, body, body_required, content_type)


def plans(handlers: dict[str, Callable[[Call], Answer]],
          long_way: frozenset[str]) -> list[Write]:
    """The Writes of the direct operations (resolved operation id -> handler) of the
    metered documents, but those that always go the long way."""
    writes = (plan(operation, handlers[operation.id]) for operation in operations()
              if operation.api.metered and operation.id in handlers
              and operation.id not in long_way)
    return [write for write in writes if write is not None]


class EarlyWrites:
    """A request to a write answered without Flask (direct.py), answered before Connexion's
    document server, routing, security and validation when they could only let it through to
    its handler: its method and path name the operation; the rate-limit middleware has found
    its one bearer key valid, of scope write, and counted the request; it has no query;
    every header the operation declares passes its schema, a required one present and each
    given once; and its body, where it has one, is JSON (of the media type the document
    declares, its length given and within the limit) that passes the operation's schema. The
    checks are the long way's own validators (connexion_internals), built once. Anything
    else goes the long way, with the body read so far handed on, so every refusal keeps its
    status, Error body and order. It sits right inside Connexion's exception middleware, so
    the handler's exceptions become the same Error bodies; the access line, request id,
    rate-limit headers and gzip are the outer layers' as for any answer, and the answer
    layer checks it against the document where responses are validated."""

    def __init__(self, app: ASGIApp, *, writes: list[Write],
                 services: Callable[[], Services], threads: HandlerThreads) -> None:
        self.app = app
        self.writes: dict[str, list[Write]] = {}
        for write in writes:
            self.writes.setdefault(write.method, []).append(write)
        self.services = services  # the running app's, read at each call, as Flask's are
        self.threads = threads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Every other method (a read) goes on at once.
        found = self._write(scope) if scope.get("method") in self.writes else None
        if found is None:
            await self.app(scope, receive, send)
            return
        write, path_params, key = found
        body = b""
        if _length(scope["headers"]):
            read, messages = await _read(receive)
            if read is None or not _valid_body(write, read):
                # The long way's answer (and access line), for a client that left too.
                await self.app(scope, replay(messages, receive), send)
                return
            body = read
        answering = exchange(scope)
        answering.operation = write.operation
        answering.answered_by = "early"
        call = Call(self.services(), scope["path"], path_params, scope["headers"], body,
                    key_info(key))
        await answer_call(self.threads, write.handler, call, send)

    def _write(self, scope: Scope) -> tuple[Write, dict[str, int], ApiKey] | None:
        """The request's Write, its path parameters and its key, when all but its body
        passes; else None."""
        if scope["type"] != "http":
            return None
        writes = self.writes[scope["method"]]
        key = exchange(scope).key
        if (key is None or key.scope != "write" or scope.get("query_string")
                or scope.get("root_path")
                or len(authorization_headers(scope)) != 1):
            return None
        for write in writes:
            matched = write.path.fullmatch(scope["path"])
            if matched is not None:
                break
        else:
            return None
        path_params = {}
        for name, validator in write.path_parameters.items():
            text = matched[name]
            if not CANONICAL_INTEGER.match(text) or not validator.is_valid(int(text)):
                return None
            path_params[name] = int(text)
        if not _valid_headers(write, scope["headers"]):
            return None
        return write, path_params, key


def _valid_headers(write: Write, headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether every declared header passes, each given at most once, a required one
    present; and the body is declared where there is one, JSON where it is typed."""
    seen: set[bytes] = set()
    content_type = None
    for name, value in headers:
        if name == b"content-type":
            if content_type is not None:
                return False
            content_type = value
        declared = write.headers.get(name)
        if declared is None:
            continue
        if name in seen or not declared[1].is_valid(value.decode("latin-1")):
            return False
        seen.add(name)
    if any(required and name not in seen for name, (required, _) in write.headers.items()):
        return False
    length = _length(headers)
    if length is None:  # chunked, or a Content-Length BodyLimit is to judge
        return False
    if length:
        return write.body is not None and content_type == write.content_type
    # Connexion takes a missing Content-Type as the document's, and reads no body.
    return not write.body_required and content_type in (None, write.content_type or JSON)


def _length(headers: list[tuple[bytes, bytes]]) -> int | None:
    """The length of the request's body, when its one Content-Length (or none) gives it
    within MAX_BODY_BYTES and it is not chunked; else None."""
    lengths = []
    for name, value in headers:
        if name == b"transfer-encoding":
            return None
        if name == b"content-length":
            lengths.append(value)
    if not lengths:
        return 0
    if len(lengths) > 1 or not lengths[0].isdigit():
        return None
    length = content_length(lengths[0])
    return length if length <= MAX_BODY_BYTES else None


async def _read(receive: Receive) -> tuple[bytes | None, list[Message]]:
    """The body (None when the client left before its end) and the messages read."""
    messages: list[Message] = []
    body, more = b"", True
    while more:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return None, messages
        body += message.get("body", b"")
        more = message.get("more_body", False)
    return body, messages


def _valid_body(write: Write, body: bytes) -> bool:
    """Whether the body is JSON, within the limit, of text UTF-8 can hold, and passes the
    operation's schema."""
    if write.body is None or len(body) > MAX_BODY_BYTES or lone_surrogate(body):
        return False
    try:
        parsed = json.loads(body.decode("utf-8"))
    # UnicodeDecodeError and JSONDecodeError both; or nested past the recursion limit.
    except (ValueError, RecursionError):
        return False
    return parsed is not None and write.body.is_valid(parsed)
