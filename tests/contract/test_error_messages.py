"""Schemathesis' negative data over every operation of v1 and v2 (issue 36): whatever a
client gets wrong, the Error's message is a sentence of ours, never jsonschema's or
Python's wording (`is not of type`, `is less than the minimum of`, ` - '`, a repr such as
`[1, 2]` or `'tomorrow'`); and every 400 or 422 of v2 names, in `param`, a parameter,
header or body member of that operation (or the undeclared one the request sent), unless
no one field is at fault (the body as a whole). Bounded: a few seconds per operation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import hypothesis
import orjson
import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig

from app.core.config import Settings
from app.core.storage import open_store
from app.web import create_app
from tests.contract.test_openapi_document import RESOLVED
from tests.contract.test_schemathesis import ManyClients, filter_path_parameters
from tests.support import make_key

# One worker runs the whole module (make test: --dist loadgroup), so that the last test
# sees what the others met.
pytestmark = [pytest.mark.contract, pytest.mark.xdist_group("error_messages")]

MAX_EXAMPLES = 50  # per operation and phase
# jsonschema's and Python's phrasing, and reprs of values.
FOREIGN = re.compile(
    r"is not of type|is less than|is greater than|is a required property|"
    r"Additional properties|does not match|is not one of|is not a '|is too (?:long|short)|"
    r"is not valid under|should be non-empty|has non-unique|Expecting|line \d+ column|"
    r" - '|'[^']*'|\[[^\]]*\]|\{[^}]*\}|(?<![-\w])(?:None|True|False)(?![-\w])|Traceback")
# Sentences about the request body as a whole: no one field is at fault.
WHOLE_BODY = "The request body "
SECURITY_HEADER = "Authorization"


def _fields(version: str) -> dict[tuple[str, str], set[str]]:
    """(METHOD, path) -> the names of an operation's parameters, headers and body members,
    in the document as Connexion serves it (its references resolved)."""
    fields = {}
    for path, item in RESOLVED[version]["paths"].items():
        for method, operation in item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            names = {p["name"] for p in [*item.get("parameters", []),
                                          *operation.get("parameters", [])]}
            for content in operation.get("requestBody", {}).get("content", {}).values():
                names |= set(content["schema"].get("properties", {}))
            fields[(method.upper(), path)] = names
    return fields


FIELDS = {version: _fields(version) for version in RESOLVED}
# What the run met, by version: (status, param) of each 4xx; for the test that it met some.
MET: dict[str, set[tuple[int, str | None]]] = {"/v1": set(), "/v2": set()}


@pytest.fixture(scope="module")
def negative(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder: Path = tmp_path_factory.mktemp("negative")
    settings = Settings(database=str(folder / "negative.db"), validate_responses=True,
                        ban_seconds=0, feed_max_waiting=0)
    store = open_store(settings)
    store.import_orders({"id": i, "petId": 7, "quantity": 1} for i in range(1, 20))
    store.import_pets([{"id": 7, "name": "Rex"}])  # a catalogue: the pet rule is on
    key = make_key(store, plan="enterprise", name="negative", per_minute=10**9,
                   per_day=10**9)
    config = SchemathesisConfig.from_dict({
        "phases": {"examples": {"enabled": False}, "coverage": {"enabled": True},
                   "fuzzing": {"enabled": True}, "stateful": {"enabled": False}},
        "generation": {"mode": "negative", "max-examples": MAX_EXAMPLES},
        "auth": {"openapi": {"bearerAuth": {"bearer": key}}},
    })
    app = ManyClients(create_app(settings))
    schemas = {version: schemathesis.openapi.from_asgi(f"{version}/openapi.json", app,
                                                       config=config)
               for version in ("/v1", "/v2")}
    for schema in schemas.values():
        schema.hook(filter_path_parameters)
    return schemas


@pytest.fixture
def negative_v1(negative: dict[str, Any]) -> Any:
    return negative["/v1"]


@pytest.fixture
def negative_v2(negative: dict[str, Any]) -> Any:
    return negative["/v2"]


def _sent(case: Any) -> set[str]:
    """The names of what a case sent: query parameters, headers, body members."""
    names = set(case.query or {}) | set(case.headers or {})
    if isinstance(case.body, dict):
        names |= set(case.body)
    return names


def check(case: Any, version: str) -> None:
    response = case.call()
    if response.status_code < 400 or not response.content:
        return
    error = orjson.loads(response.content)
    message = error["message"]
    MET[version].add((response.status_code, error.get("param")))
    assert not FOREIGN.search(message), (case.method, case.path, message)
    if version == "/v1":
        assert "param" not in error, error
        return
    if response.status_code not in (400, 422):
        return
    param = error.get("param")
    if param is None:
        assert message.startswith(WHOLE_BODY), (case.method, case.path, error)
        return
    declared = FIELDS[version][(case.method.upper(), case.path)]
    assert param in declared | _sent(case) | {SECURITY_HEADER}, (case.method, case.path,
                                                                  error)


schema_v1 = schemathesis.pytest.from_fixture("negative_v1")
schema_v2 = schemathesis.pytest.from_fixture("negative_v2")


# Derandomized: the same requests every run, so that a failure comes again.
SETTINGS = hypothesis.settings(deadline=None, derandomize=True,
                               suppress_health_check=list(hypothesis.HealthCheck))


@schema_v1.parametrize()
@SETTINGS
def test_v1_answers_bad_requests_in_our_words(case: Any) -> None:
    check(case, "/v1")


@schema_v2.parametrize()
@SETTINGS
def test_v2_answers_bad_requests_in_our_words_naming_the_field(case: Any) -> None:
    check(case, "/v2")


def test_the_negative_data_met_the_rules_of_many_fields() -> None:
    """Runs after the two above (pytest keeps a module's order): they met 400s, and in v2
    400s naming many fields, so the checks above checked something."""
    assert any(status == 400 for status, _ in MET["/v1"]), MET["/v1"]
    named = {param for status, param in MET["/v2"] if status == 400 and param}
    assert {"Idempotency-Key", "limit", "orderId"} <= named, named
    assert named & {"petId", "quantity", "shipDate"}, named
