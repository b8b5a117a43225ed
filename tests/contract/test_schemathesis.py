"""Schemathesis against the service in process (through its ASGI app), v1's document and
v2's: every check, and the examples, coverage, fuzzing and stateful phases, with a valid
Enterprise key whose limits cannot be reached and bans off. A refused key fails the run
instead of warning."""

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
from tests.contract.widenings import KEEPS_AFTER_DELETE, V2_OPERATIONS, v2_operations
from tests.support import make_key

pytestmark = pytest.mark.contract

MAX_EXAMPLES = 100  # per operation and phase; the whole module takes well under two minutes
# v2's operations left out of the stateful phase, each with its reason (at the run below).
NOT_WALKED = ("withdrawPet",)
# Every check runs on every operation, with v2's expectations widened where no JSON Schema
# can say what the service refuses (tests/contract/widenings.py, shared with the CLI's run).


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
    # No waiting feed requests: a generated `wait` of up to 30 s would hold the run (long
    # polling has tests of its own, tests/web/test_feed.py).
    settings = Settings(database=str(folder / "contract.db"), validate_responses=True,
                        ban_seconds=0, feed_max_waiting=0)
    store = open_store(settings)
    statuses = ("pending", "shipped", "cancelled")
    store.import_orders(
        {"id": i, "petId": i * 7, "quantity": 1 + i % 3, "status": statuses[i % 3],
         "complete": i % 3 == 1} | ({"shipDate": "2026-11-20T10:00:00Z"} if i % 3 == 1 else {})
        for i in range(1, 400)
    )
    key = make_key(store, plan="enterprise", name="contract", per_minute=10**9,
                   per_day=10**9)
    common = {
        "checks": {"enabled": True},
        "phases": {name: {"enabled": True}
                   for name in ("examples", "coverage", "fuzzing", "stateful")},
        "generation": {"mode": "all", "max-examples": MAX_EXAMPLES},
        "auth": {"openapi": {"bearerAuth": {"bearer": key}}},
    }
    configs = {"/v1": SchemathesisConfig.from_dict(common),
               "/v2": SchemathesisConfig.from_dict({**common, "operations": V2_OPERATIONS})}
    app = ManyClients(create_app(settings))
    schemas = {version: schemathesis.openapi.from_asgi(f"{version}/openapi.json", app,
                                                       config=config)
               for version, config in configs.items()}
    for schema in schemas.values():
        schema.hook(filter_path_parameters)
    return schemas | {"key": key}


def filter_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> bool:
    """No generated path parameter holds a newline. A path with one never reaches an
    operation: the router's pattern for a document's base path (`.*`) stops at the
    newline, so the service answers its plain 404 `not_found` for an unknown path
    (tests/web/test_orders_api.py asserts it), without the headers the operation's own
    answers carry: getPet's Deprecation and Sunset, required by the document. One run in
    five or so generated such a petId and failed on them."""
    return not any("\n" in str(value) for value in (path_parameters or {}).values())


@pytest.fixture
def api_schema_v1(contract: dict[str, Any]) -> Any:
    return contract["/v1"]


@pytest.fixture
def api_schema_v2(contract: dict[str, Any]) -> Any:
    return contract["/v2"]


schema_v1 = schemathesis.pytest.from_fixture("api_schema_v1")
schema_v2 = schemathesis.pytest.from_fixture("api_schema_v2")


def _call(case: Any, contract: dict[str, Any]) -> None:
    # The key comes from the configuration's auth, which schemathesis leaves out of the
    # negative cases that test a missing Authorization (a header added here would undo
    # them: such a case was then accepted, and failed at random).
    response = case.call_and_validate()
    if case.meta is not None and case.meta.generation.mode is GenerationMode.POSITIVE:
        # A valid request refused for its key means the run tests nothing but 401s.
        assert response.status_code != 401, "the contract's API key was refused"


@schema_v1.parametrize()
@hypothesis.settings(deadline=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
def test_every_operation_follows_the_contract(case: Any, contract: dict[str, Any]) -> None:
    _call(case, contract)


@schema_v2.parametrize()
@hypothesis.settings(deadline=None,
                     suppress_health_check=list(hypothesis.HealthCheck))
def test_every_v2_operation_follows_the_contract(case: Any, contract: dict[str, Any]) -> None:
    _call(case, contract)


@pytest.mark.parametrize("version", ["/v1", "/v2"])
def test_stateful_sequences_follow_the_contract(contract: dict[str, Any], version: str) -> None:
    schema = contract[version]
    if version == "/v2":
        # withdrawPet takes the first pet a list named, and a withdrawn pet leaves the
        # list: each walk changes what the next one reads, and hypothesis, replaying a walk
        # over a store that has moved on, draws other values (FlakyStrategyDefinition, in
        # every run). It keeps its stateless phases here and its tests in
        # tests/web/test_pets_v2.py.
        for operation_id in NOT_WALKED:
            schema = schema.exclude(operation_id=operation_id)
    machine = schema.as_state_machine()  # its key: the configuration's auth
    # Derandomized: the same sequences every run. The sequences' ids come from the
    # service's answers (the links), so a replay against a store that has moved on draws
    # other values, and hypothesis then reported FlakyStrategyDefinition in one run of
    # five, hiding whatever it had found. A fixed walk keeps the suite from flaking; a
    # random walk with a recorded seed is left for the next session to run down.
    machine.run(settings=hypothesis.settings(
        max_examples=MAX_EXAMPLES, deadline=None, stateful_step_count=6, derandomize=True,
        suppress_health_check=list(hypothesis.HealthCheck),
    ))


def test_every_operation_named_by_the_runs_is_one_of_v2s() -> None:
    """The few operations and paths named as exceptions name some of v2's, so that a
    renamed or removed one fails here rather than excepting nothing."""
    ids = {operation.definition["operationId"] for operation in v2_operations()}
    assert set(NOT_WALKED) <= ids, set(NOT_WALKED) - ids
    deletes = {operation.template.removeprefix("/v2") for operation in v2_operations()
               if operation.method == "DELETE"}
    assert set(KEEPS_AFTER_DELETE) <= deletes, set(KEEPS_AFTER_DELETE) - deletes
    widened = {entry["include-operation-id"] for entry in V2_OPERATIONS}
    assert widened <= ids and "placeOrder" in widened
