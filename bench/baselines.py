"""The baselines `make bench` measures the service against, serving the same orders from
memory with the same key check (the SHA-256 digest of the bearer token looked up among the
stored digests):

- flask_app: what a user would write by hand: plain Flask under gunicorn's sync worker,
  encoding with the standard json module on every request.
- asgi_app: a raw ASGI callable returning pre-encoded bytes under the same uvicorn worker
  as the service: the ceiling for Python here.
- fastapi_app: bare FastAPI, the framework users pick instead: async handlers and an
  `async def` key check, a pydantic Order response model, HTTPBearer; the list with a
  weak ETag and its 304, and v2's single order.
- fastapi_slowapi_app: the same with the duties the service has: slowapi counting a
  per-minute and a per-day quota per key in memory (with its rate-limit headers), and an
  access line per request (the logging module, to standard error).

All read the orders once, and each key once, from the SQLite file in PETSTORE_DATABASE.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import sys
import time
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi import Response as FastAPIResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from flask import Flask, Response, request
from pydantic import BaseModel
from slowapi import Limiter, _rate_limit_exceeded_handler
from slowapi.errors import RateLimitExceeded

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


class Order(BaseModel):
    id: int
    petId: int | None = None
    quantity: int | None = None
    shipDate: str | None = None
    complete: bool
    status: Literal["pending", "shipped", "cancelled"]


BY_ID = {order["id"]: order for order in ORDERS}
ETAG = f'W/"{hashlib.blake2b(ENCODED, digest_size=8).hexdigest()}"'
bearer = HTTPBearer(auto_error=False)


async def _checked(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> None:
    # async def, as FastAPI's docs teach for code that does not block: a key already seen
    # is a dict read (a plain def would send every request through a worker thread, issue 34).
    if credentials is None or not _known(digest(credentials.credentials)):
        raise HTTPException(401, "Unknown key.", {"WWW-Authenticate": "Bearer"})


def _fastapi(limits: Any = None) -> FastAPI:
    """The orders' list (with its ETag and 304) and v2's single order in FastAPI; with
    limits, each handler counted by slowapi and an access line a request."""
    app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
    counted = limits.limit("1000000000/minute;1000000000/day") if limits else (lambda f: f)
    if limits:
        app.state.limiter = limits
        app.add_exception_handler(RateLimitExceeded, _rate_limit_exceeded_handler)  # type: ignore[arg-type]
        access = logging.getLogger("bench.access")
        access.addHandler(logging.StreamHandler(sys.stderr))
        access.setLevel(logging.INFO)
        access.propagate = False

        @app.middleware("http")
        async def access_line(request: Request, call_next: Any) -> Any:
            started = time.perf_counter()
            response = await call_next(request)
            access.info("%s %s %d %.2f ms", request.method, request.url.path,
                        response.status_code, (time.perf_counter() - started) * 1000)
            return response

    @app.get(LIST, response_model=list[Order], response_model_exclude_none=True,
             dependencies=[Depends(_checked)])
    @counted
    async def list_orders(request: Request, response: FastAPIResponse) -> Any:
        if request.headers.get("if-none-match") == ETAG:
            return FastAPIResponse(status_code=304, headers={"ETag": ETAG})
        response.headers["ETag"] = ETAG
        return ORDERS

    @app.get("/v2/store/orders/{order_id}", response_model=Order,
             response_model_exclude_none=True, dependencies=[Depends(_checked)])
    @counted
    async def get_order(order_id: int, request: Request, response: FastAPIResponse) -> Any:
        if order_id not in BY_ID:
            raise HTTPException(404, "No such order.")
        return BY_ID[order_id]

    return app


def _per_key(request: Request) -> str:
    return request.headers.get("authorization", "")


fastapi_app = _fastapi()
fastapi_slowapi_app = _fastapi(Limiter(key_func=_per_key, storage_uri="memory://",
                                       headers_enabled=True))
