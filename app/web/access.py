"""The access layer: request ids, the access log, and how an API answer goes out on the
wire (encoding.py: gzip, large bodies in slices).

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
from collections.abc import Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core import metrics
from app.core.services import Services
from app.web import console
from app.web.connexion_internals import share_extensions
from app.web.encoding import Encoding
from app.web.exchange import EXCHANGE, Exchange, exchange_or_none
from app.web.longpoll import FeedWaits

log = logging.getLogger("petstore.access")

CLIENT_ID = re.compile(rb"[\x21-\x7e]{1,128}\Z")  # printable ASCII, no spaces, short


def request_id_of(scope: Scope) -> str | None:
    """The id of the request this scope belongs to."""
    found = exchange_or_none(scope)
    return found.request_id if found is not None else None


def _new_id() -> str:
    """A new request id: 128 random bits as 32 hex digits. An id must be unique, not secret,
    so it comes from the random module (reseeded in every forked worker), not from the
    operating system: secrets.token_hex makes a system call per request."""
    return f"{random.getrandbits(128):032x}"


class AccessLog:
    """The access layer, where a request meets the service and its answer leaves it: makes
    the request's Exchange with its request id, and logs one access line per request, with
    the operation's path template, the key's id and which layer answered. The console's
    pages (D35) branch off here, to their own Flask app (pages(), console.py); every other
    request goes on to the API's layers, and their answer goes out through the encoding
    (gzip at gzip_level, 0 for none; large bodies in slices), which console pages never
    pass (BREACH, encoding.py)."""

    def __init__(self, app: ASGIApp, *, gzip_level: int = 0, gzip_kept_bytes: int = 0,
                 documents: tuple[str, ...] = (),
                 services: Callable[[], Services] | None = None,
                 pages: Callable[[], ASGIApp] | None = None,
                 waits: FeedWaits | None = None) -> None:
        self.app = Encoding(app, level=gzip_level, max_bytes=gzip_kept_bytes)
        # The feed's waiting requests of the app, for the feed's handler.
        self.waits = waits
        # The console's Flask app behind a2wsgi, read at each console request (it exists
        # once the app does); None: no console here.
        self.pages = pages
        # The services of the app, read for each request into its Exchange (the handlers'
        # way to them: app.web.handlers.services).
        self.services = services
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
        found = scope[EXCHANGE] = Exchange(
            request_id, [(b"x-request-id", request_id.encode("ascii"))],
            services=self.services() if self.services is not None else None,
            waits=self.waits)
        # Connexion's router works on a shallow copy of the scope: see
        # connexion_internals.share_extensions.
        share_extensions(scope)
        started = time.perf_counter()
        try:
            if self.pages is not None and console.is_console(scope["path"]):
                await console.serve(self.pages(), found, scope, receive, send)
            else:
                await self.app(scope, receive, send)
        finally:
            # The errors layer notes the status; none reached it (the request failed
            # outside it): Connexion's server errors answer 500.
            self._log(scope, found, found.status, time.perf_counter() - started)

    def _template(self, scope: Scope, found: Exchange) -> str:
        """The operation's path template, a document's path, or "(no route)"."""
        if found.operation is not None:
            return found.operation.template
        path = scope["path"]
        return next((served for served in self.documents if path.startswith(served)),
                    "(no route)")

    def _log(self, scope: Scope, found: Exchange, status: int, seconds: float) -> None:
        template = self._template(scope, found)
        metrics.observe_request(scope["method"], template, status, seconds)
        key = found.key
        client = scope.get("client")
        log.info(
            "%s %s %d", scope["method"], template, status,
            extra={
                "request_id": found.request_id,
                "method": scope["method"],
                "path": template,
                "status": status,
                "duration_ms": round(seconds * 1000, 2),
                "key_id": key.id if key is not None and found.operation is not None
                else None,
                "answered_by": found.answered_by or "long",
                # The client's address and the scheme as the service took them: from
                # X-Forwarded-For and X-Forwarded-Proto only when a proxy that
                # PETSTORE_FORWARDED_ALLOW_IPS trusts sent them (uvicorn's proxy headers).
                "client": client[0] if client else None,
                "scheme": scope.get("scheme", "http"),
            },
        )
