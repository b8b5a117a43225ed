"""Operations answered without Flask: the writes of the orders.

A write's CPU goes mostly to the machinery around it, not to its SQL: Flask's request
and response objects, Connexion's decorator chain (which builds a request object and reads
every parameter again), a2wsgi's WSGI environ and its body, read from the handler thread by
a trip back to the event loop (docs/performance.md measures it).

A handler marked @direct takes a Call (the request as Connexion's routing, security and
validation left it) and returns an Answer; DirectOperations, right before Connexion's
context middleware (app/web/chain.py), runs it in a handler thread and sends the Answer.
Everything else is as for any operation: the quotas and their headers, the request id and
the access line, the 400s, 401s, 403s, 413s and 415s of routing, security, validation and
the body limit, the check of the answer against the document, and the Error bodies, which
the error handlers make from the domain's exceptions the handler raises. A direct handler
is its operation's one code path: Flask's view of it only says it is not served there
(connexion_internals.prepare_operations). A plainly valid request to one is answered
earlier still, before routing, security and validation, which could only let it through
(early_writes.py), by the same handler and answer_call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.services import Services
from app.web.bridge import HandlerThreads
from app.web.exchange import exchange
from app.web.security import key_info

F = TypeVar("F", bound=Callable[..., Any])
DIRECT = "__petstore_direct__"  # the mark @direct puts on a handler
BODY_METHODS = ("POST", "PATCH")  # the methods whose body a direct operation reads


def direct(handler: F) -> F:
    """Mark a handler as answered by DirectOperations: it takes a Call, returns an Answer."""
    setattr(handler, DIRECT, True)
    return handler


def is_direct(handler: Any) -> bool:
    return bool(getattr(handler, DIRECT, False))


@dataclass(frozen=True, slots=True)
class Call:
    """One request to a direct operation, as Connexion has routed, authenticated and
    validated it."""

    services: Services
    path: str  # as Flask saw it: the scope's path without its root path
    path_params: dict[str, Any]
    headers: list[tuple[bytes, bytes]]
    body: bytes
    token_info: dict[str, Any]

    def header(self, name: bytes) -> str | None:
        """A request header as a WSGI app sees it: every value of the name, joined by
        commas (PEP 3333, as a2wsgi builds the environ), or None."""
        values = [value.decode("latin-1") for key, value in self.headers if key == name]
        return ",".join(values) if values else None

    def order_id(self) -> int:
        """The orderId of the path, which validation has found a canonical int64
        (connexion_internals.StrictURIParser)."""
        return self.path_id("orderId")

    def path_id(self, name: str) -> int:
        """An id of the path (orderId, petId), which validation has found a canonical
        int64 (connexion_internals.StrictURIParser)."""
        return int(self.path_params[name])


@dataclass(frozen=True, slots=True)
class Answer:
    """A direct operation's response. headers in the order Flask sent them: the handler's,
    then Content-Type and Content-Length when there is a body."""

    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes | None = None  # None: no body, no Content-Type (a 204)

    def start(self) -> dict[str, Any]:
        headers = [(name.lower().encode("latin-1"), value.encode("latin-1"))
                   for name, value in self.headers]
        if self.body is not None:
            headers += [(b"content-type", b"application/json"),
                        (b"content-length", b"%d" % len(self.body))]
        return {"type": "http.response.start", "status": self.status, "headers": headers}


def json_answer(status: int, body: bytes, headers: list[tuple[str, str]]) -> Answer:
    """An application/json answer."""
    return Answer(status, headers, body)


NO_CONTENT = Answer(204)


class DirectOperations:
    """Answers the requests routed to a direct handler (operation id -> handler) in a
    handler thread, with no trip through Flask. It sits right before Connexion's context
    middleware, after routing, security and validation."""

    def __init__(self, app: ASGIApp, *, handlers: dict[str, Callable[[Call], Answer]],
                 services: Callable[[], Services], threads: HandlerThreads) -> None:
        self.app = app
        self.handlers = handlers
        self.services = services  # the running app's, read at each call, as Flask's are
        self.threads = threads

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = exchange(scope) if scope["type"] == "http" else None
        operation = found.operation if found is not None else None
        handler = self.handlers.get(operation.id) if operation is not None else None
        if handler is None or found is None:
            await self.app(scope, receive, send)
            return
        # Only the body of a POST or a PATCH is read (and BodyLimit has bounded it); the
        # bodies of DELETE are ignored, as ever (D6).
        body = b""
        if scope["method"] in BODY_METHODS:
            more = True
            while more:
                message = await receive()
                if message["type"] != "http.request":  # the client left: nothing to answer
                    return
                body += message.get("body", b"")
                more = message.get("more_body", False)
        path, root = scope["path"], scope.get("root_path", "")
        key = found.key
        call = Call(self.services(), path[len(root):] if path.startswith(root) else path,
                    scope.get("path_params", {}), scope["headers"], body,
                    key_info(key) if key is not None else {})
        await answer_call(self.threads, handler, call, send)


async def answer_call(threads: HandlerThreads, handler: Callable[[Call], Answer], call: Call,
                      send: Send) -> None:
    """Run a direct handler in a handler thread and send its Answer. The domain's
    exceptions go up to the error handlers, as they did from Flask."""
    answer = await threads.run(handler, call)
    await send(answer.start())
    await send({"type": "http.response.body", "body": answer.body or b""})
