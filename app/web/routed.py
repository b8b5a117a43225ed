"""The routing layer (app/web/chain.py): Connexion's router, strict about integers and
slashes (D7), then what the service decides once it knows the request's operation, before
the bearer check."""

from __future__ import annotations

import time
from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send

from app.web.connexion_internals import (
    StrictRoutingMiddleware,
    routed_base_path,
    routed_operation,
)
from app.web.deprecation import Retirement
from app.web.errors import DuplicateAuthorization, Retired
from app.web.exchange import exchange
from app.web.routing import operation_by_id


class Routing(StrictRoutingMiddleware):
    """Connexion's router (connexion_internals.StrictRoutingMiddleware); what it hands on,
    the request with its routing result, goes first through routed(), which writes the
    operation the router found into the request's Exchange and refuses what Connexion would
    get wrong, then to the layers after this one.

    - A request Connexion could not route to an operation of one of the APIs is 404
      not_found. Connexion passes such a request on to the AsyncApp's own router,
      which must not be the one to decide: with a newline in the path, a Mount's
      pattern matches short of it, the API's base path comes out wrong, and security,
      validation and the operation's context are all skipped.
    - A request with several Authorization headers is 400 invalid_request (D12): the
      bearer check would read only the first of them.
    - The body of an operation that declares none is ignored (D6), and so is its media
      type: Connexion's AsyncApp reads every request's form for its handler's files, and
      a GET said to be multipart/form-data without a boundary was a 400.
    - A deprecated operation's answers get its Deprecation and Sunset headers, and from
      the sunset on it is refused (Retired: 410 gone, with the same headers; D13,
      deprecation.py). Inside the errors layer, which answers the refusals."""

    def __init__(self, app: ASGIApp, *, base_paths: tuple[str, ...],
                 retired: dict[str, Retirement],
                 clock: Callable[[], float] = time.time) -> None:
        self.next = app
        self.base_paths = base_paths
        self.retired = retired
        self.clock = clock
        self.operations = operation_by_id()
        self.bodiless = frozenset(operation.id for operation in self.operations.values()
                                  if "requestBody" not in operation.definition)
        super().__init__(self.routed)

    async def routed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The routed request: its operation into the Exchange, or its refusal."""
        if scope["type"] == "http":
            operation_id = routed_operation(scope)
            if operation_id is None or routed_base_path(scope) not in self.base_paths:
                raise HTTPException(404)
            found = exchange(scope)
            found.operation = self.operations[operation_id]
            if sum(1 for name, _ in scope["headers"] if name == b"authorization") > 1:
                raise DuplicateAuthorization()
            if operation_id in self.bodiless:
                scope["headers"] = [(name, value) for name, value in scope["headers"]
                                    if name != b"content-type"]
            retirement = self.retired.get(operation_id)
            if retirement is not None:
                found.decide(retirement.headers())
                if retirement.sunset is not None and self.clock() >= retirement.sunset:
                    raise Retired(retirement.sunset)
        await self.next(scope, receive, send)
