"""The contract review on the project's own documents: the released files hold against the
live ones, edits that change nothing for a client find nothing, and a checked list of edits
of the live v2 document finds what it should, at the line of the edit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from app.core.contract import (
    ERR,
    INFO,
    WARN,
    ContractError,
    Finding,
    diff_documents,
    load_document,
)
from tests.core.contract.documents import TODAY

ROOT = Path(__file__).resolve().parents[3]
LIVE_V2 = "openapi/petstore-v2.yaml"
RELEASED = sorted((ROOT / "openapi" / "released").glob("petstore-v*-*.yaml"))


def live_of(released: Path) -> str:
    major = re.match(r"petstore-(v\d+)-", released.name)
    assert major, released
    return f"openapi/petstore-{major.group(1)}.yaml"


def text_of(name: str) -> str:
    return (ROOT / name).read_text()


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"the edit expects {old!r} once in {LIVE_V2}"
    return text.replace(old, new)


def review(revision_text: str, base_text: str | None = None) -> list[Finding]:
    base = load_document(LIVE_V2, text=base_text or text_of(LIVE_V2))
    return diff_documents(base, load_document("edited.yaml", text=revision_text), TODAY)


def line(finding: Finding, texts: dict[str, str]) -> str:
    file, number = finding.source.rsplit(":", 1)
    return texts[file].splitlines()[int(number) - 1]


@pytest.mark.parametrize("released", RELEASED, ids=lambda p: p.name)
def test_each_released_document_holds_against_the_live_one(released: Path) -> None:
    name = f"openapi/released/{released.name}"
    findings = diff_documents(load_document(name, text=released.read_text()),
                              load_document(live_of(released), text=text_of(live_of(released))))
    assert [f for f in findings if f.level == ERR] == []


@pytest.mark.parametrize("name", ["openapi/petstore-v1.yaml", LIVE_V2, "openapi/ops.yaml"])
def test_a_document_against_itself_finds_nothing(name: str) -> None:
    document = load_document(name, text=text_of(name))
    assert diff_documents(document, document) == []


def test_a_description_edited_and_an_example_changed_find_nothing() -> None:
    text = text_of(LIVE_V2)
    text = edit(text, "description: How many orders a page holds at most.",
                "description: At most this many orders on a page.")
    text = edit(text, "      example: -shipDate\n", "      example: shipDate\n")
    assert review(text) == []


def test_keys_reordered_and_every_ref_inlined_find_nothing() -> None:
    live = yaml.safe_load(text_of(LIVE_V2))
    components = live["components"]

    def inline(node: object) -> object:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.count("/") == 3:
                _, _, kind, name = ref.split("/")
                return inline(components[kind][name])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    live["paths"] = inline(live["paths"])
    assert review(yaml.safe_dump(live, sort_keys=True)) == []


def test_removing_an_operation_is_an_error_at_its_line_in_the_base() -> None:
    text = text_of(LIVE_V2)
    start = text.index("    delete:\n      tags: [orders]\n      operationId: cancelOrder")
    end = text.index("  /store/orders/{orderId}/ship:")
    findings = review(text[:start] + text[end:])
    assert [(f.id, f.level, f.operation) for f in findings] == [
        ("api-removed-without-deprecation", ERR, "DELETE /store/orders/{orderId}")]
    assert line(findings[0], {LIVE_V2: text}) == "    delete:"


def test_a_smaller_maximum_of_limit_is_an_error_at_the_edited_line() -> None:
    # The orders' limit (listPets' has its own, written alike).
    text = edit(text_of(LIVE_V2),
                "How many orders a page holds at most.\n      schema:\n        type: integer\n"
                "        minimum: 1\n        maximum: 1000",
                "How many orders a page holds at most.\n      schema:\n        type: integer\n"
                "        minimum: 1\n        maximum: 500")
    findings = review(text)
    assert {(f.id, f.level) for f in findings} == {("request-parameter-max-decreased", ERR)}
    assert {f.operation for f in findings} == {"GET /store/orders", "GET /store/order-changes",
                                               "GET /pet-changes"}
    assert {line(f, {"edited.yaml": text}) for f in findings} == {"        maximum: 500"}
    assert "from 1000 to 500" in findings[0].text


def test_a_new_required_query_parameter_is_an_error() -> None:
    text = edit(text_of(LIVE_V2), '        - $ref: "#/components/parameters/IfNoneMatch"\n'
                '      responses:\n        "200":\n          description: One page of orders',
                '        - $ref: "#/components/parameters/IfNoneMatch"\n'
                '        - name: shop\n          in: query\n          required: true\n'
                '          schema:\n            type: string\n'
                '      responses:\n        "200":\n          description: One page of orders')
    [finding] = review(text)
    assert (finding.id, finding.level, finding.operation) == (
        "new-required-request-parameter", ERR, "GET /store/orders")
    assert line(finding, {"edited.yaml": text}) == "        - name: shop"


def test_removing_pet_id_from_order_warns_at_its_line_in_the_base() -> None:
    old = ("        petId:\n          type: integer\n          format: int64\n"
           "          description: Identifier of the animal in this order.\n")
    text = text_of(LIVE_V2)
    start = text.index(old)
    end = text.index("        quantity:", start)
    findings = review(text[:start] + text[end:])
    assert {(f.id, f.level) for f in findings} == {("response-optional-property-removed", WARN)}
    assert {"GET /store/orders", "POST /store/orders", "GET /store/orders/{orderId}",
            "GET /store/order-changes"} <= {f.operation for f in findings}
    assert {line(f, {LIVE_V2: text}) for f in findings} == {"        petId:"}


def test_narrowing_the_status_enum_breaks_the_filter_but_not_the_answers() -> None:
    text = edit(text_of(LIVE_V2),
                "          enum: [pending, shipped, cancelled]\n      example: [pending, shipped]",
                "          enum: [pending, shipped]\n      example: [pending, shipped]")
    text = edit(text, "          readOnly: true\n          enum: [pending, shipped, cancelled]",
                "          readOnly: true\n          enum: [pending, shipped]")
    findings = review(text)
    errors = [f for f in findings if f.level == ERR]
    assert [(f.id, f.operation) for f in errors] == [
        ("request-parameter-enum-value-removed", "GET /store/orders")]
    assert "cancelled" in errors[0].text
    assert {(f.id, f.level) for f in findings if f not in errors} == {
        ("response-property-enum-value-removed", INFO)}


def test_a_file_that_is_not_yaml_or_not_openapi_3_names_the_file_and_line() -> None:
    with pytest.raises(ContractError, match=r"^bad\.yaml:2: is not valid YAML"):
        load_document("bad.yaml", text="openapi: 3.0.3\npaths: a: b\ninfo: {}\n")
    with pytest.raises(ContractError, match=r"^old\.yaml:1: .*Swagger 2\.0"):
        load_document("old.yaml", text='swagger: "2.0"\n')
    with pytest.raises(ContractError, match=r"^new\.yaml:2: is OpenAPI 3\.2\.0"):
        load_document("new.yaml", text="info: {}\nopenapi: 3.2.0\n")
