"""Conditional GET: weak ETags, 304 Not Modified for a client whose copy is current, and
the answers kept per revision of the orders.

v2's pages and single orders (tagged_json) carry an ETag of their content: 304 exactly
when the bytes would be the same. v1's order list has an ETag that names the service's
version (the encoding may change with it) and the orders' revision, which every change to
an order raises (app/core/listing.py).

A GET handler marked @kept makes an answer that depends only on its request's target, its
caller and the orders' revision: AnswerCache keeps it and serves it again, 304s included,
without a handler thread, while no order has changed; RepeatedReads (repeats.py) serves it
earlier still. An answer is handed only to the key it was made for: a kept answer never
carries one key's data to another.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple, TypeVar

import flask
from cachetools import LRUCache
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from werkzeug.http import parse_etags, unquote_etag

from app import __version__
from app.core.storage import Store
from app.web.exchange import exchange

F = TypeVar("F", bound=Callable[..., Any])
KEPT = "__petstore_kept__"  # the mark @kept puts on a handler


def kept(revision_tag: Callable[[int], str] | None = None) -> Callable[[F], F]:
    """Mark a GET handler whose answer AnswerCache may keep per target, caller and revision
    of the orders. revision_tag, where given, is the handler's ETag at a revision: a
    matching If-None-Match is then answered 304 from the revision alone, even for an answer
    too large to keep."""

    def mark(handler: F) -> F:
        setattr(handler, KEPT, Keeping(revision_tag))
        return handler

    return mark


class Keeping(NamedTuple):
    """What @kept says of a handler."""

    revision_tag: Callable[[int], str] | None


def keeping_of(handler: Any) -> Keeping | None:
    """What @kept says of a handler, or None where it is not marked."""
    found: Keeping | None = getattr(handler, KEPT, None)
    return found


def list_etag(revision: int) -> str:
    """The weak ETag of the list at a revision of the orders."""
    return f'W/"{__version__}-{revision}"'


def matches(if_none_match: str, tag: str) -> bool:
    """Whether an If-None-Match value matches tag, by RFC 9110's weak comparison (section
    13.1.2): a weak or a strong tag of the same opaque value, or *."""
    if if_none_match == tag:  # the tag sent back as it was given: the usual revalidation
        return True
    opaque, _ = unquote_etag(tag)
    return parse_etags(if_none_match).contains_weak(opaque)


def content_etag(body: bytes) -> str:
    """A weak ETag of a body: a digest of its bytes."""
    return f'W/"{hashlib.blake2b(body, digest_size=12).hexdigest()}"'


def order_etag(version: int) -> str:
    """The strong ETag of one order at a version (D25)."""
    return f'"{version}"'


# An order's version as the opaque value of its ETag: ASCII digits only (str.isdigit takes
# "¹", which int() refuses), and no more than a version can have (int() refuses texts of
# over 4,300 digits).
VERSION = re.compile(r"[0-9]{1,19}")


def if_match_versions(header: str | None) -> set[int] | None:
    """The versions an If-Match header names (RFC 9110 section 13.1.1: strong comparison, so
    a weak tag names none); None when there is no header, or it is * (any version)."""
    if header is None:
        return None
    tags = parse_etags(header)
    if tags.star_tag:
        return None
    return {int(tag) for tag in tags.as_set() if VERSION.fullmatch(tag)}


def if_match_version(header: str | None, current: Callable[[], int | None]) -> int | None:
    """The one version an If-Match header allows a change at (D25): None for any (no header,
    or *); the version itself when it names one; when it names several, the current one
    (read by current) if it is among them; else -1, which nothing has."""
    versions = if_match_versions(header)
    if versions is None:
        return None
    if len(versions) == 1:
        return next(iter(versions))
    now = current() if versions else None
    return now if now in versions else -1


def tagged_json(body: bytes | Iterator[bytes], headers: dict[str, str] | None = None,
                tag: str | None = None) -> flask.Response:
    """A JSON body with its ETag (tag, or a digest of the body, which must then be bytes),
    or 304 and no body when the request's If-None-Match matches it."""
    if tag is None:
        assert isinstance(body, bytes), "a body sent in pieces needs its tag"
        tag = content_etag(body)
    given = flask.request.headers.get("If-None-Match")
    if given is not None and matches(given, tag):
        response = flask.Response(status=304, headers={"ETag": tag})
        del response.headers["Content-Type"]
        return response
    return flask.Response(body, 200, mimetype="application/json",
                          headers={"ETag": tag, **(headers or {})})


async def current_revision(store: Store) -> int:
    """The orders' revision, read from the event loop: in place for a local store (one
    row of a SQLite file, a few microseconds), in a thread for one across the network, so
    that a slow or unreachable database never holds up the other requests."""
    if store.local:
        return store.revision()
    return await run_in_threadpool(store.revision)


ENTRY_OVERHEAD = 256  # bytes an answer's headers and key take, roughly, beside its body


class Kept(NamedTuple):
    """An answer AnswerCache keeps: for the revision of the orders it was read at, by the
    operation that made it."""

    revision: int
    tag: bytes
    headers: list[Any]
    body: bytes
    operation: str


Target = tuple[str, bytes, int]  # path, query, the caller's key id


class Answers:
    """The answers AnswerCache keeps, per request target (path and query) and caller (the
    key's id), up to max_bytes (least recently used first out); RepeatedReads serves them
    too."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.kept: LRUCache[Target, Kept] = LRUCache(
            maxsize=max(max_bytes, 1), getsizeof=lambda kept: len(kept.body) + ENTRY_OVERHEAD)

    @staticmethod
    def target(scope: Scope, key_id: int) -> Target:
        return scope["path"], scope.get("query_string", b""), key_id

    def get(self, scope: Scope, key_id: int) -> Kept | None:
        return self.kept.get(self.target(scope, key_id))


async def send_kept(scope: Scope, send: Send, kept: Kept) -> None:
    """The kept answer, or 304 when the request's If-None-Match matches its ETag."""
    given = [v for k, v in scope["headers"] if k == b"if-none-match"]
    if given and (given == [kept.tag] or matches(b",".join(given).decode("latin-1"),
                                                 kept.tag.decode("ascii"))):
        await send({"type": "http.response.start", "status": 304,
                    "headers": [(b"etag", kept.tag)]})
        await send({"type": "http.response.body", "body": b""})
    else:
        await send({"type": "http.response.start", "status": 200,
                    "headers": list(kept.headers)})
        await send({"type": "http.response.body", "body": kept.body})


class AnswerCache:
    """Keeps the answers of the @kept operations (Answers), and serves them again, or 304
    when If-None-Match matches their ETag, without a handler thread, while no order has
    changed. Like v1's list cache (app/core/listing.py) it is never stale: every change to
    an order, from any process or host, raises the revision, and an answer is kept under
    the revision read before the handler read the orders. It sits after Connexion's
    routing, security and validation, so the request is one the handler would answer."""

    def __init__(self, app: ASGIApp, *, store: Store, operations: dict[str, Keeping],
                 answers: Answers) -> None:
        self.app = app
        self.store = store
        self.operations = operations  # resolved operation id -> what @kept says of it
        self.answers = answers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = exchange(scope) if scope["type"] == "http" else None
        operation = found.operation if found is not None else None
        keeping = self.operations.get(operation.id) if operation is not None else None
        key = found.key if found is not None else None
        if (keeping is None or key is None or operation is None or found is None
                or scope["method"] != "GET"):
            await self.app(scope, receive, send)
            return
        revision = await current_revision(self.store)  # before the handler reads the orders
        if keeping.revision_tag is not None and self._revalidated(scope, keeping, revision):
            found.answered_by = "kept"
            tag = keeping.revision_tag(revision).encode("ascii")
            await send({"type": "http.response.start", "status": 304,
                        "headers": [(b"etag", tag)]})
            await send({"type": "http.response.body", "body": b""})
            return
        if self.answers.max_bytes <= 0:
            await self.app(scope, receive, send)
            return
        target = self.answers.target(scope, key.id)
        kept = self.answers.kept.get(target)
        if kept is not None and kept.revision == revision:
            found.answered_by = "kept"
            await send_kept(scope, send, kept)
            return
        await self.app(scope, receive, self._keeping(send, target, operation.id, revision))

    @staticmethod
    def _revalidated(scope: Scope, keeping: Keeping, revision: int) -> bool:
        """Whether the request's If-None-Match matches the handler's ETag at revision."""
        given = [v for k, v in scope["headers"] if k == b"if-none-match"]
        return bool(given) and keeping.revision_tag is not None and matches(
            b",".join(given).decode("latin-1"), keeping.revision_tag(revision))

    def _keeping(self, send: Send, target: Target, operation: str, revision: int) -> Send:
        """send, keeping a 200 answered in one piece (a body in one message)."""
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
                body = message.get("body", b"")
                if (pieces == 1 and start.get("status") == 200
                        and not message.get("more_body", False)
                        and len(body) + ENTRY_OVERHEAD <= self.answers.max_bytes):
                    headers = start["headers"]
                    tag = next((v for k, v in headers if k.lower() == b"etag"), None)
                    if tag is not None:
                        self.answers.kept[target] = Kept(revision, tag, headers, body,
                                                         operation)
            await send(message)

        return keeping
