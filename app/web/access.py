"""Request ids, the access log, and headers decided outside the handlers.

Every request gets an id: the client's X-Request-ID when it is short and printable,
otherwise a new one. It is echoed on every response, written on every log line about the
request, and quoted in 500 bodies so that a user can report it. One access line is logged
per request, with the path template rather than the raw path, and the key's id, never the
key or the Authorization header.
"""

from __future__ import annotations

import logging
import random
import re
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import metrics
from app.web.connexion_internals import routed_operation, share_extensions, token_info

log = logging.getLogger("petstore.access")

REQUEST_ID = "petstore.request_id"
DECIDED_HEADERS = "petstore.response_headers"
CLIENT_ID = re.compile(rb"[\x21-\x7e]{1,128}\Z")  # printable ASCII, no spaces, short


def request_id_of(scope: Scope) -> str | None:
    """The id of the request this scope belongs to."""
    value = scope.get(REQUEST_ID)
    return str(value) if value is not None else None


def decide_headers(scope: Scope, headers: list[tuple[bytes, bytes]]) -> None:
    """Ask for headers on the response. AccessLog, the outermost middleware, writes them on
    every response; DecidedHeaders writes them inside the response validator."""
    scope.setdefault(DECIDED_HEADERS, []).extend(headers)


def add_missing(headers: Any, extra: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """headers with those of extra it does not have yet."""
    present = {name for name, _ in headers}
    return [*headers, *((name, value) for name, value in extra if name not in present)]


def adding_headers(send: Send, headers: list[tuple[bytes, bytes]]) -> Send:
    """send, adding to the response's start the headers it lacks."""

    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = add_missing(message.get("headers", ()), headers)
        await send(message)

    return wrapped


def _new_id() -> str:
    """A new request id: 128 random bits as 32 hex digits. An id must be unique, not secret,
    so it comes from the random module (reseeded in every forked worker), not from the
    operating system: secrets.token_hex made a system call per request, 3% of a small
    request's CPU (py-spy, issue 17)."""
    return f"{random.getrandbits(128):032x}"


class AccessLog:
    """Outermost middleware: the request id, and one access line per request."""

    def __init__(self, app: ASGIApp, *, templates: dict[str, str],
                 documents: tuple[str, ...] = ()) -> None:
        self.app = app
        self.templates = templates  # resolved operation id -> "/v1/store/orders/{orderId}"
        # What Connexion serves outside the operations ("/v1/openapi.json", "/v1/ui"):
        # labelled by their own path, not "(no route)", which reads as a routing fault.
        self.documents = documents

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = [v for k, v in scope["headers"] if k.lower() == b"x-request-id"]
        request_id = (given[0].decode("ascii") if len(given) == 1 and CLIENT_ID.match(given[0])
                      else _new_id())
        scope[REQUEST_ID] = request_id
        # Connexion's router works on a shallow copy of the scope: see
        # connexion_internals.share_extensions.
        share_extensions(scope)
        decide_headers(scope, [(b"x-request-id", request_id.encode("ascii"))])
        # The list is shared with the scope copies further in, so headers decided there
        # (deprecation, rate limits) reach responses made by Connexion's error handlers.
        decided = scope[DECIDED_HEADERS]
        started = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = add_missing(message.get("headers", ()), decided)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            self._log(scope, status, time.perf_counter() - started)

    def _template(self, scope: Scope) -> str:
        """The operation's path template, a document's path, or "(no route)"."""
        template = self.templates.get(routed_operation(scope) or "")
        if template is not None:
            return template
        path = scope["path"]
        return next((served for served in self.documents if path.startswith(served)),
                    "(no route)")

    def _log(self, scope: Scope, status: int, seconds: float) -> None:
        template = self._template(scope)
        metrics.observe_request(scope["method"], template, status, seconds)
        client = scope.get("client")
        log.info(
            "%s %s %d", scope["method"], template, status,
            extra={
                "request_id": scope[REQUEST_ID],
                "method": scope["method"],
                "path": template,
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
                "key_id": (token_info(scope) or {}).get("key_id"),
                # The client's address and the scheme as the service took them: from
                # X-Forwarded-For and X-Forwarded-Proto only when a proxy that
                # PETSTORE_FORWARDED_ALLOW_IPS trusts sent them (uvicorn's proxy headers).
                "client": client[0] if client else None,
                "scheme": scope.get("scheme", "http"),
            },
        )


class DecidedHeaders:
    """Writes the headers outer middleware decided (rate limits, request id) onto the
    handler's response inside Connexion's response validator, so that the validator sees
    the headers the YAML declares required (DESIGN.md: headers added outside it are
    invisible to it). Added only where responses are validated."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope.get(DECIDED_HEADERS)
        if scope["type"] != "http" or not headers:
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, adding_headers(send, headers))
