"""The Pet Store Orders service: create_app() builds the Connexion app and wires its parts."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from connexion import FlaskApp
from connexion.middleware import MiddlewarePosition
from connexion.middleware.server_error import ServerErrorMiddleware
from connexion.options import SwaggerUIOptions
from starlette.types import ASGIApp, Receive, Scope, Send

from app import access, deprecation, errors, quotas, routing
from app.auth import SCOPE_KEY, SECURITY_MAP, Keyring
from app.bridge import WSGIBridge
from app.conditional import Revalidation
from app.config import Settings
from app.encoding import Compression, OrjsonJsonifier, PacedBodies
from app.listing import ListCache
from app.storage import Store, open_store
from app.version import __version__ as __version__

log = logging.getLogger(__name__)

OPENAPI_DIR = Path(__file__).resolve().parent.parent / "openapi"
API_SPEC = "petstore-v1.yaml"
OPS_SPEC = "ops.yaml"
BASE_PATH = "/v1"
# No quota and no rate-limit headers on the document, its UI and the operations endpoints
# (DESIGN.md D9).
UNMETERED_PREFIXES = (f"{BASE_PATH}/openapi.json", f"{BASE_PATH}/ui", "/healthz", "/readyz",
                      "/metrics")


@dataclass(frozen=True)
class Services:
    """What the handlers and middleware share: settings, the store and the keyring."""

    settings: Settings
    store: Store
    keyring: Keyring
    lists: ListCache
    # Checks the quota storage for /readyz; None where its failure cannot make the
    # service unready (quotas off, or falling back to process memory: D16).
    quota_probe: Callable[[], bool] | None = None


class RequestServices:
    """Hands the services to code that only sees the ASGI scope (the bearer-info function),
    and refuses a request with several Authorization headers (DESIGN.md D12) before the
    security check reads only the first of them."""

    def __init__(self, app: ASGIApp, services: Services) -> None:
        self.app = app
        self.services = services

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SCOPE_KEY] = self.services.keyring
            authorizations = [k for k, _ in scope["headers"] if k.lower() == b"authorization"]
            if len(authorizations) > 1:
                raise errors.DuplicateAuthorization()
        await self.app(scope, receive, send)


def _operations() -> dict[str, tuple[str, dict[str, object]]]:
    """Resolved operation id -> (path template, the operation's definition), for the
    access log and the deprecation signals."""
    import yaml

    resolver = routing.TagResolver()
    operations = {}
    for name, base in ((API_SPEC, BASE_PATH), (OPS_SPEC, "")):
        spec = yaml.safe_load((OPENAPI_DIR / name).read_text())
        for path, item in spec["paths"].items():
            for operation in item.values():
                if isinstance(operation, dict) and "operationId" in operation:
                    resolved = resolver.handler_for(operation)
                    operations[resolved] = (base + path, operation)
    return operations


def create_app(settings: Settings | None = None) -> FlaskApp:
    """Build the service: the OpenAPI document routed to the handlers, over the store the
    settings name. Tests pass their own Settings; wsgi.py reads them from the environment."""
    settings = settings or Settings.from_env()
    access.configure_logging(settings)
    store = open_store(settings, migrate=False)
    try:
        store.migrate()
    except errors.StoreUnavailable as exc:
        # A worker that starts while its database is down (restarted by gunicorn during an
        # outage, say) serves 503s until it answers; the PostgreSQL store migrates then.
        log.warning("the database does not answer at start (%s); requests get 503 until "
                    "it does", exc.message)
    fails_closed = settings.ratelimit_enabled and settings.ratelimit_on_error == "closed"
    services = Services(settings, store, Keyring(store, settings.key_cache_seconds),
                        ListCache(settings.list_cache_bytes),
                        quotas.storage_probe(settings) if fails_closed else None)

    middlewares = [
        functools.partial(ServerErrorMiddleware, handler=errors.server_error_handler)
        if m is ServerErrorMiddleware
        else m
        for m in routing.strict_middlewares()
    ]
    origins = [o.strip() for o in settings.cors_origins.split(",") if o.strip()]
    if origins:
        middlewares.insert(0, functools.partial(access.Cors, origins=origins))
    app = FlaskApp(
        __name__,
        specification_dir=OPENAPI_DIR,
        middlewares=middlewares,
        # FlaskApp's default indents, which forces the pure-Python encoder.
        jsonifier=OrjsonJsonifier(),
    )
    app.app.url_map.converters["int"] = routing.FlaskSegmentConverter
    # One trip to a handler thread per response, in place of a2wsgi's several (bridge.py).
    app._middleware_app.asgi_app = WSGIBridge(app.app.wsgi_app)
    app.app.extensions["petstore"] = services
    app.add_api(
        API_SPEC,
        resolver=routing.TagResolver(),
        uri_parser_class=routing.StrictURIParser,
        security_map=SECURITY_MAP,
        validator_map=routing.VALIDATOR_MAP,
        validate_responses=settings.validate_responses,
        strict_validation=False,  # D6: unknown query parameters are ignored in v1
    )
    # D16: the operations endpoints sit outside the v1 contract, at the server's root.
    app.add_api(
        OPS_SPEC,
        base_path="",
        resolver=routing.TagResolver(),
        validate_responses=settings.validate_responses,
        swagger_ui_options=SwaggerUIOptions(serve_spec=False, swagger_ui=False),
    )
    errors.register_error_handlers(app)
    routing.prepare_operations(app)
    operations = _operations()
    app.add_middleware(PacedBodies, position=MiddlewarePosition.BEFORE_EXCEPTION)
    app.add_middleware(access.AccessLog, position=MiddlewarePosition.BEFORE_EXCEPTION,
                       templates={op: path for op, (path, _) in operations.items()})
    if settings.gzip_level:
        app.add_middleware(Compression, position=MiddlewarePosition.BEFORE_EXCEPTION,
                           level=settings.gzip_level, max_bytes=settings.list_cache_bytes)
    if settings.ratelimit_enabled:
        app.add_middleware(
            quotas.RateLimitMiddleware,
            position=MiddlewarePosition.BEFORE_EXCEPTION,
            settings=settings,
            store=store,
            keyring=services.keyring,
            plans=quotas.load_plans(OPENAPI_DIR / API_SPEC),
            quotas=quotas.Quotas(settings),
            exempt_prefixes=UNMETERED_PREFIXES,
        )
    app.add_middleware(
        deprecation.Deprecations, position=MiddlewarePosition.BEFORE_SECURITY,
        retired=deprecation.retirements({op: d for op, (_, d) in operations.items()}),
    )
    if settings.validate_responses:
        app.add_middleware(access.DecidedHeaders, position=MiddlewarePosition.BEFORE_CONTEXT)
    # Inside DecidedHeaders, so that its 304s carry the decided headers when validated.
    app.add_middleware(Revalidation, position=MiddlewarePosition.BEFORE_CONTEXT, store=store)
    app.add_middleware(
        RequestServices, position=MiddlewarePosition.BEFORE_SECURITY, services=services
    )
    app.add_middleware(routing.RoutedOnly, position=MiddlewarePosition.BEFORE_SECURITY,
                       base_paths=(BASE_PATH, ""))

    return app
