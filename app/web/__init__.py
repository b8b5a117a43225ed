"""The HTTP wing: create_app() builds the Connexion app over the core and wires its parts.

The API is served by Connexion's AsyncApp (D42): its plain `def` handlers run in its thread
pool, behind one router, with no bridge. The console (D35) is a Flask app of its own beside
it, which the access layer hands its requests through a2wsgi's public WSGIMiddleware.

The request path is declared once, in request order, in chain.py (LAYERS); what a
request carries from layer to layer is its Exchange (exchange.py). Every reach into
Connexion's internals is in connexion_internals.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
from collections.abc import AsyncIterator
from typing import Any

import flask
from a2wsgi import WSGIMiddleware
from connexion import AsyncApp
from connexion.options import SwaggerUIOptions
from connexion.utils import get_function_from_name

from app.console.pages import register as register_console
from app.core.config import Settings
from app.core.logs import configure_logging
from app.core.quotas.plans import anonymous_plan, plans_of
from app.core.services import Services, open_services
from app.core.users import accounts
from app.web import chain
from app.web import connexion_internals as internals
from app.web.conditional import is_kept
from app.web.deliverer import Deliverer
from app.web.deprecation import retirements
from app.web.encoding import OrjsonJsonifier
from app.web.errors import register_error_handlers
from app.web.longpoll import FeedWaits, RevisionWatch
from app.web.routing import APIS, OPENAPI_DIR, OPS, V1, TagResolver, documents, operations
from app.web.security import SECURITY_MAP

# What Connexion serves of each contract besides its operations: the document and its UI.
DOCUMENT_PATHS = tuple(f"{api.base_path}{served}" for api in APIS if api.metered
                       for served in ("/openapi.json", "/ui"))


# Threads of the console's bridge, as a2wsgi's default and the bridge FlaskApp had.
CONSOLE_THREADS = 10


class PetstoreApp(AsyncApp):
    """The service as create_app builds it: Connexion's AsyncApp serving the API, with what
    it runs on kept where tests and tools can reach it.

    services: the Services the handlers are given, read afresh for every request (the
    access layer puts them in the request's Exchange), so that a test may swap in a
    wrapped store after the app is built (tests/support.py wrap_store).
    console: the console's own Flask app (D35), whose url_map and view_functions are the
    console's pages."""

    services: Services
    console: flask.Flask


def create_app(settings: Settings | None = None, *,
               layers: tuple[chain.Layer, ...] = chain.LAYERS) -> PetstoreApp:
    """Build the service: the OpenAPI documents routed to the handlers through the chain
    of chain.py, over the store the settings name. Tests pass their own Settings; wsgi.py
    reads them from the environment. layers is the served chain; only the test that holds
    the fast answers to the long way's passes another (chain.LONG_WAY)."""
    settings = settings or Settings.from_env()
    configure_logging(settings)
    services: Services = open_services(settings)
    # One watch of the revision per worker: the feed's long polling and the webhooks'
    # deliverer (D28) wake on the same commit signal.
    watch = RevisionWatch(services.store)
    deliverer = Deliverer(services.store, settings, watch) if settings.webhooks_enabled \
        else None

    @contextlib.asynccontextmanager
    async def lifespan(_: Any) -> AsyncIterator[None]:
        """The deliverer runs on the worker's event loop from its start to its end; the
        audit log's purge (D35) and the readiness checks (D41), in threads of their own,
        as long."""
        services.readiness.start()
        if deliverer is not None:
            deliverer.start()
        stop_purging = threading.Event()
        purging = threading.Thread(
            target=accounts.keep_audit_days, name="petstore-audit-purge",
            args=(services.store, settings.console_audit_days, stop_purging), daemon=True)
        purging.start()
        try:
            yield
        finally:
            services.readiness.stop()
            stop_purging.set()
            await asyncio.to_thread(purging.join, 5.0)
            if deliverer is not None:
                await deliverer.stop()

    # A setting the quotas refuse stops the worker at start, naming the setting, rather
    # than at the first request, when Connexion builds its middleware stack.
    read = dict(documents())  # each document parsed once per process (routing.documents)
    plans = plans_of(read[V1])
    anonymous_plan(settings, plans)
    handlers = {operation.id: get_function_from_name(operation.id)
                for operation in operations()}

    def pages() -> Any:
        """The console's pages (D35): its Flask app's, through a bridge of their own."""
        return console_pages

    def current() -> Services:
        """The app's services as they are now (PetstoreApp.services), for the handlers."""
        return app.services

    parts = chain.Parts(
        settings=settings, services=services, current=current,
        waits=FeedWaits(watch, settings.feed_max_waiting),
        kept=frozenset(op for op, handler in handlers.items() if is_kept(handler)),
        retired=retirements({operation.id: operation.definition
                             for operation in operations()}),
        plans=plans, documents=DOCUMENT_PATHS, pages=pages)
    app = PetstoreApp(
        __name__,
        specification_dir=OPENAPI_DIR,
        middlewares=chain.build(parts, layers),
        lifespan=lifespan,
        # Compact, as every body the handlers encode themselves (Connexion's default
        # indents).
        jsonifier=OrjsonJsonifier(),
    )
    app.services = services
    # The console's blueprint in a Flask app of its own; the access layer hands it its
    # requests past the API's layers (app/web/console.py).
    app.console = flask.Flask("app.console")
    register_console(app.console, services, plans)
    # (a2wsgi types the WSGI callable with its own Environ, not wsgiref's, which Flask uses)
    console_pages = WSGIMiddleware(app.console.wsgi_app,  # type: ignore[arg-type]
                                   workers=CONSOLE_THREADS)
    # The operations API (D16) at base path "" last: Connexion's router and the AsyncApp's
    # each try the APIs' mounts in the order added, and a mount at "" matches every path.
    for api in sorted(APIS, key=lambda api: api is OPS):
        if api is OPS:
            # D16: the operations endpoints sit outside the contracts, at the server's root.
            app.add_api(copy.deepcopy(read[api]), base_path=api.base_path,
                        resolver=TagResolver(api.handlers),
                        validate_responses=settings.validate_responses,
                        swagger_ui_options=SwaggerUIOptions(serve_spec=False,
                                                            swagger_ui=False))
            continue
        app.add_api(
            # The document as routing read it, not its file: Connexion would parse the file
            # again (with PyYAML's pure-Python parser, most of an app's building) and render
            # it through Jinja2 first, which a document of ours must not need. A copy, as
            # Connexion sets defaults in what it is given.
            copy.deepcopy(read[api]),
            base_path=api.base_path,
            resolver=TagResolver(api.handlers),
            uri_parser_class=internals.StrictURIParser,
            security_map=SECURITY_MAP,
            validator_map=internals.VALIDATOR_MAP,
            validate_responses=settings.validate_responses,
            strict_validation=api.strict,
        )
    register_error_handlers(app)
    return app
