"""Deprecation signals from the YAML (D13): an operation with `deprecated: true` answers
with `Deprecation: @<unix time>` (RFC 9745) from its `x-deprecation-date` and
`Sunset: <HTTP date>` (RFC 8594) from its `x-sunset`; from the sunset on it is refused
(Retired, which the errors layer answers 410 `gone`, with the same two headers). Nothing
here names an operation: the YAML does."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from app.web.errors import Retired
from app.web.exchange import exchange


@dataclass(frozen=True)
class Retirement:
    """When an operation was deprecated and when it stops answering (Unix times)."""

    deprecated: float
    sunset: float | None

    def headers(self) -> list[tuple[bytes, bytes]]:
        headers = [(b"deprecation", f"@{int(self.deprecated)}".encode())]
        if self.sunset is not None:
            headers.append((b"sunset", formatdate(self.sunset, usegmt=True).encode()))
        return headers


def _time(value: Any) -> float:
    if isinstance(value, dt.datetime):  # YAML may parse an unquoted timestamp itself
        return value.timestamp()
    return dt.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def retirements(operations: dict[str, dict[str, Any]]) -> dict[str, Retirement]:
    """Resolved operation id -> Retirement, for the operations the YAML deprecates."""
    return {
        operation_id: Retirement(_time(operation["x-deprecation-date"]),
                                 _time(operation["x-sunset"]) if "x-sunset" in operation
                                 else None)
        for operation_id, operation in operations.items()
        if operation.get("deprecated") and "x-deprecation-date" in operation
    }


class Deprecations:
    """Decides the deprecation headers of a deprecated operation's answers, and refuses it
    once the sunset has passed. Sits after routing, which names the operation, and inside
    the errors layer, which answers the refusal."""

    def __init__(self, app: ASGIApp, *, retired: dict[str, Retirement],
                 clock: Callable[[], float] = time.time) -> None:
        self.app = app
        self.retired = retired
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = exchange(scope) if scope["type"] == "http" else None
        operation = found.operation if found is not None else None
        retirement = self.retired.get(operation.id) if operation is not None else None
        if retirement is None or found is None:
            await self.app(scope, receive, send)
            return
        found.decide(retirement.headers())
        if retirement.sunset is not None and self.clock() >= retirement.sunset:
            raise Retired(retirement.sunset)
        await self.app(scope, receive, send)
