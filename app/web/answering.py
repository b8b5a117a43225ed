"""The answer layer (app/web/chain.py): every answer that comes from inside it, whichever
layer made it, gets the headers the layers decided for it and, where responses are
validated, is checked against its operation's responses in the document."""

from __future__ import annotations

from starlette.types import Message, Receive, Scope, Send

from app.web.access import add_missing
from app.web.connexion_internals import ResponseChecks
from app.web.exchange import exchange


class Answering(ResponseChecks):
    """Writes the decided headers (request id, rate limits, deprecation: Exchange.headers)
    on the response's start, then hands it to Connexion's response validation for the
    operation the request was found to be, where the API validates its responses. So a
    replayed kept answer is held to the document exactly as the handler's answer is, and
    the validator sees the headers the YAML declares required. An answer to no
    operation (a 404 for an unknown path, a 429 before routing) is not checked. It notes
    the answer's status in the Exchange for the access line."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = exchange(scope)
        forward = send

        async def answering(message: Message) -> None:
            nonlocal forward
            if message["type"] == "http.response.start":
                found.status = message["status"]
                message["headers"] = add_missing(message.get("headers", ()), found.headers)
                if found.operation is not None and self.checked:
                    forward = await self.checking(found.operation.id, scope, send)
            await forward(message)

        await self.app(scope, receive, answering)
