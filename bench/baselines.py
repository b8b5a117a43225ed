"""The two baselines `make bench` measures the service against, serving the same orders
from memory with the same key check (the SHA-256 digest of the bearer token looked up
among the stored digests):

- flask_app: what a user would write by hand: plain Flask under gunicorn's sync worker,
  encoding with the standard json module on every request.
- asgi_app: a raw ASGI callable returning pre-encoded bytes under the same uvicorn worker
  as the service: the ceiling for Python here.

Both read the orders and key digests once, from the SQLite file in PETSTORE_DATABASE.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from typing import Any

from flask import Flask, Response, request

from app.config import Settings
from app.storage import open_store

LIST = "/v1/store/orders"
UNAUTHORIZED = json.dumps({"code": "invalid_api_key", "message": "Unknown key.",
                           "status": 401}).encode()


def _load() -> tuple[list[dict[str, Any]], set[str]]:
    path = os.environ["PETSTORE_DATABASE"]
    orders = open_store(Settings(database=path)).list_orders()
    with sqlite3.connect(path) as db:
        digests = {row[0] for row in db.execute("SELECT digest FROM api_keys")}
    return orders, digests


ORDERS, DIGESTS = _load()


def _valid(authorization: str | None) -> bool:
    scheme, _, token = (authorization or "").partition(" ")
    return (scheme.lower() == "bearer"
            and hashlib.sha256(token.strip().encode()).hexdigest() in DIGESTS)


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
