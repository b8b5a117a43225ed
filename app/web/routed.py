"""The routed layer (app/web/chain.py), right after Connexion's router."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from app.web.connexion_internals import routed_base_path, routed_operation
from app.web.errors import DuplicateAuthorization
from app.web.exchange import exchange
from app.web.routing import operation_by_id


class Routed:
    """The routed layer, right after Connexion's router: writes the operation the router
    found into the request's Exchange, and refuses what Connexion would get wrong.

    - A request Connexion could not route to an operation of one of the APIs is 404
      not_found. Connexion passes such a request on to the AsyncApp's own router,
      which must not be the one to decide: with a newline in the path, a Mount's
      pattern matches short of it, the API's base path comes out wrong, and security,
      validation and the operation's context are all skipped.
    - A request with several Authorization headers is 400 invalid_request (D12): the
      bearer check would read only the first of them.
    - The body of an operation that declares none is ignored (D6), and so is its media
      type: Connexion's AsyncApp reads every request's form for its handler's files, and
      a GET said to be multipart/form-data without a boundary was a 400."""

    def __init__(self, app: ASGIApp, *, base_paths: tuple[str, ...]) -> None:
        self.app = app
        self.base_paths = base_paths
        self.operations = operation_by_id()
        self.bodiless = frozenset(operation.id for operation in self.operations.values()
                                  if "requestBody" not in operation.definition)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            operation_id = routed_operation(scope)
            if operation_id is None or routed_base_path(scope) not in self.base_paths:
                raise HTTPException(404)
            exchange(scope).operation = self.operations[operation_id]
            if sum(1 for name, _ in scope["headers"] if name == b"authorization") > 1:
                raise DuplicateAuthorization()
            if operation_id in self.bodiless:
                scope["headers"] = [(name, value) for name, value in scope["headers"]
                                    if name != b"content-type"]
        await self.app(scope, receive, send)
