"""Conditional GET of the order list: its weak ETag, and 304 Not Modified for a client
whose copy is current.

The list's ETag names the service's version (the encoding may change with it) and the
orders' revision, which every change to an order raises (app/core/listing.py). Revalidation answers
a matching If-None-Match after Connexion has routed, authenticated, counted and validated
the request, but before the request reaches Flask: a 304 needs one read of the revision and
no handler thread. Any other request, and a list whose revision moved on, go on to the
handler.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app import __version__
from app.core.storage import Store
from app.web.connexion_internals import routed_operation

LIST_OPERATION = "app.web.handlers.orders.list_orders"


def list_etag(revision: int) -> str:
    """The weak ETag of the list at a revision of the orders."""
    return f'W/"{__version__}-{revision}"'


def matches(if_none_match: str, tag: str) -> bool:
    """Whether an If-None-Match value matches tag, by RFC 9110's weak comparison."""
    opaque = tag.removeprefix("W/")
    return any(candidate == "*" or candidate.removeprefix("W/") == opaque
               for candidate in (c.strip() for c in if_none_match.split(",")))


class Revalidation:
    """304 with the current ETag and no body for a list request whose If-None-Match
    matches. Added right before Connexion's context middleware (MiddlewarePosition
    .BEFORE_CONTEXT), so security, quotas and validation have all run."""

    def __init__(self, app: ASGIApp, *, store: Store) -> None:
        self.app = app
        self.store = store

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "GET"
                and routed_operation(scope) == LIST_OPERATION):
            given = [v for k, v in scope["headers"] if k == b"if-none-match"]
            if given:
                # One row read; in WAL mode a reader never waits for a writer.
                tag = list_etag(self.store.revision())
                if matches(b",".join(given).decode("latin-1"), tag):
                    await send({"type": "http.response.start", "status": 304,
                                "headers": [(b"etag", tag.encode("ascii"))]})
                    await send({"type": "http.response.body", "body": b""})
                    return
        await self.app(scope, receive, send)
