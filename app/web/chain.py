"""The request path, declared once: every layer a request passes, in request order.

LAYERS is the whole chain, Connexion's own layers included, outermost first: the list
create_app hands Connexion as its middleware stack, with nothing added elsewhere. Each
layer says what it does, what it relies on from the layers before it (needs) and what it
gives the layers after it (gives). build() refuses a chain whose order breaks one of
these, naming it.

What one layer hands the next is the request's Exchange (exchange.py), not loose scope
keys. The settings only leave a layer out (CORS without origins); they never change
which layer answers a request. An API request's answer comes from one of these places
(ANSWER_SITES below), whatever the settings (and the console's pages, D35, branch off in
the access layer for their own Flask app: console.py):

- kept answers: a GET of the same shape as one the one way answered, replayed at the same
  revision before Connexion's routing (answer_cache.py);
- the handlers, plain `def` functions that Connexion's AsyncApp runs in its thread pool
  (D42), every write among them: the one way;
- the errors layer, Connexion's exception middleware (answering.py): every layer inside it
  refuses a request by raising (the quotas' 429 and 503, the routing layer's 404 and
  410, the bearer check's 401 and 403, validation's 413 and 400, the handlers' domain
  exceptions), and errors.py's handlers make the Error body;
- CORS preflights, answered by the CORS layer (a refused one with errors.py's Error).

Only the server errors layer's last-resort 500 (errors.py's too) is made elsewhere. All
but the CORS preflights and that 500 pass the errors layer (answering.py) on their way
out, so they get the same decided headers (the request id, the rate limits, deprecation's,
which the layers that decide them put on the Exchange before they pass on or raise) and,
where responses are validated, the same check against the document.
docs/house/request-path.md walks the chain with a request.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from connexion.middleware.context import ContextMiddleware
from connexion.middleware.lifespan import LifespanMiddleware
from connexion.middleware.security import SecurityMiddleware
from connexion.middleware.server_error import ServerErrorMiddleware

from app.core.config import Settings
from app.core.quotas.counters import Quotas
from app.core.quotas.plans import Plan
from app.core.services import Services
from app.web.access import AccessLog
from app.web.answer_cache import AnswerCache
from app.web.answering import Answering
from app.web.caller import Caller
from app.web.connexion_internals import (
    PreparedRequestValidationMiddleware,
    SpecificFirstSwaggerUIMiddleware,
)
from app.web.console import PREFIX as CONSOLE
from app.web.cors import Cors, CorsPolicy
from app.web.deprecation import Retirement
from app.web.errors import server_error_handler
from app.web.longpoll import FeedWaits
from app.web.routed import Routing
from app.web.routing import APIS, header_parameters, operations

# What a layer gives the layers after it.
EXCHANGE = "the request's Exchange, with its request id"
CALLER = "the caller's key, looked up from its bearer token"
COUNTED = "the request counted against its caller's quota"
ERRORS = "exceptions answered as Error bodies"
OPERATION = "the request's operation, in its Exchange"
SECURED = "the bearer check passed"
VALIDATED = "the request's parameters and body validated"


@dataclass(frozen=True)
class Parts:
    """What the layers of one service are built from (create_app makes them once)."""

    settings: Settings
    services: Services
    current: Callable[[], Services]  # the app's services now, for the handlers (access)
    waits: FeedWaits  # the feed's waiting requests (their watch the deliverer's too)
    kept: frozenset[str]  # the resolved ids of the operations whose handler is @kept
    retired: dict[str, Retirement]  # the operations the documents deprecate (D13)
    plans: dict[str, Plan]  # the plans of the documents' x-plans (D11)
    documents: tuple[str, ...]  # the documents' and UIs' paths (no quota, D9)
    pages: Callable[[], Any]  # the console's pages (D35), an ASGI app, read at each call


@dataclass(frozen=True)
class Layer:
    """One layer of the chain."""

    name: str
    does: str
    # The middleware (a class or a functools.partial of one) Connexion builds around the
    # layers inside it; None where the settings leave the layer out.
    build: Callable[[Parts], Any]
    needs: tuple[str, ...] = ()
    gives: tuple[str, ...] = ()


class ChainError(ValueError):
    """A chain whose order breaks what a layer relies on."""


def _with(middleware: Any, **options: Any) -> Callable[[Parts], Any]:
    return lambda _: functools.partial(middleware, **options) if options else middleware


def _cors(parts: Parts) -> Any:
    origins = [o.strip() for o in parts.settings.cors_origins.split(",") if o.strip()]
    return (functools.partial(Cors, origins=origins, policy=CorsPolicy.of_documents())
            if origins else None)


def _access(parts: Parts) -> Any:
    return functools.partial(AccessLog, gzip_level=parts.settings.gzip_level,
                             gzip_kept_bytes=parts.settings.list_cache_bytes,
                             documents=(*parts.documents, CONSOLE), services=parts.current,
                             pages=parts.pages, waits=parts.waits)


def _caller(parts: Parts) -> Any:
    return functools.partial(
        Caller, settings=parts.settings, store=parts.services.store,
        keyring=parts.services.keyring, plans=parts.plans,
        quotas=Quotas(parts.settings) if parts.settings.ratelimit_enabled else None,
        # No quota and no rate-limit headers on the documents, their UIs and the
        # operations endpoints (D9).
        exempt_prefixes=(*parts.documents, "/healthz", "/readyz", "/metrics"))


def _writes() -> frozenset[str]:
    return frozenset(operation.id for operation in operations() if operation.writes)


def _kept_answers(parts: Parts) -> Any:
    # Neither a deprecated operation's answers (its sunset, D13) nor a write's are kept.
    get_headers = frozenset(name for operation in operations() if operation.method == "GET"
                            for name in header_parameters()[operation.id])
    return functools.partial(AnswerCache, store=parts.services.store,
                             kept=parts.kept - frozenset(parts.retired) - _writes(),
                             headers=get_headers, max_bytes=parts.settings.page_cache_bytes)


LAYERS: tuple[Layer, ...] = (
    Layer("cors", "CORS for the origins of PETSTORE_CORS_ORIGINS, preflights answered here",
          _cors),
    Layer("server errors", "Connexion's last resort: a 500 Error body for anything raised "
          "outside the exception layer", _with(ServerErrorMiddleware,
                                               handler=server_error_handler)),
    Layer("access", "the request id and its Exchange; one access line per request; the "
          "API's answers out through the encoding: gzip for clients that accept it (the "
          "list's kept once per change), large bodies in slices the client can take; the "
          "owner's pages at /console/ (D35) branch off here to their own Flask app, with "
          "the security headers: no key, no quota, errors as pages, never compressed",
          _access, gives=(EXCHANGE,)),
    Layer("errors", "Connexion's exception middleware: whatever a layer inside it raises, "
          "a refusal or a fault, becomes an Error body (errors.py); every answer from "
          "inside it gets the decided headers, and is checked against the document where "
          "responses are validated", _with(Answering), needs=(EXCHANGE,), gives=(ERRORS,)),
    Layer("caller", "the bearer token looked up once; the request counted against its "
          "caller's quota: 429 over it, bans, the rate-limit headers (D8-D12)", _caller,
          needs=(EXCHANGE, ERRORS), gives=(CALLER, COUNTED)),
    Layer("kept answers", "a GET of a shape the one way answered, replayed at the same "
          "revision; the one way's answers to @kept reads kept", _kept_answers,
          needs=(CALLER, COUNTED)),
    Layer("documents", "the documents and Swagger UI", _with(SpecificFirstSwaggerUIMiddleware)),
    Layer("routing", "Connexion's router, strict about integers and slashes (D7); then the "
          "operation into the Exchange, 404 unrouted, 400 two Authorization headers (D12), "
          "Deprecation and Sunset, 410 past the sunset (D13)",
          lambda parts: functools.partial(
              Routing, base_paths=tuple(api.base_path for api in APIS), retired=parts.retired),
          needs=(EXCHANGE, ERRORS), gives=(OPERATION,)),
    Layer("security", "Connexion's bearer check over the caller's key (security.py)",
          _with(SecurityMiddleware), needs=(CALLER, OPERATION, ERRORS), gives=(SECURED,)),
    Layer("validation", "the body read within 16 KiB, UTF-8 where JSON (D22), then "
          "Connexion's request validation, its validators built once",
          _with(PreparedRequestValidationMiddleware), needs=(ERRORS,), gives=(VALIDATED,)),
    Layer("lifespan", "Connexion's lifespan: the deliverer starts and stops with the worker",
          _with(LifespanMiddleware)),
    Layer("context", "Connexion's context (connexion.request) for the handlers, then the "
          "AsyncApp's router to them (D42)", _with(ContextMiddleware),
          needs=(SECURED, VALIDATED)),
)


# The layers that only answer sooner what the layers after them would answer: the served
# chain without them is the long way, which tests/web/test_fast_answers.py holds every
# fast answer to, for every operation of the documents.
FAST = frozenset({"kept answers"})
LONG_WAY = tuple(layer for layer in LAYERS if layer.name not in FAST)


@dataclass(frozen=True)
class AnswerSite:
    """One place an answer is written (its status line and headers made), and the modules
    of app/web that write it; tests/web/test_chain.py finds every module that writes one
    and holds this list to them."""

    name: str
    what: str
    modules: tuple[str, ...]  # paths under app/web; () where Connexion writes it
    api: bool = True  # False: beside the API (the console, the documents, the server)


ANSWER_SITES: tuple[AnswerSite, ...] = (
    AnswerSite("handler", "the operation's handler, reached one way: routing, security, "
               "validation, then the AsyncApp's thread pool", ("handlers/", "conditional.py")),
    AnswerSite("kept answer", "a GET replayed from the answer the one way gave a request "
               "of the same shape, at the same revision", ("answer_cache.py",)),
    AnswerSite("error", "the Error body of anything raised, whichever layer raised it (the "
               "quotas' 429 and 503 and the routing layer's 404 and 410 among them): the "
               "errors layer's, and the server errors layer's last-resort 500",
               ("errors.py",)),
    AnswerSite("CORS preflight", "an OPTIONS preflight from an allowed origin, or its "
               "refusal", ("cors.py",)),
    AnswerSite("console page", "the owner's pages (D35), from their own Flask app, and the 500 "
               "page of a failure it did not answer", ("console.py",), api=False),
    AnswerSite("documents", "the documents and Swagger UI, by Connexion's SwaggerUI "
               "middleware", (), api=False),
    AnswerSite("server refusal", "431 for a request head over PETSTORE_HEAD_MAX_BYTES, "
               "before the app (the worker)", ("worker.py",), api=False),
)


def check(layers: Iterable[Layer]) -> None:
    """Refuse a chain in which a layer comes before what it relies on."""
    given: set[str] = set()
    for layer in layers:
        for need in layer.needs:
            if need not in given:
                raise ChainError(f"the {layer.name} layer relies on {need}, which no layer "
                                 "before it gives")
        given.update(layer.gives)


def build(parts: Parts, layers: Iterable[Layer] = LAYERS) -> list[Any]:
    """The middleware stack of the chain, outermost first, for the layers the settings
    have; ChainError where their order breaks a dependency."""
    built = [(layer, layer.build(parts)) for layer in layers]
    present = [(layer, middleware) for layer, middleware in built if middleware is not None]
    check(layer for layer, _ in present)
    return [middleware for _, middleware in present]
