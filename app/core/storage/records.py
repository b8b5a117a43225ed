"""What the stores hand back besides plain dicts: keys and the outcome of a conditional
write, and the closed lists (statuses, plans) the schema enforces."""

from __future__ import annotations

from dataclasses import dataclass

ORDER_STATUSES = ("pending", "shipped", "cancelled")
PLANS = ("free", "pro", "business", "enterprise")


@dataclass(frozen=True)
class ApiKey:
    """An API key as stored: never the key itself, only its digest and visible prefix."""

    id: int
    prefix: str
    name: str
    plan: str
    per_minute: int | None
    per_day: int | None
    created_at: str
    revoked_at: str | None
    banned_until: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True)
class Transition:
    """The outcome of a conditional write: the order's status afterwards (None when there
    is no such order) and whether this very call made the change."""

    status: str | None
    changed: bool
