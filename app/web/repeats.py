"""Repeated reads answered early: a GET whose answer AnswerCache keeps (conditional.py) is
served right after the quotas, before Connexion's routing, security and validation."""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.errors import StoreUnavailable
from app.core.storage import Store
from app.web.conditional import Answers, current_revision, send_kept
from app.web.connexion_internals import mark_routed
from app.web.security import LOOKED_UP, key_info


class RepeatedReads:
    """A GET answered from Answers right after the quotas, before Connexion's routing,
    security and validation, which would only come to the same answer: the same target
    (path and query) was routed, let in and validated when its answer was kept, the
    rate-limit middleware has found the caller's key valid (and counted the request), and
    the orders are at the answer's revision. What could still tell this request apart goes
    the long way: a key not found valid, an operation the YAML deprecates (its headers, its
    410) or reserves to write keys, a body, and a header the operation declares as a
    parameter that its schema would refuse (too long, given twice, or a schema this does not
    read). Added right inside the quotas (MiddlewarePosition.BEFORE_EXCEPTION); the access
    line, the request id, the rate-limit headers and gzip are the outer middlewares' as for
    any answer. Routing, security and validation were a large share of a repeated read's
    CPU (docs/performance.md has the figures)."""

    def __init__(self, app: ASGIApp, *, store: Store, answers: Answers,
                 headers: dict[str, dict[bytes, dict[str, Any]]],
                 long_way: frozenset[str]) -> None:
        self.app = app
        self.store = store
        self.answers = answers
        self.limits = {operation: {name: _max_length(p) for name, p in declared.items()}
                       for operation, declared in headers.items()}
        # Deprecated operations, those needing a write key, and those requiring a header.
        self.long_way = long_way | {operation for operation, declared in headers.items()
                                    if any(p.get("required") for p in declared.values())}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET":
            kept = self.answers.get(scope)
            check = scope.get(LOOKED_UP)
            key = check.key if check is not None else None
            if (kept is not None and key is not None and kept.operation not in self.long_way
                    and self._plain(scope, kept.operation)
                    and kept.revision == await self._revision()):
                mark_routed(scope, kept.operation, key_info(key))
                await send_kept(scope, send, kept)
                return
        await self.app(scope, receive, send)

    async def _revision(self) -> int | None:
        """The orders' revision; None when the store cannot say, and the request then goes
        the long way, to the 503 Connexion's error handlers answer."""
        try:
            return await current_revision(self.store)
        except StoreUnavailable:
            return None

    def _plain(self, scope: Scope, operation: str) -> bool:
        """Whether the request has no body and its declared headers pass their schemas."""
        limits = self.limits.get(operation, {})
        seen: set[bytes] = set()
        for name, value in scope["headers"]:
            if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
                return False
            if name in limits:
                limit = limits[name]
                if limit is None or name in seen or len(value) > limit:
                    return False
                seen.add(name)
        return True


def _max_length(parameter: dict[str, Any]) -> int | None:
    """The longest value a header parameter's schema lets through, when all it asks is a
    string of at most so many characters; None for any other schema."""
    schema = parameter.get("schema", {})
    if set(schema) - {"type", "maxLength"} or schema.get("type") != "string":
        return None
    return int(schema.get("maxLength", 2**62))
