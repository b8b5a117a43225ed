"""The two baselines `make bench` measures the service against, serving the same orders
from memory with the same key check (the SHA-256 digest of the bearer token looked up
among the stored digests):

- flask_app: what a user would write by hand: plain Flask under gunicorn's sync worker,
  encoding with the standard json module on every request.
- asgi_app: a raw ASGI callable returning pre-encoded bytes under the same uvicorn worker
  as the service: the ceiling for Python here.

Both read the orders once, and each key once, from the SQLite file in PETSTORE_DATABASE.
"""

from __future__ import annotations

import functools
import json
import os
from typing import Any

from flask import Flask, Response, request

from app.core.config import Settings
from app.core.keys import digest
from app.core.storage import open_store

LIST = "/v1/store/orders"
UNAUTHORIZED = json.dumps({"code": "invalid_api_key", "message": "Unknown key.",
                           "status": 401}).encode()


STORE = open_store(Settings(database=os.environ["PETSTORE_DATABASE"]))
ORDERS = STORE.list_orders()


@functools.lru_cache(maxsize=1024)
def _known(key_digest: str) -> bool:
    """Whether a digest is a stored key's; each looked up once, then from memory."""
    return STORE.find_key(key_digest) is not None


def _valid(authorization: str | None) -> bool:
    scheme, _, token = (authorization or "").partition(" ")
    return scheme.lower() == "bearer" and _known(digest(token.strip()))


flask_app = Flask(__name__)


@flask_app.get(LIST)
def list_orders() -> Response:
    if not _valid(request.headers.get("Authorization")):
        return Response(UNAUTHORIZED, 401, mimetype="application/json")
    return Response(json.dumps(ORDERS), 200, mimetype="application/json")


ENCODED = json.dumps(ORDERS, separators=(",", ":")).encode()


async def asgi_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    authorization = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
    status, body = (200, ENCODED) if _valid(authorization) else (401, UNAUTHORIZED)
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
