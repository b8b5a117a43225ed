"""Schemathesis against the service in process (through its ASGI app): every check, and
the examples, coverage, fuzzing and stateful phases, with a valid Enterprise key whose
limits cannot be reached and bans off. A refused key fails the run instead of warning."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import hypothesis
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.generation import GenerationMode

from app.core.config import Settings
from app.core.storage import open_store
from app.web import create_app
from tests.support import make_key

pytestmark = pytest.mark.contract

MAX_EXAMPLES = 100  # per operation and phase; the whole module takes well under two minutes


class ManyClients:
    """Gives each request a client address of its own, as many real clients would."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.requests = itertools.count(1)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            n = next(self.requests)
            scope = {**scope, "client": (f"10.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}", 1)}
        await self.app(scope, receive, send)


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder: Path = tmp_path_factory.mktemp("contract")
    # The quotas are not what this run tests: an Enterprise key that cannot run out, no
    # bans, and (ManyClients) each keyless request from an address of its own, so that
    # the auth checks meet 401s rather than the per-address quota's 429s.
    settings = Settings(database=str(folder / "contract.db"), validate_responses=True,
                        ban_seconds=0)
    store = open_store(settings)
    statuses = ("pending", "shipped", "cancelled")
    store.import_orders(
        {"id": i, "petId": i * 7, "quantity": 1 + i % 3, "status": statuses[i % 3],
         "complete": i % 3 == 1} | ({"shipDate": "2026-11-20T10:00:00Z"} if i % 3 == 1 else {})
        for i in range(1, 400)
    )
    key = make_key(store, plan="enterprise", name="contract", per_minute=10**9,
                   per_day=10**9)
    config = SchemathesisConfig.from_dict({
        "checks": {"enabled": True},
        "phases": {name: {"enabled": True}
                   for name in ("examples", "coverage", "fuzzing", "stateful")},
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES},
        "auth": {"openapi": {"bearerAuth": {"bearer": key}}},
    })
    app = ManyClients(create_app(settings))
    schema = schemathesis.openapi.from_asgi("/v1/openapi.json", app, config=config)
    return {"schema": schema, "key": key}


@pytest.fixture
def api_schema(contract: dict[str, Any]) -> Any:
    return contract["schema"]


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@hypothesis.settings(deadline=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
def test_every_operation_follows_the_contract(case: Any, contract: dict[str, Any]) -> None:
    authorization = f"Bearer {contract['key']}"
    response = case.call_and_validate(headers={"Authorization": authorization})
    if case.meta is not None and case.meta.generation.mode is GenerationMode.POSITIVE:
        # A valid request refused for its key means the run tests nothing but 401s.
        assert response.status_code != 401, "the contract's API key was refused"


def test_stateful_sequences_follow_the_contract(contract: dict[str, Any]) -> None:
    machine = contract["schema"].as_state_machine()
    authorization = f"Bearer {contract['key']}"

    class Machine(machine):  # type: ignore[misc, valid-type]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"headers": {"Authorization": authorization}}

    Machine.run(settings=hypothesis.settings(
        max_examples=MAX_EXAMPLES, deadline=None, stateful_step_count=6,
        suppress_health_check=list(hypothesis.HealthCheck),
    ))
