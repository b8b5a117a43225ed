"""Errors a program and a person can act on (issue 36): one table of rules, each with its
plain sentence, used by the body and the parameter validation alike, in both versions;
v2's Error names the field at fault (`param`), v1's keeps its shape; the Idempotency-Key
says what is wrong with it; and the pets catalogue refuses an order for a pet it does not
hold. Every response is validated against its document."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core import problems
from app.core.errors import PetstoreError
from app.core.storage import Store
from app.web.errors import translation
from app.web.routing import OPENAPI_DIR, V1, V2
from tests.support import assert_error

LIST = "/v2/store/orders"
NEW = {"petId": 7, "quantity": 2}
KEY = {"Idempotency-Key": "k-1"}
JSON = {"Content-Type": "application/json"}
MEMBERS = "its members are petId, quantity, shipDate."
LONE_SURROGATE = ("The request body is not valid JSON text: one of its \\u escapes stands for "
                  "half of a surrogate pair alone (such as \\ud800), which is no character.")
INT64 = "from -9223372036854775808 to 9223372036854775807"
PURPOSE = ("send a key of your own making with each new order, such as a UUID (1 to 255 "
           "printable ASCII characters), so that a retry with the same key places the order "
           "only once.")

# rule, request (method, path, headers, JSON body or raw bytes), message, param. The same
# rule, where both versions meet it, answers the same sentence; v1's without `param`.
RULES: list[tuple[str, tuple[str, str, dict[str, str], Any], str, str | None]] = [
    # headers
    ("header missing", ("POST", LIST, {}, NEW), f"Idempotency-Key is required: {PURPOSE}",
     "Idempotency-Key"),
    ("header too long", ("POST", LIST, {"Idempotency-Key": "k" * 300}, NEW),
     "Idempotency-Key is too long: it may hold at most 255 printable ASCII characters.",
     "Idempotency-Key"),
    ("header too long, quoted", ("POST", LIST, {"Idempotency-Key": f'"{"k" * 256}"'}, NEW),
     "Idempotency-Key is too long: it may hold at most 255 printable ASCII characters.",
     "Idempotency-Key"),
    ("header not printable ASCII", ("POST", LIST, {"Idempotency-Key": "a\tb"}, NEW),
     "Idempotency-Key must hold only printable ASCII characters (letters, digits, "
     "punctuation and spaces), 1 to 255 of them.", "Idempotency-Key"),
    ("header not ASCII", ("POST", LIST, {"Idempotency-Key": "café".encode()}, NEW),
     "Idempotency-Key must hold only printable ASCII characters (letters, digits, "
     "punctuation and spaces), 1 to 255 of them.", "Idempotency-Key"),
    ("header empty", ("POST", LIST, {"Idempotency-Key": ""}, NEW),
     "Idempotency-Key must not be empty: it takes 1 to 255 printable ASCII characters.",
     "Idempotency-Key"),
    ("header too long (v2)", ("GET", LIST, {"If-None-Match": "x" * 8193}, None),
     "If-None-Match must be at most 8192 characters long.", "If-None-Match"),
    ("header too long (v1)", ("GET", "/v1/store/orders", {"If-None-Match": "x" * 8193}, None),
     "If-None-Match must be at most 8192 characters long.", None),
    ("several Authorization headers", ("POST", LIST, {"Authorization": "Bearer x"}, NEW),
     "Send one Authorization header, not several.", "Authorization"),
    # the request body as a whole
    ("body not an object", ("POST", LIST, KEY, [1, 2]),
     "The request body must be a JSON object.", None),
    ("body a string", ("POST", LIST, KEY, "order"),
     "The request body must be a JSON object.", None),
    ("body not JSON", ("POST", LIST, {**KEY, **JSON}, b"{"),
     "The request body is not valid JSON.", None),
    ("body not UTF-8", ("POST", LIST, {**KEY, **JSON}, b'{"petId": "\xff"}'),
     "The request body is not valid JSON: it is not UTF-8.", None),
    # A member named by half a surrogate pair alone broke the Error that refused it.
    ("body a lone surrogate", ("POST", LIST, {**KEY, **JSON}, b'{"\\udc00x": 1}'),
     LONE_SURROGATE, None),
    ("body a lone surrogate in a value",
     ("POST", f"{LIST}/1/ship", JSON, b'{"shipDate": "\\ud800"}'), LONE_SURROGATE, None),
    ("body missing", ("POST", LIST, {**KEY, **JSON}, b""),
     "The request body is required: send a JSON object.", None),
    # members of the body
    ("member missing", ("POST", LIST, KEY, {"quantity": 1}), "petId is required.", "petId"),
    ("member not a whole number", ("POST", LIST, KEY, {**NEW, "quantity": "2"}),
     "quantity must be a whole number from 1 to 10000.", "quantity"),
    ("member not a whole number (fraction)", ("POST", LIST, KEY, {**NEW, "quantity": 1.5}),
     "quantity must be a whole number from 1 to 10000.", "quantity"),
    ("member below the minimum", ("POST", LIST, KEY, {"petId": 1, "quantity": 0}),
     "quantity must be at least 1.", "quantity"),
    ("member above the maximum", ("POST", LIST, KEY, {**NEW, "quantity": 10001}),
     "quantity must be at most 10000.", "quantity"),
    ("member not a date-time", ("POST", LIST, KEY, {**NEW, "shipDate": "tomorrow"}),
     "shipDate must be a date-time with an offset, such as 2026-12-01T10:00:00Z.",
     "shipDate"),
    ("member a date-time without an offset",
     ("POST", LIST, KEY, {**NEW, "shipDate": "2026-12-01T10:00:00"}),
     "shipDate must be a date-time with an offset, such as 2026-12-01T10:00:00Z.",
     "shipDate"),
    ("member not text", ("POST", LIST, KEY, {**NEW, "shipDate": 20261201}),
     "shipDate must be a date-time with an offset, such as 2026-12-01T10:00:00Z.",
     "shipDate"),
    ("member too long",
     ("POST", LIST, KEY, {**NEW, "shipDate": "2026-12-01T10:00:00." + "0" * 50 + "Z"}),
     "shipDate must be at most 64 characters long.", "shipDate"),
    ("unknown member", ("POST", LIST, KEY, {**NEW, "id": 3}),
     f"id is not a member of this request body; {MEMBERS}", "id"),
    ("unknown member with an empty name", ("POST", LIST, KEY, {**NEW, "": 1}),
     f"A name that is empty is not a member of this request body; {MEMBERS}", ""),
    ("read-only member", ("POST", LIST, KEY, {**NEW, "status": "shipped"}),
     f"status is not a member of this request body; {MEMBERS}", "status"),
    ("unknown member of another body", ("POST", f"{LIST}/1/ship", {}, {"x": 1}),
     "x is not a member of this request body; its only member is shipDate.", "x"),
    ("member not a date-time, another body",
     ("POST", f"{LIST}/1/ship", {}, {"shipDate": "soon"}),
     "shipDate must be a date-time with an offset, such as 2026-12-01T10:00:00Z.",
     "shipDate"),
    # query parameters
    ("unknown query parameter", ("GET", f"{LIST}?foo=1", {}, None),
     "foo is not a query parameter of this operation; its query parameters are limit, "
     "cursor, status, petId, complete, shipDateFrom, shipDateTo, sort.", "foo"),
    ("query not a whole number", ("GET", f"{LIST}?limit=x", {}, None),
     "limit must be a whole number from 1 to 1000, in plain decimal digits.", "limit"),
    ("query below the minimum", ("GET", f"{LIST}?limit=0", {}, None),
     "limit must be at least 1.", "limit"),
    ("query above the maximum", ("GET", f"{LIST}?limit=1001", {}, None),
     "limit must be at most 1000.", "limit"),
    ("query above the maximum, feed", ("GET", "/v2/store/order-changes?wait=31", {}, None),
     "wait must be at most 30.", "wait"),
    ("query not one of the listed values", ("GET", f"{LIST}?sort=price", {}, None),
     "sort must be one of id, -id, shipDate, -shipDate.", "sort"),
    ("query list with an unlisted value", ("GET", f"{LIST}?status=pending,lost", {}, None),
     "status may list only these values: pending, shipped, cancelled.", "status"),
    ("query list too long",
     ("GET", f"{LIST}?status=pending,shipped,cancelled,pending", {}, None),
     "status may list at most 3 values.", "status"),
    ("query not true or false", ("GET", f"{LIST}?complete=maybe", {}, None),
     "complete must be true or false.", "complete"),
    ("query not a date-time", ("GET", f"{LIST}?shipDateFrom=tomorrow", {}, None),
     "shipDateFrom must be a date-time with an offset, such as 2026-12-01T10:00:00Z.",
     "shipDateFrom"),
    ("query a date-time out of range",
     ("GET", f"{LIST}?shipDateTo=0001-01-01T00:00:00%2B01:00", {}, None),
     "shipDateTo must be a date-time with an offset between the years 1 and 9999 in UTC, "
     "such as 2026-12-01T10:00:00Z.", "shipDateTo"),
    ("query empty", ("GET", f"{LIST}?cursor=", {}, None), "cursor must not be empty.",
     "cursor"),
    ("query an edited cursor", ("GET", f"{LIST}?cursor=abc", {}, None),
     "cursor is not one this service gave out (it was changed or cut short).", "cursor"),
    ("query an edited feed cursor", ("GET", "/v2/store/order-changes?after=abc", {}, None),
     "after is not one this service gave out (it was changed or cut short).", "after"),
    # path parameters, in both versions
    ("path not a whole number (v2)", ("GET", f"{LIST}/abc", {}, None),
     f"orderId must be a whole number {INT64}, in plain decimal digits.", "orderId"),
    ("path not a whole number (v1)", ("DELETE", "/v1/store/orders/005", {}, None),
     f"orderId must be a whole number {INT64}, in plain decimal digits.", None),
    ("path above the maximum (v2)", ("DELETE", f"{LIST}/9223372036854775808", {}, None),
     "orderId must be at most 9223372036854775807.", "orderId"),
    ("path above the maximum (v1)", ("DELETE", "/v1/store/orders/9223372036854775808", {},
                                     None),
     "orderId must be at most 9223372036854775807.", None),
    ("path below the minimum (v1)", ("GET", "/v1/pets/-9223372036854775809", {}, None),
     "petId must be at least -9223372036854775808.", None),
]


def send(client: Any, auth: dict[str, str], method: str, path: str,
         headers: dict[str, Any], body: Any) -> Any:
    sent: Any = {**auth, **headers}
    if "Authorization" in headers:  # one more, beside the valid one
        sent = [*auth.items(), *headers.items()]
    if isinstance(body, bytes):
        return client.request(method, path, content=body, headers=sent)
    if body is None:
        return client.request(method, path, headers=sent)
    return client.request(method, path, json=body, headers=sent)


@pytest.mark.parametrize(("rule", "request_", "message", "param"), RULES,
                         ids=[row[0] for row in RULES])
def test_every_rule_answers_its_sentence_naming_the_field_in_v2(
        client: Any, auth: dict[str, str], store: Store, rule: str,
        request_: tuple[str, str, dict[str, str], Any], message: str,
        param: str | None) -> None:
    method, path, headers, body = request_
    response = send(client, auth, method, path, headers, body)
    error = assert_error(response, 400, "invalid_request", param)
    assert error["message"] == message
    if param is None:  # v1, or no one field at fault
        assert "param" not in error
    assert store.count_orders() == 4  # nothing placed (tests/web/conftest.py's ORDERS)


def test_a_cursor_sent_with_other_filters_is_400_naming_cursor(
        client: Any, auth: dict[str, str]) -> None:
    cursor = client.get(f"{LIST}?limit=1", headers=auth).json()["next"]
    error = assert_error(client.get(f"{LIST}?limit=1&sort=-id&cursor={cursor}",
                                    headers=auth), 400, "invalid_request", "cursor")
    assert error["message"] == (
        "cursor belongs to other filters or another sort: send it with the same status, "
        "petId, complete, shipDateFrom, shipDateTo and sort as the page it came from.")


def test_a_key_reused_with_another_body_is_422_naming_idempotency_key(
        client: Any, auth: dict[str, str]) -> None:
    assert client.post(LIST, json=NEW, headers={**auth, **KEY}).status_code == 201
    reused = client.post(LIST, json={**NEW, "quantity": 3}, headers={**auth, **KEY})
    assert_error(reused, 422, "idempotency_key_reused", "Idempotency-Key")


# the pets catalogue -----------------------------------------------------------------------


def test_with_a_catalogue_an_order_for_a_pet_outside_it_is_422_and_keeps_no_key(
        client: Any, auth: dict[str, str], store: Store) -> None:
    store.import_pets([{"id": 7, "name": "Rex"}, {"id": 8, "name": "Tom"}])
    refused = client.post(LIST, json={"petId": 999999, "quantity": 1},
                          headers={**auth, **KEY})
    error = assert_error(refused, 422, "unknown_pet", "petId")
    assert error["message"] == (
        "petId names no pet of this shop's catalogue (there is no pet 999999); order one of "
        "the pets GET /v1/pets lists.")
    for header in ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset"):
        assert header in refused.headers
    assert store.count_orders() == 4
    # Corrected, the same key places (D23: a refused request keeps no key).
    placed = client.post(LIST, json=NEW, headers={**auth, **KEY})
    assert placed.status_code == 201 and placed.json()["petId"] == 7
    assert "idempotent-replayed" not in placed.headers


def test_without_a_catalogue_an_order_for_any_pet_is_placed(
        client: Any, auth: dict[str, str]) -> None:
    placed = client.post(LIST, json={"petId": 999999, "quantity": 1},
                         headers={**auth, **KEY})
    assert placed.status_code == 201 and placed.json()["petId"] == 999999


def test_the_errors_page_lists_every_code_and_every_rule() -> None:
    """docs/errors.md cannot drift from the document's codes or from the table of rules."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    document = yaml.safe_load((OPENAPI_DIR / V2.document).read_text())
    for code in document["components"]["schemas"]["Error"]["properties"]["code"][
            "x-extensible-enum"]:
        assert f"| `{code}` |" in page, f"{code} is not in docs/errors.md's codes"
    for rule in problems.RULES:
        assert f"`{rule}`" in page, f"the rule {rule} is not in docs/errors.md"


ERROR_ROW = re.compile(r"^\| `([a-z_]+)` \| (\d{3}) \|", re.MULTILINE)
CODE = re.compile(r"[a-z]+(_[a-z]+)*")
# The codes answered outside the documents' operations, each with its reason: the worker's
# 431 for a request head past its bound is written before any application sees the
# request (D27; docs/running/clients.md says it).
OUTSIDE_THE_DOCUMENTS = frozenset({"request_header_fields_too_large"})


def _codes_of(api: Any) -> list[str]:
    document = yaml.safe_load((OPENAPI_DIR / api.document).read_text())
    return list(document["components"]["schemas"]["Error"]["properties"]["code"][
        "x-extensible-enum"])


def _status_and_code(status: ast.expr, code: ast.expr) -> tuple[int, str] | None:
    if (isinstance(status, ast.Constant) and isinstance(status.value, int)
            and 400 <= status.value < 600 and isinstance(code, ast.Constant)
            and isinstance(code.value, str) and CODE.fullmatch(code.value)):
        return status.value, code.value
    return None


def _codes_the_service_writes() -> dict[str, set[int]]:
    """Every Error code app/ writes, with its statuses: a status and a code side by side
    in a call (error_response(404, "not_found", ...), a Translation of DOMAIN_ERRORS such as
    Translation(410, "gone")), or a status's (code, message) in a table."""
    found: dict[str, set[int]] = {}
    for source in (Path(__file__).resolve().parents[2] / "app").rglob("*.py"):
        for node in ast.walk(ast.parse(source.read_text())):
            pairs: list[tuple[ast.expr, ast.expr]] = []
            if isinstance(node, ast.Call):
                pairs = list(zip(node.args, node.args[1:], strict=False))
            elif isinstance(node, ast.Dict):
                pairs = [(key, value.elts[0]) for key, value in zip(node.keys, node.values,
                                                                    strict=True)
                         if key is not None and isinstance(value, ast.Tuple) and value.elts]
            for status, code in pairs:
                if (written := _status_and_code(status, code)) is not None:
                    found.setdefault(written[1], set()).add(written[0])
    return found


def test_a_code_is_in_the_documents_the_errors_page_and_the_code_alike() -> None:
    """A new Error code is written in four places: app/ (a row of DOMAIN_ERRORS, or an
    answer of its own), v2's Error.code (and v1's where v1 answers it), and the table of
    docs/errors.md with its status. A code in one and not the others fails here."""
    v2 = set(_codes_of(V2))
    page = (Path(__file__).resolve().parents[2] / "docs" / "errors.md").read_text()
    rows = {code: int(status) for code, status in ERROR_ROW.findall(page)}
    written = _codes_the_service_writes()
    assert {"order_not_found", "invalid_request", "rate_limit_exceeded"} <= set(written)
    assert set(written) >= OUTSIDE_THE_DOCUMENTS, "an exception here that nothing writes"
    assert sorted(set(written) - v2 - OUTSIDE_THE_DOCUMENTS) == [], (
        "codes the service writes that v2 does not list")
    assert sorted(v2 - set(written)) == [], "codes v2 lists that the service never writes"
    assert sorted(set(rows) ^ v2) == [], "docs/errors.md's codes differ from v2's"
    assert set(_codes_of(V1)) <= v2
    for code, statuses in written.items():
        assert code in OUTSIDE_THE_DOCUMENTS or statuses <= {rows[code]}, (
            f"{code}: docs/errors.md says {rows[code]}")


def _subclasses(kind: type[Any]) -> set[type[Any]]:
    return {kind, *(sub for child in kind.__subclasses__() for sub in _subclasses(child))}


def test_every_domain_exception_a_request_can_raise_has_its_status_and_code() -> None:
    """A new exception of the domain gets its status and code in app/web/errors.py's
    DOMAIN_ERRORS, or is named here as one only the CLI or the console raises (a 500
    otherwise)."""
    only_the_cli = {"DuplicateOrder", "DuplicatePet", "DuplicateKey", "InvalidKeyValue",
                    "StockShortfall",
                    # the console's (D35), which its pages and `petstore users` say
                    "DuplicateUser", "UserNotFound", "InvalidUserName", "PasswordRefused",
                    "SignInFailed", "WrongCode", "SignInThrottled",
                    # users and roles (D38), which the users page and `petstore users` say
                    "InvalidRole", "UserRefused",
                    # recovery codes and restoring a pet, which only the console does
                    "WrongRecoveryCode", "PetNotWithdrawn",
                    # a key's rotation, which only `petstore keys rotate` and the console do
                    "KeyNotFound", "KeyRevoked"}
    kinds = {kind for kind in _subclasses(PetstoreError) - {PetstoreError}
             if kind.__module__.startswith("app.")}
    assert only_the_cli <= {kind.__name__ for kind in kinds}
    assert sorted(kind.__name__ for kind in kinds
                  if kind.__name__ not in only_the_cli and translation(kind) is None) == []
