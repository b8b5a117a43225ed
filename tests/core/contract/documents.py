"""Small OpenAPI documents for the rule tests, built as dicts and read through the loader."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import yaml

from app.core.contract import Document, Finding, diff_documents, load_document

TODAY = dt.date(2026, 11, 25)


def document(paths: dict[str, Any] | None = None, schemas: dict[str, Any] | None = None,
             security: list[Any] | None = None, openapi: str = "3.0.3",
             webhooks: dict[str, Any] | None = None) -> dict[str, Any]:
    """An OpenAPI document with these paths, component schemas, global security and
    webhooks."""
    doc: dict[str, Any] = {"openapi": openapi, "info": {"title": "Rules", "version": "1.0.0"},
                           "paths": paths or {}}
    if security is not None:
        doc["security"] = security
    if webhooks is not None:
        doc["webhooks"] = webhooks
    components: dict[str, Any] = {"securitySchemes": {
        "key": {"type": "http", "scheme": "bearer"},
        "oauth": {"type": "oauth2", "flows": {"clientCredentials": {
            "tokenUrl": "https://example.com/token", "scopes": {"read": "", "write": ""}}}}}}
    if schemas:
        components["schemas"] = schemas
    doc["components"] = components
    return doc


def operation(parameters: list[Any] | None = None, body: dict[str, Any] | None = None,
              responses: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """An operation answering 200 with an empty description unless responses are given."""
    op: dict[str, Any] = {"responses": responses or {"200": {"description": "OK"}}}
    if parameters is not None:
        op["parameters"] = parameters
    if body is not None:
        op["requestBody"] = body
    op.update(extra)
    return op


def query(name: str, schema: dict[str, Any], required: bool = False) -> dict[str, Any]:
    """A query parameter."""
    return {"name": name, "in": "query", "required": required, "schema": schema}


def json_body(schema: dict[str, Any], required: bool = True) -> dict[str, Any]:
    """A request body of application/json."""
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def answer(schema: dict[str, Any], status: str = "200", **extra: Any) -> dict[str, Any]:
    """Responses with one application/json answer."""
    return {status: {"description": "OK", "content": {"application/json": {"schema": schema}},
                     **extra}}


def one(op: dict[str, Any], path: str = "/orders", method: str = "get",
        **kwargs: Any) -> dict[str, Any]:
    """A document with one operation."""
    return document({path: {method: op}}, **kwargs)


def load(doc: dict[str, Any], name: str) -> Document:
    """doc through the loader, as if read from the file name."""
    return load_document(name, text=yaml.safe_dump(doc, sort_keys=False))


def diff(base: dict[str, Any], revision: dict[str, Any]) -> list[Finding]:
    """The findings from base to revision, on TODAY."""
    return diff_documents(load(base, "base.yaml"), load(revision, "revision.yaml"), TODAY)


def found(base: dict[str, Any], revision: dict[str, Any]) -> list[tuple[str, str]]:
    """(rule id, level) of each finding from base to revision."""
    return [(f.id, f.level) for f in diff(base, revision)]


def edited(doc: dict[str, Any], change: Any) -> dict[str, Any]:
    """A copy of doc, changed in place by change(copy)."""
    copied = copy.deepcopy(doc)
    change(copied)
    return copied
