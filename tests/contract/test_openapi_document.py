"""The OpenAPI documents are complete for their readers, and served with a UI that needs no
internet access. Each document is checked as Connexion serves it, its references resolved,
and each stands alone: client generators do not follow a reference into another file."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import yaml
from connexion.spec import Specification

from app.core.config import Settings
from app.web import OPENAPI_DIR, create_app
from app.web.routing import V1, V2

SPEC = yaml.safe_load((OPENAPI_DIR / V1.document).read_text())
RESOLVED = {api.base_path: Specification.load(OPENAPI_DIR / api.document).spec
            for api in (V1, V2)}
METHODS = {"get", "put", "post", "delete", "patch"}


def resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = SPEC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def operations(spec: dict[str, Any] = SPEC) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, item in spec["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield f"{method.upper()} {path}", operation


def validator(schema: dict[str, Any]) -> jsonschema.Draft4Validator:
    """OpenAPI 3.0 schemas are close to draft 4; refs resolve against the document."""
    return jsonschema.Draft4Validator({**schema, "components": SPEC["components"]})


@pytest.mark.parametrize("version", RESOLVED)
def test_every_operation_and_parameter_is_described(version: str) -> None:
    for name, operation in operations(RESOLVED[version]):
        assert operation.get("description") and operation.get("summary"), name
        for parameter in operation.get("parameters", []):
            assert resolve(parameter).get("description"), f"{name}: a parameter"


@pytest.mark.parametrize("version", RESOLVED)
def test_every_response_is_described_with_an_example_valid_against_its_schema(
        version: str) -> None:
    for name, operation in operations(RESOLVED[version]):
        for status, response in operation["responses"].items():
            response = resolve(response)
            assert response.get("description"), f"{name} {status}"
            for media, content in response.get("content", {}).items():
                assert "example" in content, f"{name} {status} {media}: no example"
                validator(content["schema"]).validate(content["example"])
            for header, definition in response.get("headers", {}).items():
                definition = resolve(definition)
                assert definition.get("description"), f"{name} {status} {header}"
                validator(definition["schema"]).validate(
                    definition.get("example", definition["schema"].get("example"))
                )


SCHEMAS = [(version, name) for version, spec in RESOLVED.items()
           for name in sorted(spec["components"]["schemas"])]


@pytest.mark.parametrize(("version", "name"), SCHEMAS)
def test_every_schema_has_a_valid_example_and_described_fields(version: str, name: str) -> None:
    schema = RESOLVED[version]["components"]["schemas"][name]
    assert schema.get("description"), name
    assert "example" in schema, f"{name} has no example"
    validator(schema).validate(schema["example"])
    for field, definition in schema.get("properties", {}).items():
        assert definition.get("description"), f"{name}.{field}"
        if "example" in definition:
            validator(definition).validate(definition["example"])


def test_the_document_records_the_decisions_that_fill_the_specifications_gaps() -> None:
    text = (OPENAPI_DIR / V1.document).read_text()
    list_description = SPEC["paths"]["/store/orders"]["get"]["description"]
    assert "Filtering and pagination are planned for v2" in list_description
    assert "Departure from the specification" in resolve(
        {"$ref": "#/components/responses/OrderAlreadyShipped"})["description"]
    assert "most restrictive window" in text and "counts against" in text
    assert SPEC["info"]["contact"] and SPEC["info"]["license"]
    link = SPEC["paths"]["/store/orders"]["get"]["responses"]["200"]["links"]["CancelOrder"]
    assert link == {**link, "operationId": "cancelOrder",
                    "parameters": {"orderId": "$response.body#/0/id"}}


def test_the_service_serves_its_document_and_an_offline_swagger_ui(tmp_path: Any) -> None:
    app = create_app(Settings(database=str(tmp_path / "ui.db")))
    with app.test_client() as client:
        document = client.get("/v1/openapi.json")
        assert document.status_code == 200
        assert document.json()["info"]["version"] == "1.0.0"
        page = client.get("/v1/ui/")
        assert page.status_code == 200 and "swagger-ui" in page.text
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert assets and not [a for a in assets if a.startswith(("http:", "https:", "//"))]
        for asset in assets:
            assert client.get(f"/v1/ui/{asset.removeprefix('./')}").status_code == 200, asset


def test_v2_records_its_decisions_and_shares_v1s_plans_keys_and_errors() -> None:
    v1, v2 = RESOLVED["/v1"], RESOLVED["/v2"]
    raw = yaml.safe_load((OPENAPI_DIR / V2.document).read_text())
    assert raw["components"]["securitySchemes"] == v1["components"]["securitySchemes"]
    listing = v2["paths"]["/store/orders"]["get"]
    assert "keyset" in listing["description"] and "exactly once" in listing["description"]
    assert set(listing["responses"]["200"]["links"]) == {"NextPage", "GetOrder", "CancelOrder"}
    one = v2["paths"]["/store/orders/{orderId}"]
    assert one["get"]["responses"]["200"]["links"]["CancelOrder"]["operationId"] == "cancelOrder"
    # v2's cancel answers what v1's does, and 412 for an If-Match that is not current (D25).
    assert one["delete"]["responses"].keys() == v1["paths"]["/store/orders/{orderId}"][
        "delete"]["responses"].keys() | {"412"}


@pytest.mark.parametrize("version", ["/v1", "/v2"])
def test_each_version_serves_its_document_and_an_offline_ui(version: str,
                                                            tmp_path: Any) -> None:
    app = create_app(Settings(database=str(tmp_path / "ui.db")))
    with app.test_client() as client:
        document = client.get(f"{version}/openapi.json")
        assert document.status_code == 200
        assert document.json()["info"]["version"] == RESOLVED[version]["info"]["version"]
        assert "$ref" not in document.text  # whole, for a client generator
        assert "x-ratelimit-limit" not in document.headers  # unmetered (D9)
        page = client.get(f"{version}/ui/")
        assert page.status_code == 200 and "swagger-ui" in page.text


DOCUMENTS = sorted(OPENAPI_DIR.glob("*.yaml")) + sorted(OPENAPI_DIR.glob("released/*.yaml"))


def references(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every $ref in node, with where it stands."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield where, value
            else:
                yield from references(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from references(value, f"{where}/{index}")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_every_document_stands_alone_for_client_generators(document: Any) -> None:
    """openapi-python-client drops every response whose schema it reaches through another
    file (issue 23), so each document's references stay inside it, and resolve there."""
    raw = yaml.safe_load(document.read_text())
    for where, ref in references(raw):
        assert ref.startswith("#/"), f"{document.name}{where}: {ref} leaves the file"
        target = raw
        for part in ref.removeprefix("#/").split("/"):
            assert part in target, f"{document.name}{where}: {ref} names nothing"
            target = target[part]


# v2's own words for what v1 describes for itself: its ids address more than the cancel, its
# single orders carry an ETag of their own, and its Error names the field at fault (2.3.0;
# test_v2s_error_is_v1s_with_param holds the rest of it to v1's).
V2_OWN = {("parameters", "OrderId"), ("headers", "ETag"), ("schemas", "Error"),
          # v2's Pet is the catalogue's, with its stock (2.4.0, D32); v1's keeps id and name.
          ("schemas", "Pet")}


def test_what_v2_shares_with_v1_is_written_alike() -> None:
    """The plans, the key scheme, the Error object, Order, the rate-limit headers and the
    error responses are one contract in two documents (D17): v2 writes them out so
    that it stands alone, and must write them exactly as v1 does. Change both together."""
    v1 = yaml.safe_load((OPENAPI_DIR / V1.document).read_text())
    v2 = yaml.safe_load((OPENAPI_DIR / V2.document).read_text())
    assert v2["x-plans"] == v1["x-plans"], "x-plans differ between v1 and v2"
    shared = [(section, name) for section, entries in v2["components"].items()
              for name in entries if name in v1["components"].get(section, {})
              and (section, name) not in V2_OWN]
    assert {("schemas", "Order"), ("securitySchemes", "bearerAuth"),
            ("responses", "TooManyRequests"), ("headers", "XRateLimitLimit")} <= set(shared)
    for section, name in shared:
        assert v2["components"][section][name] == v1["components"][section][name], (
            f"components/{section}/{name} differs between v1 and v2")


def test_v2s_error_is_v1s_with_param() -> None:
    """v2's Error is v1's, with the optional `param` (2.3.0, issue 36) and codes only v2
    answers: v1's answers keep their shape."""
    v1 = yaml.safe_load((OPENAPI_DIR / V1.document).read_text())["components"]["schemas"]
    v2 = yaml.safe_load((OPENAPI_DIR / V2.document).read_text())["components"]["schemas"]
    v1_error, v2_error = v1["Error"], v2["Error"]
    assert "param" not in v1_error["properties"]
    assert v2_error["properties"]["param"]["type"] == "string"
    assert "param" not in v2_error["required"]
    assert {k: v for k, v in v2_error["properties"].items() if k not in ("param", "code")} == {
        k: v for k, v in v1_error["properties"].items() if k != "code"}
    v1_codes = v1_error["properties"]["code"]["x-extensible-enum"]
    v2_codes = v2_error["properties"]["code"]["x-extensible-enum"]
    assert set(v1_codes) <= set(v2_codes)
    for code in v2_codes:
        assert f"`{code}`" in v2_error["properties"]["code"]["description"], code
    assert {k: v for k, v in v2_error.items() if k != "properties"} == {
        k: v for k, v in v1_error.items() if k != "properties"}
