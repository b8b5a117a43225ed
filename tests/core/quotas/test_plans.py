"""The plans of x-plans (D11), as the service reads them from the document reviewers edit."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from app.core.config import SettingsError
from app.core.quotas.plans import Plan, plans_of

V1 = yaml.safe_load((Path(__file__).parents[3] / "openapi" / "petstore-v1.yaml")
                   .read_text(encoding="utf-8"))


def test_the_served_document_gives_every_plan_but_enterprise_its_numbers() -> None:
    assert plans_of(V1) == {"free": Plan("free", 60, 1000), "pro": Plan("pro", 300, 10000),
                            "business": Plan("business", 1000, 100000)}


@pytest.mark.parametrize("plan", ["free", "pro", "business"])
def test_a_document_without_a_key_s_plan_is_refused_naming_it(plan: str) -> None:
    """A key on a plan the document lost would have no quotas: each of its requests would
    fail. The service refuses the document at start instead (create_app reads it)."""
    edited = copy.deepcopy(V1)
    del edited["x-plans"][plan]
    with pytest.raises(SettingsError) as refused:
        plans_of(edited)
    assert str(refused.value) == (
        f"x-plans gives no perMinute and perDay for {plan}: every plan a key may be on but "
        "enterprise (free, pro, business) takes its quotas from there (D11)")


def test_enterprise_needs_no_numbers_in_the_document() -> None:
    edited = copy.deepcopy(V1)
    del edited["x-plans"]["enterprise"]
    assert plans_of(edited) == plans_of(V1)
