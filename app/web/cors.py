"""CORS: Starlette's middleware, first in the chain (the request path), for the
origins of PETSTORE_CORS_ORIGINS."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import ASGIApp

from app.web.errors import error_body

# Headers a browser script may read (CORS): the quota and request-id headers, and those
# later issues add (ETag, Deprecation, Sunset).
EXPOSED_HEADERS = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
                   "RateLimit-Policy", "RateLimit", "Retry-After", "X-Request-ID", "ETag",
                   "Deprecation", "Sunset"]


class Cors(CORSMiddleware):
    """Starlette's CORS middleware, first in the chain (the request path), whose
    refused preflights answer with the Error object instead of plain text."""

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        super().__init__(
            app,
            allow_origins=origins,
            allow_methods=["GET", "DELETE"],
            allow_headers=["Authorization", "X-Request-ID", "If-None-Match"],
            expose_headers=EXPOSED_HEADERS,
            max_age=600,
        )

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code != 400:
            return response
        reason = bytes(response.body).decode().removeprefix("Disallowed CORS ")
        return Response(
            error_body(400, "invalid_request", f"CORS does not allow this request's {reason}."),
            status_code=400,
            media_type="application/json",
            headers={k: v for k, v in response.headers.items()
                     if k.lower() not in ("content-type", "content-length")},
        )
