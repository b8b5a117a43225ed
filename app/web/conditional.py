"""Conditional GET and PATCH: weak ETags, 304 Not Modified for a client whose copy is
current, If-Match's versions (D25), and the @kept mark of the reads whose answers the cache
in front may replay (answer_cache.py).

v2's pages and single orders (tagged_json) carry an ETag of their content: 304 exactly
when the bytes would be the same. v1's order list has an ETag that names the service's
version (the encoding may change with it) and the orders' revision, which every change to
an order raises (app/core/listing.py).

A GET handler marked @kept makes an answer that depends only on its request and the
orders' revision: answer_cache.AnswerCache replays it, 304s included, to a request of the
same shape while no order has changed.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias, TypeVar

from connexion.context import scope as current_scope
from connexion.lifecycle import ConnexionResponse
from starlette.datastructures import Headers
from starlette.responses import StreamingResponse
from werkzeug.http import parse_etags, unquote_etag

from app import __version__

F = TypeVar("F", bound=Callable[..., Any])
# What tagged_json answers: a body whole, a 304, or a body streamed in pieces.
Tagged: TypeAlias = ConnexionResponse | StreamingResponse
KEPT = "__petstore_kept__"  # the mark @kept puts on a handler


def kept(handler: F) -> F:
    """Mark a GET handler whose answer depends only on its request and the orders' revision
    (every change to an order or a pet raises it): the cache in front may replay it
    (answer_cache.py)."""
    setattr(handler, KEPT, True)
    return handler


def is_kept(handler: Any) -> bool:
    """Whether @kept marks a handler."""
    return bool(getattr(handler, KEPT, False))


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
                tag: str | None = None) -> Tagged:
    """A JSON body with its ETag (tag, or a digest of the body, which must then be bytes),
    or 304 and no body when the request's If-None-Match matches it. A body in pieces (the
    v1 list too large to keep whole) is streamed: Starlette's StreamingResponse, which
    Connexion passes on as it is, pulls each piece in its thread pool."""
    if tag is None:
        assert isinstance(body, bytes), "a body sent in pieces needs its tag"
        tag = content_etag(body)
    given = Headers(scope=current_scope).get("If-None-Match")
    if given is not None and matches(given, tag):
        return ConnexionResponse(status_code=304, headers={"ETag": tag})
    tagged = {"ETag": tag, **(headers or {})}
    if isinstance(body, bytes):
        return ConnexionResponse(status_code=200, content_type="application/json", body=body,
                                 headers=tagged)
    return StreamingResponse(body, 200, headers=tagged, media_type="application/json")
