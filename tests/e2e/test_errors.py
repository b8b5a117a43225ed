"""The requests of issue 36, as a new user tried them against v2's writes, over real HTTP
against `petstore serve` with a pets catalogue imported by the operator's CLI: each answer
names the field at fault in our words, and an order for a pet the shop does not have is
refused. Then the pet rule's other two cases: the operator's import is not held to it, and
a shop without a catalogue takes any pet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_placing import NO_QUOTAS, key_of, send
from tests.support import serving

pytestmark = pytest.mark.slow

LIST = "/v2/store/orders"
PURPOSE = ("send a key of your own making with each new order, such as a UUID (1 to 255 "
           "printable ASCII characters), so that a retry with the same key places the order "
           "only once.")

# The issue's table, request for request: (headers beyond the API key, body) -> answer.
ISSUE_TABLE: list[tuple[dict[str, str], Any, int, dict[str, Any]]] = [
    ({}, {"petId": 1, "quantity": 1}, 400,
     {"code": "invalid_request", "message": f"Idempotency-Key is required: {PURPOSE}",
      "param": "Idempotency-Key", "status": 400}),
    ({"Idempotency-Key": "k" * 300}, {"petId": 1, "quantity": 1}, 400,
     {"code": "invalid_request",
      "message": "Idempotency-Key is too long: it may hold at most 255 printable ASCII "
                 "characters.",
      "param": "Idempotency-Key", "status": 400}),
    ({"Idempotency-Key": "k-3"}, {"petId": 1, "quantity": 0}, 400,
     {"code": "invalid_request", "message": "quantity must be at least 1.",
      "param": "quantity", "status": 400}),
    ({"Idempotency-Key": "k-4"}, [1, 2], 400,
     {"code": "invalid_request", "message": "The request body must be a JSON object.",
      "status": 400}),
    ({"Idempotency-Key": "k-5"}, {"petId": 1, "quantity": 1, "shipDate": "tomorrow"}, 400,
     {"code": "invalid_request",
      "message": "shipDate must be a date-time with an offset, such as 2026-12-01T10:00:00Z.",
      "param": "shipDate", "status": 400}),
    ({"Idempotency-Key": "k-6"}, {"petId": 999999, "quantity": 1}, 422,
     {"code": "unknown_pet",
      "message": "petId names no pet of this shop's catalogue (there is no pet 999999); "
                 "order one of the pets GET /v1/pets lists.",
      "param": "petId", "status": 422}),
]


def test_the_issues_requests_answer_in_our_words_and_refuse_an_unknown_pet(
        tmp_path: Path) -> None:
    pets = tmp_path / "pets.json"
    pets.write_text(json.dumps([{"id": 1, "name": "Rex"}, {"id": 7, "name": "Tom"}]))
    with serving(tmp_path, **NO_QUOTAS) as server:
        auth = {"Authorization": f"Bearer {key_of(server)}"}
        server.petstore("pets", "import", str(pets))
        for headers, body, status, answer in ISSUE_TABLE:
            got, _, raw = send(server, "POST", LIST, {**auth, **headers}, body)
            assert (got, json.loads(raw)) == (status, answer), (headers, body)
        # Nothing was placed, and the refused request kept no key: corrected, it places.
        placed, _, raw = send(server, "POST", LIST, {**auth, "Idempotency-Key": "k-6"},
                              {"petId": 7, "quantity": 1})
        assert placed == 201 and json.loads(raw)["id"] == 1
        # The operator's import carries history: it is not held to the catalogue.
        orders = tmp_path / "orders.json"
        orders.write_text(json.dumps([{"petId": 999999, "quantity": 1}]))
        server.petstore("orders", "import", str(orders))
        listed, _, raw = send(server, "GET", f"{LIST}?petId=999999", auth)
        assert listed == 200 and len(json.loads(raw)["orders"]) == 1


def test_a_shop_without_a_catalogue_takes_an_order_for_any_pet(tmp_path: Path) -> None:
    with serving(tmp_path, **NO_QUOTAS) as server:
        auth = {"Authorization": f"Bearer {key_of(server)}", "Idempotency-Key": "k-1"}
        placed, _, raw = send(server, "POST", LIST, auth, {"petId": 999999, "quantity": 1})
        assert placed == 201 and json.loads(raw)["petId"] == 999999
