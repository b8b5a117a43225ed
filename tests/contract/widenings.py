"""What schemathesis is told of v2 beyond its document, written once: the statuses by which
v2 may refuse schema-valid data (or answer schema-violating data) for reasons no JSON
Schema can state, and the one check that does not apply where a DELETE keeps its resource.
The in-process run (test_schemathesis.py) takes V2_OPERATIONS as its configuration's
`operations`; the CLI's live run (test_st_cli.py) as the same in its TOML (as_toml). The
first entry an operation matches applies: the writes come first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

# The writes of 2.1.0 may refuse schema-valid data in ways no JSON Schema can rule out: 412
# when a generated If-Match is not the order's current version (D25); 409 when the order is
# not in a state the move starts from (shipped, cancelled, not yet shipped) or a generated
# Idempotency-Key is in use; 422 when a generated key comes again with another body (D23);
# and 400 when a generated date-time is one RFC 3339 allows that the store cannot hold (a
# leap second, or more digits of a second than microseconds).
WRITES_REFUSE = ["2xx", "400", "401", "403", "404", "409", "412", "422", "429", "5xx"]
V2_WRITES = [{"include-operation-id": operation,
              "checks": {"positive_data_acceptance": {"expected-statuses": WRITES_REFUSE}}}
             for operation in ("placeOrder", "shipOrder", "completeOrder", "cancelOrder")]
# The catalogue's writes (2.4.0, D32, D33) refuse schema-valid data as the orders' do: 409
# and 422 for a generated Idempotency-Key in use or come again with another body, 412 for a
# generated If-Match, 409 for a stock below the units held or a stock not tracked, and 400
# for what no JSON Schema says alike in every regular expression dialect (a photo URL with
# a character Python counts as a space and ECMA 262 does not) or at all (a delta of 0), and
# a name, category or tag with a control or direction character (D37, as the webhooks').
V2_CATALOGUE = [{"include-operation-id": operation,
                 "checks": {"positive_data_acceptance": {"expected-statuses": WRITES_REFUSE}}}
                for operation in ("addPet", "updatePet", "adjustStock", "withdrawPet")]
# The webhook endpoints (D28) refuse schema-valid URLs no JSON Schema can rule out: 400 for
# one that is not http(s) or carries userinfo, or for a description with a control or
# direction character (D37: the descriptions say so, not a pattern), 422 for a host that is
# not public or does not resolve; 409 past 16 endpoints a key; a replay's cursor, like the
# feed's, 400 or 410.
# A schema-violating body of 2,048 escaped characters may also pass the 16 KiB a body may
# have: 413.
V2_WEBHOOKS = [{"include-operation-id": operation,
                "checks": {"positive_data_acceptance": {
                    "expected-statuses": [*WRITES_REFUSE, "410"]},
                    "negative_data_rejection": {"expected-statuses": [
                        "400", "401", "403", "404", "406", "413", "422", "428", "5xx"]}}}
               for operation in ("createWebhookEndpoint", "updateWebhookEndpoint",
                                 "replayWebhookEndpoint")]
# The feed's `after` is any string by the schema, but only a cursor this service gave out is
# accepted (D26): a forged one is 400, one of another database 410.
V2_FEED = {
    "include-operation-id": "listOrderChanges",
    "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "400", "401", "403", "410", "429", "5xx"]}},
}
# v2's lists' cursors likewise: only a cursor this service gave out, for the same filters
# and sort, is accepted (D18), so schema-valid data may be refused with 400 there. (No JSON
# Schema can say "a string this service signed".)
V2_CURSORS = [{"include-path": path, "include-method": "GET",
               "checks": {"positive_data_acceptance": {"expected-statuses": [
                   "2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]}}}
              for path in ("/store/orders", "/pets")]
# use_after_free expects a resource gone after its DELETE. Of v2's three DELETEs, two keep
# what they act on: cancelOrder the order, cancelled (D2, D20; getOrder answers it with
# status "cancelled"), withdrawPet the pet, withdrawn (D32: orders name it). The check
# spans the path's GET and DELETE. The third, deleteWebhookEndpoint, removes its endpoint
# and is held to the check.
KEEPS_AFTER_DELETE = ("/store/orders/{orderId}", "/pets/{petId}")
V2_KEPT = [{"include-path": path, "checks": {"use_after_free": {"enabled": False}}}
           for path in KEEPS_AFTER_DELETE]
V2_OPERATIONS: list[dict[str, Any]] = [*V2_WRITES, *V2_CATALOGUE, *V2_WEBHOOKS, V2_FEED,
                                       *V2_CURSORS, *V2_KEPT]


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
