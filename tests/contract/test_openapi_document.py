"""The OpenAPI document is complete for its readers, and served with a UI that needs no
internet access."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest
import yaml

from app.core.config import Settings
from app.web import API_SPEC, OPENAPI_DIR, create_app

SPEC = yaml.safe_load((OPENAPI_DIR / API_SPEC).read_text())
METHODS = {"get", "put", "post", "delete", "patch"}


def resolve(node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = SPEC
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def operations() -> Iterator[tuple[str, dict[str, Any]]]:
    for path, item in SPEC["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield f"{method.upper()} {path}", operation


def validator(schema: dict[str, Any]) -> jsonschema.Draft4Validator:
    """OpenAPI 3.0 schemas are close to draft 4; refs resolve against the document."""
    return jsonschema.Draft4Validator({**schema, "components": SPEC["components"]})


def test_every_operation_and_parameter_is_described() -> None:
    for name, operation in operations():
        assert operation.get("description") and operation.get("summary"), name
        for parameter in operation.get("parameters", []):
            assert resolve(parameter).get("description"), f"{name}: a parameter"


def test_every_response_is_described_with_an_example_valid_against_its_schema() -> None:
    for name, operation in operations():
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


@pytest.mark.parametrize("name", sorted(SPEC["components"]["schemas"]))
def test_every_schema_has_a_valid_example_and_described_fields(name: str) -> None:
    schema = SPEC["components"]["schemas"][name]
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
