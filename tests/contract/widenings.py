"""What schemathesis is told of v2 beyond its document, read from the document itself: the
statuses by which an operation may refuse schema-valid data (or refuse schema-violating
data) for reasons no JSON Schema can state, and the one check that does not apply where a
DELETE keeps its resource. Nothing here names an operation: a new operation is widened by
what its document declares, so it joins the runs by itself. The in-process run
(test_schemathesis.py) takes V2_OPERATIONS as its configuration's `operations`; the CLI's
live run (test_st_cli.py) as the same in its TOML (as_toml). Each operation has one entry
of its own, so no entry shadows another."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from app.web.routing import V2, Operation, operations

# Schemathesis's own expectations (schemathesis.config: positive_data_acceptance's and
# negative_data_rejection's defaults), which the widenings add to.
POSITIVE = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
NEGATIVE = ["400", "401", "403", "404", "405", "406", "409", "415", "422", "428", "429",
            "5xx"]
# The refusals of schema-valid data that depend on what the service holds, not on the
# request's shape: 410 a cursor of another database (D26), 412 a generated If-Match that is
# not the current version (D25), 422 a generated Idempotency-Key come again with another
# body (D23), a pet the catalogue refuses, or a webhook host that is not public (D28). An
# operation whose document declares one of them may answer valid data with it, and with
# 400 where its document declares that too: what no JSON Schema says alike in every
# regular expression dialect (a photo URL with a character Python counts as a space and
# ECMA 262 does not) or at all (a leap second, more digits of a second than microseconds,
# a delta of 0, a name with a control or direction character, D37, a URL that is not
# http(s) or carries userinfo).
HELD = frozenset({"410", "412", "422"})
# An opaque cursor (D18, D26: only a cursor this service gave out, for the same filters and
# sort, is accepted; no JSON Schema can say "a string this service signed"): a generated
# one is 400.
CURSORS = frozenset({"cursor", "after"})
# A schema-violating body of 2,048 escaped characters may pass the 16 KiB a body may have:
# 413 is a refusal too, wherever the document declares it.
TOO_LARGE = "413"
# use_after_free expects a resource gone after its DELETE. Of v2's DELETEs, these keep
# what they act on: cancelOrder the order, cancelled (D2, D20; getOrder answers it with
# status "cancelled"), withdrawPet the pet, withdrawn (D32: orders name it). The check
# spans the path's GET and DELETE. Every other DELETE (deleteWebhookEndpoint) removes
# what it acts on and is held to the check. (A path here that has no DELETE in v2 fails
# tests/contract/test_schemathesis.py.)
KEEPS_AFTER_DELETE = ("/store/orders/{orderId}", "/pets/{petId}")


def v2_operations() -> list[Operation]:
    """Every operation of v2's document."""
    return [operation for operation in operations() if operation.api == V2]


def _relative(operation: Operation) -> str:
    return operation.template.removeprefix(V2.base_path)


def widening(operation: Operation) -> dict[str, Any]:
    """The checks an operation's entry sets: empty where it is held to the defaults."""
    declared = set(operation.definition["responses"])
    queries = {p["name"] for p in operation.parameters if p["in"] == "query"}
    checks: dict[str, Any] = {}
    refused: list[str] = []
    if declared & HELD:
        refused = sorted(declared & (HELD | {"400"}))
    if queries & CURSORS and "400" in declared:
        refused = sorted({*refused, "400"})
    if refused:
        checks["positive_data_acceptance"] = {"expected-statuses": [*POSITIVE, *refused]}
    if "requestBody" in operation.definition and TOO_LARGE in declared:
        checks["negative_data_rejection"] = {"expected-statuses": [*NEGATIVE, TOO_LARGE]}
    if _relative(operation) in KEEPS_AFTER_DELETE:
        checks["use_after_free"] = {"enabled": False}
    return checks


V2_OPERATIONS: list[dict[str, Any]] = [
    {"include-operation-id": operation.definition["operationId"], "checks": checks}
    for operation in v2_operations() if (checks := widening(operation))]


def _flat(table: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _flat(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def as_toml(operations: list[dict[str, Any]]) -> str:
    """The operations as schemathesis.toml's [[operations]] tables (dotted keys; a JSON
    string, list or boolean is written alike in TOML)."""
    return "".join("\n[[operations]]\n" + "".join(f"{key} = {json.dumps(value)}\n"
                                                  for key, value in _flat(operation))
                   for operation in operations)
