"""How the OpenAPI documents map onto Python: one handler module per tag, one function per
operation (TagResolver), and only routed requests go on (RoutedOnly). The parsing of path
parameters that DESIGN.md D7 asks for overrides Connexion's, so it lives with the other
overrides in connexion_internals.
"""

from __future__ import annotations

import re
from typing import Any

from connexion.resolver import Resolver
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from app.web.connexion_internals import operation_definition, routed_base_path, routed_operation

SNAKE_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
HANDLERS = "app.web.handlers"


def snake_case(name: str) -> str:
    """listOrders -> list_orders."""
    return SNAKE_BOUNDARY.sub("_", name).lower()


class TagResolver(Resolver):
    """operationId ``listOrders`` tagged ``orders`` -> ``app.web.handlers.orders.list_orders``:
    one handler module per tag, one function per operation, named in snake_case."""

    def __init__(self, package: str = HANDLERS) -> None:
        super().__init__()
        self.package = package

    def handler_for(self, definition: dict[str, Any]) -> str:
        """The dotted name of the handler of an operation, from its YAML definition."""
        tags = definition.get("tags") or ["default"]
        return f"{self.package}.{snake_case(tags[0])}.{snake_case(definition['operationId'])}"

    def resolve_operation_id(self, operation: Any) -> str:
        return self.handler_for(operation_definition(operation))


class RoutedOnly:
    """Only requests Connexion routed to an operation of one of the APIs go on; any other
    is 404 not_found. Connexion passes a request it could not route on to Flask, whose
    router matches paths Starlette's does not: with a newline in the path, a Mount's
    pattern matches short of it, the API's base path comes out wrong, and security,
    validation and the operation's context are all skipped (the handler then failed, 500).
    Added right after routing (MiddlewarePosition.BEFORE_SECURITY)."""

    def __init__(self, app: ASGIApp, *, base_paths: tuple[str, ...]) -> None:
        self.app = app
        self.base_paths = base_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and (routed_operation(scope) is None
                                        or routed_base_path(scope) not in self.base_paths):
            raise HTTPException(404)
        await self.app(scope, receive, send)
