"""The one cache of answers, in front of Connexion: it replays, and decides nothing.

A GET handler marked @kept (conditional.py) makes an answer that depends only on its
request and the orders' revision, which every change to an order or a pet raises, from any
process or host. AnswerCache keeps what the one way (Connexion's routing, security and
validation, then the handler) answered to such a request, and answers a request of the
same shape again with it while the revision has not moved: without routing, security,
validation or a handler thread.

A request's shape is everything the one way's answer to a GET can depend on: its path
(root path included) and query, the key the caller layer found valid (its id and scope),
how many Authorization headers it had, and the values of every request header a GET of
the documents declares (If-None-Match): a conditional request is answered 304 by the
handler, and that 304 is replayed to the same conditional request. A request with a body,
a key the caller layer did not find valid, or a shape not yet seen goes the one way, and
so does every request while the store cannot say its revision. A GET of a path that no
kept operation serves (the feeds) goes the one way at once, without reading the revision.
The cache never validates, routes or refuses: what it has not seen answered, it does not
answer.

What it keeps: a 200 answered in one piece with an ETag, or a 304, by a @kept operation
that the documents do not deprecate (a deprecated operation's answer changes with the
clock at its sunset, D13); each under the revision read before the handler read the
orders, so that a change made meanwhile leaves it stale at once. It sits after the caller
layer, so the request is counted and the rate-limit headers, the request id and gzip are
the outer layers' as for any answer; the errors layer checks a replay against the document
where responses are validated. An answer goes only to the key it was made
for: a kept answer never carries one key's data to another.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from cachetools import LRUCache
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core.errors import StoreUnavailable
from app.core.storage import Store
from app.web.exchange import Exchange, exchange
from app.web.routing import Operation, operation_by_id, path_pattern

ENTRY_OVERHEAD = 256  # bytes an answer's headers and key take, roughly, beside its body
KEPT_STATUSES = (200, 304)


async def current_revision(store: Store) -> int:
    """The orders' revision, read from the event loop: in place for a local store (one
    row of a SQLite file, a few microseconds), in a thread for one across the network, so
    that a slow or unreachable database never holds up the other requests."""
    if store.local:
        return store.revision()
    return await run_in_threadpool(store.revision)


class Kept(NamedTuple):
    """An answer of the one way, kept for the revision of the orders it was read at."""

    revision: int
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes
    operation: str  # the resolved operation id that made it


class Revalidated(NamedTuple):
    """A 304 owed to a request that sends back a kept answer's ETag."""

    operation: str
    tag: bytes


Shape = tuple[Any, ...]


class AnswerCache:
    """Replays the one way's answers to @kept GETs of the same shape, at the same revision.

    kept: the resolved ids of the @kept operations the documents do not deprecate;
    headers: the request headers the documents' GETs declare (lower-case names)."""

    def __init__(self, app: ASGIApp, *, store: Store, kept: frozenset[str],
                 headers: frozenset[bytes], max_bytes: int) -> None:
        self.app = app
        self.store = store
        self.keeping = kept
        self.declared = headers
        self.max_bytes = max_bytes
        self.kept: LRUCache[Shape, Kept] = LRUCache(
            maxsize=max(max_bytes, 1), getsizeof=lambda kept: len(kept.body) + ENTRY_OVERHEAD)
        self.operations: dict[str, Operation] = operation_by_id()
        # The paths a kept GET serves: any other GET (a feed, a webhook's attempts) could
        # never be replayed, so it goes the one way without a read of the revision (a
        # round trip to PostgreSQL). Matched at the path's end, under any root path; a
        # path matched wrongly only costs that read, as the cache still replays nothing
        # it has not seen answered.
        kept_paths = "|".join(sorted(
            path_pattern(self.operations[operation].template) for operation in kept
            if self.operations[operation].method == "GET"))
        self.kept_paths = re.compile(f"(?:{kept_paths})\\Z" if kept_paths else "(?!)")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        shape = self._shape(scope) if self.max_bytes > 0 else None
        if shape is None:
            await self.app(scope, receive, send)
            return
        try:
            # Read before the one way reads the orders: an answer is kept under it.
            revision = await current_revision(self.store)
        except StoreUnavailable:  # the one way answers the 503
            await self.app(scope, receive, send)
            return
        found = exchange(scope)
        kept = self.kept.get(shape)
        if kept is not None and kept.revision == revision:
            await self._replay(found, send, kept.operation, kept.status, kept.headers,
                               kept.body)
            return
        tag = self._revalidating(shape, revision)
        if tag is not None:
            await self._replay(found, send, tag.operation, 304, [(b"etag", tag.tag)], b"")
            return
        await self.app(scope, receive, self._keeping(send, found, shape, revision))

    def _revalidating(self, shape: Shape, revision: int) -> Revalidated | None:
        """The kept 200 whose ETag the request's one If-None-Match sends back as it was
        given, at the same revision: the one way answers such a request 304 with that ETag
        (conditional.tagged_json), which is replayed without keeping a 304 for each tag.
        Any other If-None-Match is a shape of its own."""
        declared = shape[-1]
        if len(declared) != 1 or declared[0][0] != b"if-none-match":
            return None
        plain = self.kept.get((*shape[:-1], ()))
        if plain is None or plain.revision != revision or plain.status != 200:
            return None
        tag = next(value for name, value in plain.headers if name.lower() == b"etag")
        return Revalidated(plain.operation, tag) if tag == declared[0][1] else None

    async def _replay(self, found: Exchange, send: Send, operation: str, status: int,
                      headers: list[tuple[bytes, bytes]], body: bytes) -> None:
        found.operation = self.operations[operation]
        found.answered_by = "kept"
        await send({"type": "http.response.start", "status": status,
                    "headers": list(headers)})
        await send({"type": "http.response.body", "body": body})

    def _shape(self, scope: Scope) -> Shape | None:
        """The shape of a GET of a kept operation's path by a valid key without a body;
        None for any other request."""
        if (scope["type"] != "http" or scope["method"] != "GET"
                or not self.kept_paths.search(scope["path"])):
            return None
        key = exchange(scope).key
        if key is None:
            return None
        authorizations = 0
        declared = []
        for name, value in scope["headers"]:
            if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
                return None
            if name == b"authorization":
                authorizations += 1
            elif name in self.declared:
                declared.append((name, value))
        return (scope.get("root_path", ""), scope["path"], scope.get("query_string", b""),
                key.id, key.scope, authorizations, tuple(sorted(declared)))

    def _keeping(self, send: Send, found: Exchange, shape: Shape, revision: int) -> Send:
        """send, keeping the one way's answer when a @kept operation made it in one piece."""
        start: Message = {}
        pieces = 0

        async def keeping(message: Message) -> None:
            nonlocal start, pieces
            if message["type"] == "http.response.start":
                # A copy, taken before the message goes out: the layers outside write
                # this request's own headers (rate limits, request id) into it.
                start = {"status": message["status"],
                         "headers": list(message.get("headers", []))}
            elif message["type"] == "http.response.body":
                pieces += 1
                self._keep(found, shape, revision, start, pieces, message)
            await send(message)

        return keeping

    def _keep(self, found: Exchange, shape: Shape, revision: int, start: Message,
              pieces: int, message: Message) -> None:
        operation = found.operation
        body = message.get("body", b"")
        if (operation is None or operation.id not in self.keeping or pieces != 1
                or message.get("more_body", False)
                or start.get("status") not in KEPT_STATUSES
                or len(body) + ENTRY_OVERHEAD > self.max_bytes):
            return
        headers = start["headers"]
        if not any(name.lower() == b"etag" for name, _ in headers):
            return
        self.kept[shape] = Kept(revision, start["status"], headers, body, operation.id)
