"""How bodies go out: JSON by orjson through Connexion's jsonifier, and gzip by Starlette's
middleware, with the compressed list kept beside the plain one so that it is compressed
once per change, not once per request."""

from __future__ import annotations

import gzip
from typing import Any

import orjson
from cachetools import LRUCache
from connexion.jsonifier import Jsonifier
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MINIMUM_SIZE = 1000  # bytes; smaller bodies go out as they are


class OrjsonJsonifier(Jsonifier):
    """Connexion's jsonifier over orjson: compact output, several times faster than json."""

    def __init__(self) -> None:
        super().__init__(orjson)

    def dumps(self, data: Any, **kwargs: Any) -> str:
        return orjson.dumps(data).decode()


class Encoding:
    """How an API answer goes out, inside the access layer (access.py): gzip for clients
    that accept it, and large bodies handed to the server a slice at a time.

    gzip is Starlette's GZipMiddleware, at the configured level (none at level 0). A
    response with an ETag (the order list) is compressed once per tag and kept, up to
    max_bytes of compressed bodies; it then goes out with Content-Encoding set, which the
    GZipMiddleware passes on untouched. A list streamed in pieces (too large for the list
    cache) is compressed as it goes, by the GZipMiddleware alone.

    The server sends what the socket takes and buffers the rest, but waits for its buffer
    to drain before taking more: a body written whole (a cached list of tens of MB) would
    be copied whole into the buffer of every slow client's connection, so a body over
    SLICE goes out in slices. The console's pages branch off before it (in the access
    layer): they are never compressed, as they hold the session's form tokens beside
    what the owner typed (BREACH), and none is sent in one piece of over a slice."""

    SLICE = 1 << 20  # bytes

    def __init__(self, app: ASGIApp, *, level: int, max_bytes: int) -> None:
        self.app = app
        self.level = level
        self.max_bytes = max_bytes
        self.gzip = (GZipMiddleware(self._cached, minimum_size=MINIMUM_SIZE,
                                    compresslevel=level) if level else None)
        self.compressed: LRUCache[str, bytes] = LRUCache(maxsize=max(max_bytes, 1),
                                                         getsizeof=len)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        paced = self._paced(send)
        if self.gzip is not None and any(
                name == b"accept-encoding" and b"gzip" in value.lower()
                for name, value in scope["headers"]):
            await self.gzip(scope, receive, paced)
        else:
            await self.app(scope, receive, paced)

    def _paced(self, send: Send) -> Send:
        async def paced(message: Message) -> None:
            body = message.get("body", b"")
            if message["type"] != "http.response.body" or len(body) <= self.SLICE:
                await send(message)
                return
            more = message.get("more_body", False)
            for start in range(0, len(body), self.SLICE):
                await send({"type": "http.response.body",
                            "body": body[start:start + self.SLICE],
                            "more_body": more or start + self.SLICE < len(body)})

        return paced

    async def _cached(self, scope: Scope, receive: Receive, send: Send) -> None:
        start: Message = {}
        tagged: str | None = None

        async def compress_tagged(message: Message) -> None:
            nonlocal start, tagged
            if message["type"] == "http.response.start":
                headers = Headers(raw=message.get("headers", []))
                tag = headers.get("etag")
                if message["status"] == 200 and tag and "content-encoding" not in headers:
                    start, tagged = message, tag  # held until the first piece of body
                else:
                    await send(message)
                return
            if tagged is not None and message["type"] == "http.response.body":
                if not message.get("more_body", False):
                    # The whole body in one message (a handler's bytes): compressed once.
                    await self._send_compressed(send, start, tagged, message.get("body", b""))
                    return
                # A streamed list: the GZipMiddleware outside compresses it as it goes.
                await send(start)
                tagged = None
            await send(message)

        await self.app(scope, receive, compress_tagged)

    async def _send_compressed(self, send: Send, start: Message, tag: str, body: bytes) -> None:
        if len(body) < MINIMUM_SIZE:
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        compressed = self.compressed.get(tag)
        if compressed is None:
            # A large list takes a while to compress: not on the event loop.
            compressed = await run_in_threadpool(gzip.compress, body, self.level, mtime=0)
            if len(compressed) <= self.max_bytes:
                self.compressed[tag] = compressed
        headers = MutableHeaders(raw=start["headers"])
        headers["content-encoding"] = "gzip"
        headers["content-length"] = str(len(compressed))
        headers.add_vary_header("Accept-Encoding")
        await send(start)
        await send({"type": "http.response.body", "body": compressed})
