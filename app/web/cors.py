"""CORS: Starlette's middleware, first in the chain, for the origins of
PETSTORE_CORS_ORIGINS, allowing a page on one of them what the OpenAPI documents declare.
It answers preflights itself, before every other layer; a refused one with the Error that
app/web/errors.py makes of CorsRefused."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp

from app.web.errors import CorsRefused, answer_of
from app.web.routing import Operation, operations

# Request headers a page may send whatever the documents declare as parameters: the key,
# the body's type, the conditions on a version, the key of a placing, and a request id of
# its own to find its access line by.
ALWAYS_ALLOWED = ("Authorization", "Content-Type", "If-Match", "If-None-Match",
                  "Idempotency-Key", "X-Request-ID")


@dataclass(frozen=True)
class CorsPolicy:
    """What a page on an allowed origin may do: the methods and request headers it may
    send, and the response headers its scripts may read."""

    methods: tuple[str, ...]
    request_headers: tuple[str, ...]
    exposed_headers: tuple[str, ...]

    @classmethod
    def of(cls, declared: Iterable[Operation]) -> CorsPolicy:
        """Every method of the operations (HEAD beside GET, which Starlette answers for
        it), every header they take as a parameter besides ALWAYS_ALLOWED, and every header
        their responses declare: a new operation or header is allowed by being declared."""
        methods, request_headers, exposed = set(), set(ALWAYS_ALLOWED), set()
        for operation in declared:
            methods.add(operation.method)
            request_headers.update(parameter["name"] for parameter in operation.parameters
                                   if parameter.get("in") == "header")
            for response in operation.definition.get("responses", {}).values():
                exposed.update(response.get("headers", {}))
        if "GET" in methods:
            methods.add("HEAD")
        return cls(tuple(sorted(methods)), tuple(sorted(request_headers, key=str.lower)),
                   tuple(sorted(exposed, key=str.lower)))

    @classmethod
    def of_documents(cls) -> CorsPolicy:
        """The policy of every operation of the served documents."""
        return cls.of(operations())


class Cors(CORSMiddleware):
    """Starlette's CORS middleware over a CorsPolicy, whose refused preflights answer with
    the Error object instead of plain text (with the CORS headers Starlette gives them)."""

    def __init__(self, app: ASGIApp, origins: list[str], policy: CorsPolicy) -> None:
        super().__init__(
            app,
            allow_origins=origins,
            allow_methods=policy.methods,
            allow_headers=policy.request_headers,
            expose_headers=policy.exposed_headers,
            max_age=600,
        )

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code != 400:
            return response
        refused = answer_of(CorsRefused(
            bytes(response.body).decode().removeprefix("Disallowed CORS ")))
        return Response(
            refused.body,
            status_code=refused.status_code,
            media_type=refused.mimetype,
            headers={k: v for k, v in response.headers.items()
                     if k.lower() not in ("content-type", "content-length")},
        )
