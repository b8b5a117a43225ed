"""One module per OpenAPI tag; each function is the snake_case of an operationId.

Handlers are plain synchronous functions, framework-neutral: Connexion's AsyncApp runs them
in its thread pool (D42). They read the request through the helpers here, over Connexion's
context (`connexion.context.scope`: each use of `connexion.request` builds a new request
object, six of them a request when every helper did), reach the running app's Services
through the request's Exchange (the access layer puts there the services of the app
serving it: app.web.PetstoreApp.services), and answer with Connexion's responses: a
ConnexionResponse for bytes already encoded (never run through the jsonifier), a tuple for
a body the jsonifier encodes, no_content() for a 204 or a 304 (no body, no Content-Type,
no Content-Length).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from connexion.context import scope as current_scope
from connexion.lifecycle import ConnexionResponse
from starlette.datastructures import Headers, QueryParams

from app.core.services import Services
from app.web.exchange import Exchange, exchange


def request_exchange() -> Exchange:
    """The Exchange of the request being handled (the access layer made it)."""
    return exchange(current_scope)


def services() -> Services:
    """The running app's store, keyring and settings."""
    found = request_exchange().services
    assert found is not None, "the access layer gives every request its app's services"
    return found


def request_path() -> str:
    """The request's path below the app's root path, as a WSGI app's PATH_INFO was: the
    path Location and Link headers are made of (the ASGI scope's path includes the root
    path)."""
    path: str = current_scope["path"]
    root = current_scope.get("root_path", "")
    return path[len(root):] if root and path.startswith(root) else path


def header(name: str) -> str | None:
    """A request header: every value of the name, joined by commas (as PEP 3333 gave them
    to the WSGI handlers before D42), or None."""
    values = Headers(scope=current_scope).getlist(name)
    return ",".join(values) if values else None


def request_json(body: Any) -> Any:
    """The request's body, which validation has found JSON, or None when there is none.
    Connexion hands it over parsed where the request said a JSON Content-Type, and as bytes
    where it said none (validation then took the document's application/json)."""
    if isinstance(body, bytes):
        return json.loads(body) if body.strip() else None
    return body


def json_response(status: int, body: bytes,
                  headers: dict[str, str] | None = None) -> ConnexionResponse:
    """An application/json answer of body, already encoded."""
    return ConnexionResponse(status_code=status, content_type="application/json", body=body,
                             headers=dict(headers or {}))


def no_content(status: int = 204, headers: dict[str, str] | None = None) -> ConnexionResponse:
    """A 204 (or 304) with neither body nor Content-Type nor Content-Length. (`NoContent`
    in a tuple would take the operation's JSON type as its Content-Type.)"""
    return ConnexionResponse(status_code=status, headers=dict(headers or {}))


def next_link(cursor: str) -> str:
    """The Link header of a list's next page: this request's query with the next cursor."""
    pairs = [(k, v) for k, v in QueryParams(current_scope["query_string"]).multi_items()
             if k != "cursor"]
    target = f"{request_path()}?{urlencode([*pairs, ('cursor', cursor)], safe=',')}"
    return f'<{target}>; rel="next"'
