"""What one request carries from layer to layer of the request path (app/web/chain.py).

One Exchange per request, made by the access layer and kept in the ASGI scope under one
key. Connexion's router works on a shallow copy of the scope; the copy holds the same
Exchange, so what a layer inside the router writes here, a layer outside it reads.
Every field says which layer writes it; a layer reads only what the chain says the layers
before it give (chain.LAYERS, checked when the app is built).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from starlette.types import Scope

from app.core.errors import StoreUnavailable
from app.core.keys import KeyCheck
from app.core.services import Services
from app.core.storage.records import ApiKey

if TYPE_CHECKING:  # routing's layer writes the operation here
    from app.web.longpoll import FeedWaits
    from app.web.routing import Operation

EXCHANGE = "petstore.exchange"  # the one scope key of ours


@dataclass(slots=True, eq=False)
class Exchange:
    """What the layers learn of one request, and the headers they decide for its answer."""

    # The access layer: the request's id, echoed on the answer and on every log line.
    request_id: str
    # Headers decided for the answer, whoever answers it: the request id (access), the
    # quotas' (caller), Deprecation and Sunset (routed). The errors layer writes
    # them on the response's start, before the response is checked against the document.
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    # The caller layer: what the request's one bearer token opens (None: no token), or
    # why the store could not say.
    caller: KeyCheck | None = None
    caller_error: StoreUnavailable | None = None
    # The operation the request was found to be: by Connexion's router (the routing layer),
    # or by the kept answers' layer, which replays an answer before it.
    operation: Operation | None = None
    # The access layer: the feed's waiting requests of the app serving the request, for
    # the feed's handler (app.web.longpoll.FeedWaits).
    waits: FeedWaits | None = None
    # The access layer: the services of the app serving the request, for its handler
    # (app.web.handlers.services): PetstoreApp.services as it is when the request comes.
    services: Services | None = None
    # The answer's status, as the errors layer saw it go out (500 until then).
    status: int = 500
    # Which fast layer answered (chain.FAST): "kept" (a kept answer replayed); "console"
    # for the console's pages (D35); None for the long way. The access line says it.
    answered_by: str | None = None

    @property
    def key(self) -> ApiKey | None:
        """The valid key of the request, if it has one."""
        return self.caller.key if self.caller is not None else None

    def decide(self, headers: list[tuple[bytes, bytes]]) -> None:
        """Ask for headers on the answer (see headers)."""
        self.headers.extend(headers)


def add_missing(headers: Any, extra: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """headers with those of extra it does not have yet."""
    present = {name for name, _ in headers}
    return [*headers, *((name, value) for name, value in extra if name not in present)]


def exchange(scope: Scope) -> Exchange:
    """The request's Exchange (the access layer, first of ours, made it)."""
    found: Exchange = scope[EXCHANGE]
    return found


def exchange_or_none(scope: Scope) -> Exchange | None:
    """The request's Exchange, for code that may also run outside the chain (errors)."""
    found: Any = scope.get(EXCHANGE)
    return found if isinstance(found, Exchange) else None
