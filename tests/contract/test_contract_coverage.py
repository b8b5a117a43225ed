"""The YAML and the code name each other: every operation has its handler, every handler
its operation, and every error code the YAML lists is produced by some HTTP test."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
import yaml

from app.web import OPENAPI_DIR, handlers
from app.web.routing import APIS, V1, Api, TagResolver
from tests.support import parse_python

ROOT = Path(__file__).resolve().parents[2]
SPEC = yaml.safe_load((OPENAPI_DIR / V1.document).read_text())
METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}
OPERATIONS = [
    (f"{method.upper()} {api.base_path}{path}", api, operation)
    for api in APIS
    for path, item in yaml.safe_load((OPENAPI_DIR / api.document).read_text())["paths"].items()
    for method, operation in item.items()
    if method in METHODS
]


def _handler_name(api: Api, operation: dict) -> str:
    return TagResolver(api.handlers).handler_for(operation)


def test_every_document_in_openapi_is_served() -> None:
    served = {api.document for api in APIS}
    assert {path.name for path in OPENAPI_DIR.glob("*.yaml")} == served


@pytest.mark.parametrize(("name", "api", "operation"), OPERATIONS,
                         ids=[name for name, _, _ in OPERATIONS])
def test_every_operation_resolves_to_a_handler(name: str, api: Api, operation: dict) -> None:
    module_name, _, function = _handler_name(api, operation).rpartition(".")
    handler = getattr(importlib.import_module(module_name), function, None)
    assert callable(handler), f"{name}: no handler {module_name}.{function}"
    assert handler.__doc__, f"{module_name}.{function} has no docstring"


def test_every_handler_is_named_by_an_operation() -> None:
    named = {_handler_name(api, operation) for _, api, operation in OPERATIONS}
    modules = [info.name for info in pkgutil.walk_packages(handlers.__path__,
                                                           f"{handlers.__name__}.")
               if not info.ispkg]
    assert modules
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name, function in inspect.getmembers(module, inspect.isfunction):
            if function.__module__ == module.__name__ and not name.startswith("_"):
                assert f"{module.__name__}.{name}" in named, (
                    f"{module.__name__}.{name} is not the handler of any operation"
                )


def _codes_asserted_by_http_tests() -> set[str]:
    codes = set()
    for source in (ROOT / "tests" / "web").glob("test_*.py"):
        for node in ast.walk(parse_python(source.read_text())):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", "") == "assert_error"
                    and len(node.args) >= 3 and isinstance(node.args[2], ast.Constant)):
                codes.add(node.args[2].value)
    return codes


ERROR_CODES = SPEC["components"]["schemas"]["Error"]["properties"]["code"]["x-extensible-enum"]


@pytest.mark.parametrize("code", ERROR_CODES)
def test_every_error_code_is_produced_by_an_http_test(code: str) -> None:
    assert code in _codes_asserted_by_http_tests(), (
        f"no test in tests/web asserts an Error with code {code!r}"
    )


@pytest.mark.parametrize("code", ERROR_CODES)
def test_every_error_code_is_described(code: str) -> None:
    description = SPEC["components"]["schemas"]["Error"]["properties"]["code"]["description"]
    assert re.search(rf"`{code}` \(\d{{3}}\)", description), f"{code} is not described"
