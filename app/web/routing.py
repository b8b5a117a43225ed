"""How the OpenAPI documents map onto Python: the documents served (APIS), their
operations read once (operations), one handler module per tag and one function per
operation (TagResolver). The parsing of path parameters that D7 asks for overrides
Connexion's, so it lives with the other overrides in connexion_internals.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from connexion.resolver import Resolver

from app.core import yamltext
from app.web.connexion_internals import resolved

SNAKE_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
HANDLERS = "app.web.handlers"
# The documents ship inside the package, as app.openapi: the repository's openapi/ folder,
# installed there by the wheel and mapped there by an editable install (pyproject.toml).
OPENAPI_DIR = Path(str(resources.files("app.openapi")))


@dataclass(frozen=True)
class Api:
    """One OpenAPI document the service serves: where, and with which handlers."""

    document: str  # in openapi/
    base_path: str
    handlers: str  # the package of its handler modules, one module per tag
    strict: bool  # whether a query parameter the document does not declare is 400
    metered: bool  # whether its operations count against quotas (D9)
    names_params: bool = False  # whether its Error names the field at fault


# D17: v1 and v2 side by side, each with its own document, openapi.json and UI;
# D16: the operations endpoints at the root, outside both contracts.
V1 = Api("petstore-v1.yaml", "/v1", f"{HANDLERS}.v1", strict=False, metered=True)  # D6
V2 = Api("petstore-v2.yaml", "/v2", f"{HANDLERS}.v2", strict=True, metered=True,  # D19
         names_params=True)
OPS = Api("ops.yaml", "", HANDLERS, strict=False, metered=False)
APIS = (V1, V2, OPS)


METHODS = ("delete", "get", "head", "options", "patch", "post", "put", "trace")


@functools.cache
def documents() -> tuple[tuple[Api, dict[str, Any]], ...]:
    """Every API with its document, read once (not to be changed: it is shared)."""
    return tuple((api, yamltext.safe_load((OPENAPI_DIR / api.document).read_text()))
                 for api in APIS)


@dataclass(frozen=True)
class Operation:
    """One operation of a served document, every $ref resolved (not to be changed: it is
    shared)."""

    id: str  # the resolved operation id: its handler's dotted name (TagResolver)
    api: Api
    method: str  # "POST"
    template: str  # its path with the API's base path: "/v2/store/orders/{orderId}"
    definition: dict[str, Any]
    parameters: tuple[dict[str, Any], ...]  # the path's own, then the operation's

    @property
    def writes(self) -> bool:
        """Whether the operation needs a key of scope write (`x-scope: write`, D21)."""
        return bool(self.definition.get("x-scope") == "write")

    @property
    def retired(self) -> bool:
        """Whether the document deprecates the operation with a date (D13)."""
        return bool(self.definition.get("deprecated")
                    and "x-deprecation-date" in self.definition)


@functools.cache
def operations() -> tuple[Operation, ...]:
    """Every operation of every document, read once, its $refs resolved as Connexion
    resolves them (connexion_internals.resolved)."""
    found = []
    for api, document in documents():
        resolver = TagResolver(api.handlers)
        for path, item in resolved(document)["paths"].items():
            for method, definition in item.items():
                if method in METHODS and "operationId" in definition:
                    found.append(Operation(
                        resolver.handler_for(definition), api, method.upper(),
                        api.base_path + path, definition,
                        (*item.get("parameters", ()), *definition.get("parameters", ()))))
    return tuple(found)


@functools.cache
def operation_by_id() -> dict[str, Operation]:
    """Resolved operation id -> its Operation."""
    return {operation.id: operation for operation in operations()}


@functools.cache
def _paths() -> tuple[tuple[re.Pattern[str], str], ...]:
    """Each path of every document as a pattern, with the methods it accepts (GET brings
    HEAD, as Starlette answers it)."""
    paths = []
    for api, document in documents():
        for template, item in document["paths"].items():
            methods = {m.upper() for m in item if m in METHODS}
            if "GET" in methods:
                methods.add("HEAD")
            paths.append((re.compile(path_pattern(api.base_path + template) + r"\Z"),
                          ", ".join(sorted(methods))))
    return tuple(paths)


def path_pattern(template: str) -> str:
    """A regular expression of the paths a template names ("/v2/pets/{petId}"): each
    parameter one segment, as Starlette's router matches it."""
    return "".join("[^/]+" if part.startswith("{") else re.escape(part)
                   for part in re.split(r"(\{[^}]+\})", template))


def allowed_methods(path: str) -> str | None:
    """The Allow header for a path of the documents: every method its operations accept
    (Starlette's 405 names only those of the first route whose path matched, so GET and
    DELETE of one path in v2 answered a PUT with `Allow: GET, HEAD`)."""
    return next((methods for pattern, methods in _paths() if pattern.match(path)), None)


@functools.cache
def header_parameters() -> dict[str, dict[bytes, dict[str, Any]]]:
    """Resolved operation id -> the request headers its document declares as parameters
    (lower-case name -> the parameter), the path's own included."""
    return {operation.id: {p["name"].lower().encode("latin-1"): p
                           for p in operation.parameters if p.get("in") == "header"}
            for operation in operations()}


def snake_case(name: str) -> str:
    """listOrders -> list_orders."""
    return SNAKE_BOUNDARY.sub("_", name).lower()


class TagResolver(Resolver):
    """operationId ``listOrders`` tagged ``orders`` -> ``app.web.handlers.orders.list_orders``:
    one handler module per tag, one function per operation, named in snake_case."""

    def __init__(self, package: str = HANDLERS) -> None:
        super().__init__()
        self.package = package
        # operationId -> resolved id, for Connexion, which hands over an operation whose
        # tags it keeps in no public attribute: the operations of this package's document.
        self.resolved: dict[str, str] = {}

    def handler_for(self, definition: dict[str, Any]) -> str:
        """The dotted name of the handler of an operation, from its YAML definition."""
        tags = definition.get("tags") or ["default"]
        return f"{self.package}.{snake_case(tags[0])}.{snake_case(definition['operationId'])}"

    def resolve_operation_id(self, operation: Any) -> str:
        if not self.resolved:
            self.resolved = {o.definition["operationId"]: o.id for o in operations()
                             if o.api.handlers == self.package}
        return self.resolved[operation.operation_id]
