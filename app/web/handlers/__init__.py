"""One module per OpenAPI tag; each function is the snake_case of an operationId."""

from __future__ import annotations

import json
from typing import Any
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


def header(name: str) -> str | None:
    """A request header as a WSGI app sees it: every value of the name, joined by commas
    (PEP 3333), or None."""
    values = flask.request.headers.getlist(name)
    return ",".join(values) if values else None


def request_json(body: Any) -> Any:
    """The request's body, which validation has found JSON, or None when there is none.
    Connexion hands it over parsed where the request said a JSON Content-Type, and as bytes
    where it said none (validation then took the document's application/json)."""
    if isinstance(body, bytes):
        return json.loads(body) if body.strip() else None
    return body


def json_response(status: int, body: bytes,
                  headers: dict[str, str] | None = None) -> flask.Response:
    """An application/json answer of body, already encoded."""
    return flask.Response(body, status, mimetype="application/json", headers=headers)


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
