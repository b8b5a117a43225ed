"""Each rule of the contract review on a pair of documents written for it: the pair finds
exactly the rule's id at its level, and the pair reversed (where that is not breaking) finds
the harmless rule it should, or nothing."""

from __future__ import annotations

from typing import Any, NamedTuple

import pytest

from app.core.contract import ERR, INFO, RULES, WARN, diff_documents, load_document
from tests.core.contract.documents import (
    TODAY,
    answer,
    diff,
    document,
    found,
    json_body,
    one,
    operation,
    query,
)

INT = {"type": "integer"}
STR = {"type": "string"}


class Case(NamedTuple):
    rule: str
    level: str
    base: dict[str, Any]
    revision: dict[str, Any]
    reverse: tuple[str, str] | str | None  # the reverse's finding, None for none, "skip"


def param_pair(old: dict[str, Any], new: dict[str, Any], required: bool = False) -> tuple:
    return (one(operation([query("limit", old, required)])),
            one(operation([query("limit", new, required)])))


def body_pair(old: dict[str, Any], new: dict[str, Any]) -> tuple:
    return one(operation(body=json_body(old)), method="post"), \
        one(operation(body=json_body(new)), method="post")


def reply_pair(old: dict[str, Any], new: dict[str, Any]) -> tuple:
    return one(operation(responses=answer(old))), one(operation(responses=answer(new)))


def obj(required: list[str] | None = None, **props: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


def ops(*methods: str, path: str = "/orders", **extra: Any) -> dict[str, Any]:
    return document({path: {m: operation(**extra) for m in methods}})


DEPRECATED = {"deprecated": True}
AHEAD = {"deprecated": True, "x-sunset": "2027-06-01"}
PAST = {"deprecated": True, "x-sunset": "2026-01-01"}
TWO_PATHS = document({"/orders": {"get": operation()}, "/pets": {"get": operation()}})
ONE_PATH = document({"/pets": {"get": operation()}})


def with_path(extra: dict[str, Any]) -> dict[str, Any]:
    return document({"/orders": {"get": operation(**extra)}, "/pets": {"get": operation()}})


CASES = [
    # Paths and operations, and x-sunset as oasdiff reads it
    Case("api-path-removed-without-deprecation", ERR, TWO_PATHS, ONE_PATH,
         ("endpoint-added", INFO)),
    Case("api-path-removed-before-sunset", ERR, with_path(AHEAD), ONE_PATH, "skip"),
    Case("api-path-removed-with-deprecation", INFO, with_path(DEPRECATED), ONE_PATH, "skip"),
    Case("api-removed-without-deprecation", ERR, ops("get", "post"), ops("get"),
         ("endpoint-added", INFO)),
    Case("api-removed-before-sunset", ERR,
         document({"/orders": {"get": operation(), "post": operation(**AHEAD)}}), ops("get"),
         "skip"),
    Case("api-removed-with-deprecation", INFO,
         document({"/orders": {"get": operation(), "post": operation(**DEPRECATED)}}),
         ops("get"), "skip"),
    Case("api-path-sunset-parse", ERR,
         with_path({"deprecated": True, "x-sunset": "next spring"}), ONE_PATH, "skip"),
    Case("endpoint-added", INFO, ops("get"), ops("get", "post"),
         ("api-removed-without-deprecation", ERR)),
    Case("endpoint-deprecated", INFO, ops("get"), ops("get", deprecated=True),
         ("endpoint-reactivated", INFO)),
    Case("api-sunset-date-too-small", ERR, ops("get"), ops("get", **PAST), "skip"),
    Case("api-deprecated-sunset-parse", ERR, ops("get"),
         ops("get", deprecated=True, **{"x-sunset": "soon"}), "skip"),
    Case("webhook-removed", ERR, document(webhooks={"orderShipped": {"post": operation()}},
                                          openapi="3.1.0"),
         document(openapi="3.1.0"), ("webhook-added", INFO)),
    # Security
    Case("api-security-added", INFO, ops("get", security=[{"key": []}]),
         ops("get", security=[{"key": []}, {"oauth": ["read"]}]), ("api-security-removed", INFO)),
    Case("api-security-scope-added", INFO, ops("get", security=[{"oauth": ["read"]}]),
         ops("get", security=[{"oauth": ["read", "write"]}]),
         ("api-security-scope-removed", INFO)),
    Case("api-global-security-added", INFO, document(security=[]),
         document(security=[{"key": []}]), ("api-global-security-removed", INFO)),
    Case("api-global-security-scope-added", INFO, document(security=[{"oauth": ["read"]}]),
         document(security=[{"oauth": ["read", "write"]}]),
         ("api-global-security-scope-removed", INFO)),
    # Request parameters
    Case("new-required-request-parameter", ERR, one(operation([])),
         one(operation([query("limit", INT, required=True)])), ("request-parameter-removed", WARN)),
    Case("new-optional-request-parameter", INFO, one(operation([])),
         one(operation([query("limit", INT)])), ("request-parameter-removed", WARN)),
    Case("request-parameter-became-required", ERR, one(operation([query("limit", INT)])),
         one(operation([query("limit", INT, required=True)])),
         ("request-parameter-became-optional", INFO)),
    Case("request-parameter-type-changed", ERR, *param_pair(INT, STR),
         ("request-parameter-type-changed", ERR)),
    Case("request-parameter-type-generalized", INFO, *param_pair(INT, {"type": "number"}),
         ("request-parameter-type-changed", ERR)),
    Case("request-parameter-enum-value-removed", ERR,
         *param_pair({"type": "string", "enum": ["a", "b"]}, {"type": "string", "enum": ["a"]}),
         ("request-parameter-enum-value-added", INFO)),
    Case("request-parameter-became-enum", ERR,
         *param_pair(STR, {"type": "string", "enum": ["a"]}), None),
    Case("request-parameter-min-increased", ERR,
         *param_pair({"type": "integer", "minimum": 1}, {"type": "integer", "minimum": 5}),
         ("request-parameter-min-decreased", INFO)),
    Case("request-parameter-max-decreased", ERR,
         *param_pair({"type": "integer", "maximum": 100}, {"type": "integer", "maximum": 50}),
         ("request-parameter-max-increased", INFO)),
    Case("request-parameter-max-length-decreased", ERR,
         *param_pair({"type": "string", "maxLength": 64}, {"type": "string", "maxLength": 8}),
         ("request-parameter-max-length-increased", INFO)),
    Case("request-parameter-pattern-added", WARN,
         *param_pair(STR, {"type": "string", "pattern": "^[a-z]+$"}),
         ("request-parameter-pattern-removed", INFO)),
    Case("request-parameter-pattern-changed", WARN,
         *param_pair({"type": "string", "pattern": "^[a-z]+$"},
                     {"type": "string", "pattern": "^[a-f]+$"}), "skip"),
    Case("request-parameter-max-items-decreased", ERR,
         *param_pair({"type": "array", "items": STR, "maxItems": 3},
                     {"type": "array", "items": STR, "maxItems": 2}),
         ("request-parameter-max-items-increased", INFO)),
    # Request bodies
    Case("request-body-added-required", ERR, one(operation(), method="post"),
         one(operation(body=json_body(obj())), method="post"), ("request-body-removed", ERR)),
    Case("request-body-added-optional", INFO, one(operation(), method="post"),
         one(operation(body=json_body(obj(), required=False)), method="post"),
         ("request-body-removed", ERR)),
    Case("request-body-became-required", ERR,
         one(operation(body=json_body(obj(), required=False)), method="post"),
         one(operation(body=json_body(obj())), method="post"),
         ("request-body-became-optional", INFO)),
    Case("request-body-media-type-removed", ERR,
         one(operation(body={"content": {"application/json": {"schema": obj()},
                                         "text/csv": {"schema": STR}}}), method="post"),
         one(operation(body={"content": {"application/json": {"schema": obj()}}}), method="post"),
         ("request-body-media-type-added", INFO)),
    Case("request-body-type-changed", ERR, *body_pair(obj(), {"type": "array", "items": STR}),
         ("request-body-type-changed", ERR)),
    # Request body properties
    Case("new-required-request-property", ERR, *body_pair(obj(), obj(["petId"], petId=INT)),
         ("request-property-removed", WARN)),
    Case("new-optional-request-property", INFO, *body_pair(obj(), obj(petId=INT)),
         ("request-property-removed", WARN)),
    Case("request-property-became-required", ERR,
         *body_pair(obj(petId=INT), obj(["petId"], petId=INT)),
         ("request-property-became-optional", INFO)),
    Case("request-property-type-changed", ERR, *body_pair(obj(petId=INT), obj(petId=STR)),
         ("request-property-type-changed", ERR)),
    Case("request-property-enum-value-removed", ERR,
         *body_pair(obj(kind={"type": "string", "enum": ["a", "b"]}),
                    obj(kind={"type": "string", "enum": ["b"]})),
         ("request-property-enum-value-added", INFO)),
    Case("request-property-min-increased", ERR,
         *body_pair(obj(n={"type": "integer", "minimum": 1}),
                    obj(n={"type": "integer", "minimum": 2})),
         ("request-property-min-decreased", INFO)),
    Case("request-property-max-decreased", ERR,
         *body_pair(obj(n={"type": "integer", "maximum": 9}),
                    obj(n={"type": "integer", "maximum": 8})),
         ("request-property-max-increased", INFO)),
    Case("request-property-max-length-decreased", ERR,
         *body_pair(obj(s={"type": "string", "maxLength": 9}),
                    obj(s={"type": "string", "maxLength": 8})),
         ("request-property-max-length-increased", INFO)),
    Case("request-property-pattern-added", WARN,
         *body_pair(obj(s=STR), obj(s={"type": "string", "pattern": "^a"})),
         ("request-property-pattern-removed", INFO)),
    Case("request-property-became-not-nullable", ERR,
         *body_pair(obj(s={"type": "string", "nullable": True}), obj(s=STR)),
         ("request-property-became-nullable", INFO)),
    # Responses
    Case("response-success-status-removed", ERR,
         one(operation(responses={"200": {"description": "OK"}, "202": {"description": "A"}})),
         one(operation(responses={"200": {"description": "OK"}})),
         ("response-success-status-added", INFO)),
    Case("response-non-success-status-removed", INFO,
         one(operation(responses={"200": {"description": "OK"}, "404": {"description": "N"}})),
         one(operation(responses={"200": {"description": "OK"}})),
         ("response-non-success-status-added", INFO)),
    Case("response-media-type-removed", ERR,
         one(operation(responses={"200": {"description": "OK", "content": {
             "application/json": {"schema": obj()}, "text/csv": {"schema": STR}}}})),
         one(operation(responses=answer(obj()))), ("response-media-type-added", INFO)),
    Case("required-response-header-removed", ERR,
         one(operation(responses={"200": {"description": "OK", "headers": {
             "ETag": {"required": True, "schema": STR}}}})),
         one(operation(responses={"200": {"description": "OK"}})),
         ("response-header-added", INFO)),
    Case("optional-response-header-removed", WARN,
         one(operation(responses={"200": {"description": "OK", "headers": {
             "Link": {"schema": STR}}}})),
         one(operation(responses={"200": {"description": "OK"}})),
         ("response-header-added", INFO)),
    Case("response-header-became-optional", ERR,
         one(operation(responses={"200": {"description": "OK", "headers": {
             "ETag": {"required": True, "schema": STR}}}})),
         one(operation(responses={"200": {"description": "OK", "headers": {
             "ETag": {"schema": STR}}}})), None),
    Case("response-body-type-changed", ERR, *reply_pair(obj(), {"type": "array", "items": STR}),
         ("response-body-type-changed", ERR)),
    Case("response-body-became-nullable", ERR,
         *reply_pair(obj(), {"type": "object", "nullable": True, "properties": {}}),
         ("response-body-became-not-nullable", INFO)),
    # Response body properties
    Case("response-required-property-removed", ERR, *reply_pair(obj(["id"], id=INT), obj()),
         ("response-required-property-added", INFO)),
    Case("response-optional-property-removed", WARN, *reply_pair(obj(id=INT), obj()),
         ("response-optional-property-added", INFO)),
    Case("response-property-became-optional", ERR,
         *reply_pair(obj(["id"], id=INT), obj(id=INT)),
         ("response-property-became-required", INFO)),
    Case("response-property-became-nullable", ERR,
         *reply_pair(obj(id=INT), obj(id={"type": "integer", "nullable": True})),
         ("response-property-became-not-nullable", INFO)),
    Case("response-property-type-changed", ERR, *reply_pair(obj(id=INT), obj(id=STR)),
         ("response-property-type-changed", ERR)),
    Case("response-property-enum-value-added", WARN,
         *reply_pair(obj(s={"type": "string", "enum": ["a"]}),
                     obj(s={"type": "string", "enum": ["a", "b"]})),
         ("response-property-enum-value-removed", INFO)),
    Case("response-property-max-length-increased", ERR,
         *reply_pair(obj(s={"type": "string", "maxLength": 8}),
                     obj(s={"type": "string", "maxLength": 9})), None),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.rule)
def test_each_rule_finds_exactly_its_id_and_level(case: Case) -> None:
    assert RULES[case.rule] == case.level
    assert found(case.base, case.revision) == [(case.rule, case.level)]


@pytest.mark.parametrize("case", [c for c in CASES if c.reverse != "skip"],
                         ids=lambda c: c.rule)
def test_each_rule_reversed_finds_what_it_should(case: Case) -> None:
    expected = [] if case.reverse is None else [case.reverse]
    assert found(case.revision, case.base) == expected


#: The rules issue 33 names (point 2), each of which must have a pair above.
ISSUE_RULES = [
    "api-path-removed-without-deprecation", "api-removed-without-deprecation",
    "api-path-removed-before-sunset", "api-removed-before-sunset",
    "api-path-removed-with-deprecation", "api-removed-with-deprecation",
    "new-required-request-parameter", "request-parameter-became-required",
    "request-parameter-type-changed", "request-parameter-enum-value-removed",
    "request-property-enum-value-removed", "response-property-enum-value-added",
    "request-parameter-min-increased", "request-parameter-max-decreased",
    "request-parameter-max-length-decreased", "request-parameter-pattern-added",
    "request-parameter-pattern-changed", "request-property-min-increased",
    "request-property-max-decreased", "request-property-max-length-decreased",
    "request-property-pattern-added", "request-body-added-required",
    "request-body-became-required", "request-body-removed", "request-body-media-type-removed",
    "new-required-request-property", "request-property-became-required",
    "request-property-type-changed", "response-success-status-removed",
    "response-media-type-removed", "response-required-property-removed",
    "response-optional-property-removed", "response-property-became-optional",
    "response-property-became-nullable", "response-body-type-changed",
    "response-property-type-changed", "required-response-header-removed",
    "api-security-added", "api-security-scope-added", "api-global-security-added",
    "endpoint-added",
]


def test_every_rule_of_the_issue_has_a_pair_of_its_own() -> None:
    tested = {c.rule for c in CASES} | {c.reverse[0] for c in CASES
                                        if isinstance(c.reverse, tuple)}
    assert set(ISSUE_RULES) - tested == set()
    assert set(ISSUE_RULES) <= set(RULES)


def test_removing_after_the_sunset_finds_nothing() -> None:
    assert found(with_path(PAST), ONE_PATH) == []
    both = document({"/orders": {"get": operation(), "post": operation(**PAST)}})
    assert found(both, ops("get")) == []


def test_a_sunset_written_as_a_date_time_is_read_as_its_date() -> None:
    ahead = with_path({"deprecated": True, "x-sunset": "2027-06-01T00:00:00Z"})
    assert found(ahead, ONE_PATH) == [("api-path-removed-before-sunset", ERR)]


def test_a_sunset_written_as_a_bare_yaml_date_is_read() -> None:
    head = 'openapi: 3.0.3\ninfo: {title: T, version: "1"}\npaths:\n'
    base = load_document("base.yaml", text=head + (
        "  /orders:\n    get:\n      deprecated: true\n      x-sunset: 2027-06-01\n"
        "      responses: {}\n  /pets:\n    get:\n      responses: {}\n"))
    revision = load_document("revision.yaml",
                             text=head + "  /pets:\n    get:\n      responses: {}\n")
    [finding] = diff_documents(base, revision, TODAY)
    assert (finding.id, finding.source) == ("api-path-removed-before-sunset", "base.yaml:5")
    assert "2027-06-01" in finding.text


def test_deprecating_with_a_sunset_ahead_is_information() -> None:
    assert found(ops("get"), ops("get", **AHEAD)) == [("endpoint-deprecated", INFO)]


def test_a_type_dropped_from_a_request_schema_accepts_more() -> None:
    assert found(*param_pair(INT, {})) == [("request-parameter-type-generalized", INFO)]


def test_a_changed_schema_behind_a_ref_is_found_at_the_line_of_the_component() -> None:
    schemas = {"NewOrder": obj(petId=INT)}
    base = one(operation(body=json_body({"$ref": "#/components/schemas/NewOrder"})),
               method="post", schemas=schemas)
    revision = one(operation(body=json_body({"$ref": "#/components/schemas/NewOrder"})),
                   method="post", schemas={"NewOrder": obj(["petId"], petId=INT)})
    [finding] = diff(base, revision)
    assert finding.id == "request-property-became-required"
    assert finding.operation == "POST /orders" and finding.path == "/orders"
    assert finding.source.startswith("revision.yaml:")


def test_all_of_is_merged_before_comparing() -> None:
    base = body_pair(obj(), obj())[0]
    revision = one(operation(body=json_body(
        {"allOf": [{"$ref": "#/components/schemas/Base"}, obj(["petId"], petId=INT)]})),
        method="post", schemas={"Base": obj(note=STR)})
    assert sorted(found(base, revision)) == [("new-optional-request-property", INFO),
                                            ("new-required-request-property", ERR)]


def test_nested_properties_are_named_by_their_path_down_through_items() -> None:
    page = obj(orders={"type": "array", "items": obj(id=INT, petId=INT)})
    smaller = obj(orders={"type": "array", "items": obj(id=INT)})
    [finding] = diff(*reply_pair(page, smaller))
    assert finding.id == "response-optional-property-removed"
    assert "orders/items/petId" in finding.text


def test_a_recursive_schema_is_compared_without_looping() -> None:
    node = {"type": "object", "properties": {"child": {"$ref": "#/components/schemas/Node"}}}
    base = one(operation(responses=answer({"$ref": "#/components/schemas/Node"})),
               schemas={"Node": node})
    assert found(base, base) == []


def test_paths_match_whatever_their_parameters_are_named() -> None:
    base = document({"/orders/{id}": {"get": operation()}})
    revision = document({"/orders/{orderId}": {"get": operation()}})
    assert found(base, revision) == []


def test_openapi_3_1_nullable_types_are_read() -> None:
    base, revision = reply_pair(obj(id=INT), obj(id={"type": ["integer", "null"]}))
    base["openapi"] = revision["openapi"] = "3.1.0"
    assert found(base, revision) == [("response-property-became-nullable", ERR)]
