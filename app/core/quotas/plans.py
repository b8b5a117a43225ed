"""Plans (D11): the requests a minute and a day each plan allows, declared once
under `x-plans` at the root of the OpenAPI document, which reviewers edit; enterprise keys
carry their own numbers."""

from __future__ import annotations

from typing import Any, NamedTuple

from app.core.config import Settings, SettingsError
from app.core.storage.records import PLANS, ApiKey


class Plan(NamedTuple):
    """A plan's numbers: requests a minute and a day."""

    name: str
    per_minute: int
    per_day: int


def plans_of(spec: dict[str, Any]) -> dict[str, Plan]:
    """The plans declared under `x-plans` at the root of an OpenAPI document read (D11).
    Every plan a key may be on takes its numbers from there, enterprise's excepted (its
    keys carry their own): a document edited to leave one out stops the service at start,
    naming it, rather than failing each request of a key on it."""
    plans = {
        name: Plan(name, int(numbers["perMinute"]), int(numbers["perDay"]))
        for name, numbers in spec["x-plans"].items()
        if "perMinute" in numbers
    }
    from_document = [name for name in PLANS if name != "enterprise"]
    missing = [name for name in from_document if name not in plans]
    if missing:
        raise SettingsError(
            f"x-plans gives no perMinute and perDay for {', '.join(missing)}: every plan a "
            f"key may be on but enterprise ({', '.join(from_document)}) takes its quotas "
            "from there (D11)")
    return plans


def plan_of(key: ApiKey, plans: dict[str, Plan]) -> Plan:
    """The numbers that apply to a key: its plan's, or its own for enterprise keys."""
    if key.per_minute is not None and key.per_day is not None:
        return Plan(key.plan, key.per_minute, key.per_day)
    return plans[key.plan]


def anonymous_plan(settings: Settings, plans: dict[str, Plan]) -> Plan:
    """The plan of PETSTORE_ANONYMOUS_PLAN, which must be one of x-plans with numbers."""
    if settings.anonymous_plan not in plans:
        raise SettingsError(
            f"PETSTORE_ANONYMOUS_PLAN={settings.anonymous_plan!r} is not a plan of "
            f"x-plans ({', '.join(plans)})"
        )
    return plans[settings.anonymous_plan]
