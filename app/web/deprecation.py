"""Deprecation signals from the YAML (D13): an operation with `deprecated: true` answers
with `Deprecation: @<unix time>` (RFC 9745) from its `x-deprecation-date` and
`Sunset: <HTTP date>` (RFC 8594) from its `x-sunset`; from the sunset on it is refused
(Retired, which the errors layer answers 410 `gone`, with the same two headers): the
routing layer (routed.py) decides both once it knows the operation. Nothing here names an
operation: the YAML does."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any


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
