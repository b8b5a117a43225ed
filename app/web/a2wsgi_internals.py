"""Every reach into a2wsgi's internals, in one place (a2wsgi 1.10, pinned in pyproject.toml
to the range the tests have passed on: an upgrade is a conscious step that starts by reading
this module).

- The WSGI environ and the request body. Connexion's FlaskApp serves Flask through a2wsgi's
  WSGIMiddleware; bridge.WSGIBridge takes its place to change how a response comes back (one
  trip to a thread, not three), and keeps how a request goes in: a2wsgi.wsgi's build_environ
  and Body, which reads the body from the handler thread by waiting on the event loop.
  a2wsgi exports neither (its public names are WSGIMiddleware and ASGIMiddleware).
  (wsgi_environ)
"""

from __future__ import annotations

import asyncio
from typing import Any

from a2wsgi.wsgi import Body, build_environ
from starlette.types import Receive, Scope


def wsgi_environ(scope: Scope, receive: Receive,
                 loop: asyncio.AbstractEventLoop) -> dict[str, Any]:
    """The WSGI environ a2wsgi's WSGIMiddleware would hand the app for this request, its
    body read on demand from the thread the app runs in."""
    environ: dict[str, Any] = build_environ(scope, Body(loop, receive))  # type: ignore[arg-type, assignment]
    return environ
