"""The errors layer (app/web/chain.py): Connexion's exception middleware, which turns
whatever a layer inside it raises into an answer (errors.py's handlers make the Error
body), and which writes on every answer from inside it, whichever layer made it, the
headers the layers decided for it and, where responses are validated, checks it against
its operation's responses in the document."""

from __future__ import annotations

from typing import Any

from connexion.middleware.abstract import SpecMiddleware
from connexion.middleware.exceptions import ExceptionMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.web.connexion_internals import ResponseChecks
from app.web.exchange import add_missing, exchange


class Answering(ExceptionMiddleware, SpecMiddleware):
    """Connexion's ExceptionMiddleware (the handlers of errors.py are registered on it as
    on Connexion's own), whose answers, and those of every layer inside it, get the
    decided headers (request id, rate limits, deprecation: Exchange.headers) on the
    response's start, then go through Connexion's response validation for the operation
    the request was found to be, where the API validates its responses. So a replayed kept
    answer and an Error are held to the document exactly as the handler's answer is, and
    the validator sees the headers the YAML declares required. An answer to no operation
    (a 404 for an unknown path, a 429 before routing), nor a HEAD's, is not checked. It
    notes the answer's status in the Exchange for the access line.

    A SpecMiddleware (Connexion's public base for a middleware that is handed every
    add_api), so that the response checks learn each API's operations."""

    def __init__(self, next_app: ASGIApp) -> None:
        super().__init__(next_app)
        self.checks = ResponseChecks(next_app)

    def add_api(self, *args: Any, **kwargs: Any) -> Any:
        return self.checks.add_api(*args, **kwargs)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        found = exchange(scope)
        forward = send
        checks = self.checks

        async def answering(message: Message) -> None:
            nonlocal forward
            if message["type"] == "http.response.start":
                found.status = message["status"]
                message["headers"] = add_missing(message.get("headers", ()), found.headers)
                # A HEAD's body is empty (RFC 9110 section 9.3.2: GET's headers without
                # its content), which Connexion would hold to the GET's schema.
                if (found.operation is not None and checks.checked
                        and scope["method"] != "HEAD"):
                    forward = await checks.checking(found.operation.id, scope, send)
            await forward(message)

        await super().__call__(scope, receive, answering)
