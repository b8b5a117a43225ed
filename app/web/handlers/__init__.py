"""One module per OpenAPI tag; each function is the snake_case of an operationId."""

from __future__ import annotations

from urllib.parse import urlencode

import flask

from app.core.services import Services
from app.web.exchange import Exchange, exchange

SERVICES = "petstore"  # the key of the running app's Services in Flask's extensions


def services() -> Services:
    """The running app's store, keyring and settings."""
    services: Services = flask.current_app.extensions[SERVICES]
    return services


def request_exchange() -> Exchange:
    """The Exchange of the request being handled: the WSGI environ the bridge builds
    carries the request's ASGI scope (a2wsgi_internals.wsgi_environ)."""
    return exchange(flask.request.environ["asgi.scope"])


def no_content(status: int = 204, headers: dict[str, str] | None = None) -> flask.Response:
    """A 204 (or 304) with neither body nor Content-Type (Flask would label it text/html)."""
    response = flask.Response(status=status, headers=headers)
    del response.headers["Content-Type"]
    return response


def next_link(cursor: str) -> str:
    """The Link header of a list's next page: this request's query with the next cursor."""
    pairs = [(k, v) for k, v in flask.request.args.items(multi=True) if k != "cursor"]
    target = f"{flask.request.path}?{urlencode([*pairs, ('cursor', cursor)], safe=',')}"
    return f'<{target}>; rel="next"'
