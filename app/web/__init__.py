"""The HTTP wing: create_app() builds the Connexion app over the core and wires its parts.

The request path, outermost first (MiddlewarePosition names where Connexion puts each):

    CORS (cors.py) -> Connexion's server errors -> paced bodies (encoding.py)
      -> request id + access log (access.py) -> gzip (encoding.py) -> quotas (ratelimit.py)
      -> the feed's long polling (longpoll.py) -> kept answers of repeated reads
      (repeats.py) -> Connexion's exceptions -> plainly valid writes (early_writes.py)
      -> Connexion's document server and routing -> deprecation
      -> keyring (security.py) -> RoutedOnly (routing.py) -> Connexion's security, request
      and response validation -> decided headers (access.py) -> 304 (conditional.py)
      -> the writes, without Flask (direct.py) -> handlers/ -> app.core
      -> Connexion's context -> the bridge (bridge.py) -> Flask -> handlers/ -> app.core

Every reach into Connexion's internals is in connexion_internals.py.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from typing import Any

from connexion import FlaskApp
from connexion.middleware import MiddlewarePosition
from connexion.options import SwaggerUIOptions
from connexion.utils import get_function_from_name

from app.core.config import Settings
from app.core.logs import configure_logging
from app.core.quotas.counters import Quotas
from app.core.quotas.plans import anonymous_plan, load_plans
from app.core.services import Services, open_services
from app.web import connexion_internals as internals
from app.web import early_writes
from app.web.access import AccessLog, DecidedHeaders
from app.web.bodies import BodyLimit
from app.web.bridge import WORKERS, HandlerThreads, WSGIBridge
from app.web.conditional import LIST_OPERATION, AnswerCache, Answers, Revalidation
from app.web.cors import Cors, CorsPolicy
from app.web.deliverer import Deliverer
from app.web.deprecation import Deprecations, retirements
from app.web.direct import DirectOperations, is_direct
from app.web.early_writes import EarlyWrites
from app.web.encoding import Compression, OrjsonJsonifier, PacedBodies
from app.web.errors import register_error_handlers, server_error_handler
from app.web.handlers import SERVICES
from app.web.longpoll import LongPoll, RevisionWatch
from app.web.ratelimit import RateLimitMiddleware
from app.web.repeats import RepeatedReads
from app.web.routing import (
    APIS,
    OPENAPI_DIR,
    OPS,
    V1,
    V2,
    RoutedOnly,
    TagResolver,
    header_parameters,
    operations,
)
from app.web.security import KeyringForRequests

API_SPEC = V1.document  # the document that declares the plans (x-plans)
# What Connexion serves of each contract besides its operations: the document and its UI.
DOCUMENT_PATHS = tuple(f"{api.base_path}{served}" for api in APIS if api.metered
                       for served in ("/openapi.json", "/ui"))
# No quota and no rate-limit headers on the documents, their UIs and the operations
# endpoints (DESIGN.md D9).
UNMETERED_PREFIXES = (*DOCUMENT_PATHS,
                      "/healthz", "/readyz", "/metrics")


# The GETs whose answers AnswerCache keeps per revision of the orders and serves again
# without a handler thread: v2's pages and orders, and v1's list (which its handler reads
# from the list cache; a list too large for AnswerCache still goes to the handler).
CACHED_ANSWERS = frozenset({f"{V2.handlers}.orders.list_orders",
                            f"{V2.handlers}.orders.get_order", LIST_OPERATION})


def _operations() -> dict[str, tuple[str, dict[str, Any]]]:
    """Resolved operation id -> (path template, the operation's definition), for the
    access log and the deprecation signals."""
    return {operation.id: (operation.template, operation.definition)
            for operation in operations()}


def create_app(settings: Settings | None = None) -> FlaskApp:
    """Build the service: the OpenAPI document routed to the handlers, over the store the
    settings name. Tests pass their own Settings; wsgi.py reads them from the environment."""
    settings = settings or Settings.from_env()
    configure_logging(settings)
    services: Services = open_services(settings)

    middlewares = internals.strict_middlewares(server_error_handler)
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:
        middlewares.insert(0, functools.partial(Cors, origins=origins,
                                                policy=CorsPolicy.of_documents()))
    # One watch of the revision per worker: the feed's long polling and the webhooks'
    # deliverer (D28) wake on the same commit signal.
    watch = RevisionWatch(services.store)
    deliverer = Deliverer(services.store, settings, watch) if settings.webhooks_enabled \
        else None

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        """The deliverer runs on the worker's event loop from its start to its end."""
        if deliverer is not None:
            deliverer.start()
        try:
            yield
        finally:
            if deliverer is not None:
                await deliverer.stop()

    app = FlaskApp(
        __name__,
        specification_dir=OPENAPI_DIR,
        middlewares=middlewares,
        lifespan=lifespan,
        # FlaskApp's default indents, which forces the pure-Python encoder.
        jsonifier=OrjsonJsonifier(),
    )
    internals.strict_flask_routes(app)
    # One trip to a handler thread per response, in place of a2wsgi's several (bridge.py);
    # the writes answered without Flask (direct.py) take their turns in the same threads.
    threads = HandlerThreads(WORKERS, "handler")
    internals.install_bridge(app, functools.partial(WSGIBridge, threads=threads))
    app.app.extensions[SERVICES] = services
    for api in APIS:
        if api is OPS:
            # D16: the operations endpoints sit outside the contracts, at the server's root.
            app.add_api(api.document, base_path=api.base_path,
                        resolver=TagResolver(api.handlers),
                        validate_responses=settings.validate_responses,
                        swagger_ui_options=SwaggerUIOptions(serve_spec=False,
                                                            swagger_ui=False))
            continue
        app.add_api(
            api.document,
            base_path=api.base_path,
            resolver=TagResolver(api.handlers),
            uri_parser_class=internals.StrictURIParser,
            security_map=internals.SECURITY_MAP,
            validator_map=internals.VALIDATOR_MAP,
            validate_responses=settings.validate_responses,
            strict_validation=api.strict,
        )
    register_error_handlers(app)
    internals.prepare_operations(app, served_elsewhere=is_direct)
    operations = _operations()
    direct = {op: handler for op in operations
              if is_direct(handler := get_function_from_name(op))}
    store = services.store
    app.add_middleware(PacedBodies, position=MiddlewarePosition.BEFORE_EXCEPTION)
    app.add_middleware(AccessLog, position=MiddlewarePosition.BEFORE_EXCEPTION,
                       templates={op: path for op, (path, _) in operations.items()},
                       documents=DOCUMENT_PATHS)
    if settings.gzip_level:
        app.add_middleware(Compression, position=MiddlewarePosition.BEFORE_EXCEPTION,
                           level=settings.gzip_level, max_bytes=settings.list_cache_bytes)
    if settings.ratelimit_enabled:
        # Built here, not at the first request as Connexion builds its middlewares, so that
        # a setting they refuse stops the worker at start, naming the setting.
        plans = load_plans(OPENAPI_DIR / API_SPEC)
        anonymous_plan(settings, plans)
        app.add_middleware(
            RateLimitMiddleware,
            position=MiddlewarePosition.BEFORE_EXCEPTION,
            settings=settings,
            store=store,
            keyring=services.keyring,
            plans=plans,
            quotas=Quotas(settings),
            exempt_prefixes=UNMETERED_PREFIXES,
        )
    # Inside the quotas, so that a waiting request counts once, when it arrives.
    app.add_middleware(LongPoll, position=MiddlewarePosition.BEFORE_EXCEPTION, store=store,
                       path=f"{V2.base_path}/store/order-changes",
                       max_waiting=settings.feed_max_waiting, watch=watch)
    retired = retirements({op: d for op, (_, d) in operations.items()})
    writes = frozenset(op for op, (_, d) in operations.items() if d.get("x-scope") == "write")
    answers = Answers(settings.page_cache_bytes)
    # Inside the quotas, whose check of the key it relies on (RepeatedReads).
    app.add_middleware(RepeatedReads, position=MiddlewarePosition.BEFORE_EXCEPTION,
                       store=store, answers=answers, headers=header_parameters(),
                       long_way=frozenset(retired) | writes)
    app.add_middleware(
        Deprecations, position=MiddlewarePosition.BEFORE_SECURITY,
        retired=retired,
    )
    if settings.validate_responses:
        app.add_middleware(DecidedHeaders, position=MiddlewarePosition.BEFORE_CONTEXT)
    # Inside DecidedHeaders, so that its 304s carry the decided headers when validated.
    app.add_middleware(Revalidation, position=MiddlewarePosition.BEFORE_CONTEXT, store=store)
    app.add_middleware(AnswerCache, position=MiddlewarePosition.BEFORE_CONTEXT, store=store,
                       operations=CACHED_ANSWERS, answers=answers)
    app.add_middleware(DirectOperations, position=MiddlewarePosition.BEFORE_CONTEXT,
                       handlers=direct, services=lambda: app.app.extensions[SERVICES],
                       threads=threads)
    if settings.ratelimit_enabled and not settings.validate_responses:
        # It relies on the quotas' check of the key, and answers unvalidated.
        internals.add_inside_exceptions(
            app, EarlyWrites, writes=early_writes.plans(direct, frozenset(retired)),
            services=lambda: app.app.extensions[SERVICES], threads=threads)
    app.add_middleware(BodyLimit, position=MiddlewarePosition.BEFORE_VALIDATION)
    app.add_middleware(KeyringForRequests, position=MiddlewarePosition.BEFORE_SECURITY,
                       keyring=services.keyring,
                       write_operations=writes)
    app.add_middleware(RoutedOnly, position=MiddlewarePosition.BEFORE_SECURITY,
                       base_paths=tuple(api.base_path for api in APIS))
    # After the last middleware placed by MiddlewarePosition.BEFORE_VALIDATION.
    internals.prepare_request_validation(app)

    return app
