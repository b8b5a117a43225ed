"""The OpenAPI documents are complete for their readers, and served with a UI that needs no
internet access. Each document is checked as Connexion serves it, its references (v2's into
v1's components) resolved."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import yaml
from connexion.spec import Specification

from app.core.config import Settings
from app.web import API_SPEC, OPENAPI_DIR, create_app
from app.web.routing import V1, V2

SPEC = yaml.safe_load((OPENAPI_DIR / API_SPEC).read_text())
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
    text = (OPENAPI_DIR / API_SPEC).read_text()
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
    # One source for the plans, the key scheme and the Error object: references, not copies.
    assert raw["x-plans"] == {"$ref": "petstore-v1.yaml#/x-plans"}
    assert v2["x-plans"] == v1["x-plans"]
    assert v2["components"]["securitySchemes"] == v1["components"]["securitySchemes"]
    listing = v2["paths"]["/store/orders"]["get"]
    assert "keyset" in listing["description"] and "exactly once" in listing["description"]
    assert set(listing["responses"]["200"]["links"]) == {"NextPage", "GetOrder", "CancelOrder"}
    one = v2["paths"]["/store/orders/{orderId}"]
    assert one["get"]["responses"]["200"]["links"]["CancelOrder"]["operationId"] == "cancelOrder"
    assert one["delete"]["responses"].keys() == v1["paths"]["/store/orders/{orderId}"][
        "delete"]["responses"].keys()


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
