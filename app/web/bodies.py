"""Request bodies (D22): at most MAX_BODY_BYTES, else 413 payload_too_large,
whether its Content-Length says so at once or a chunked body grows past it; and a JSON body
that is not UTF-8 is 400 invalid_request (Connexion's JSON validator decodes it unguarded, a
UnicodeDecodeError and so a 500), and so is one whose escapes stand for half a surrogate pair
alone (lone_surrogate). Read by the validation layer of chain.py before Connexion's
validators (connexion_internals.PreparedRequestValidation), so the quotas have counted
the request, and the problem it raises is answered by the error handlers with the Error
body. Only POST and PATCH (a webhook endpoint's update, D28) carry a body here; GET and
DELETE bodies are ignored, as ever (D6)."""

from __future__ import annotations

import json
import re

from connexion.exceptions import ClientProblem
from starlette.types import Message, Receive, Scope

from app.web.validation import whole_body_problem

MAX_BODY_BYTES = 16 * 1024
LIMIT_DIGITS = len(str(MAX_BODY_BYTES))
# A \u escape of a surrogate (its code point from hexadecimal d800 to dfff); a body without
# one holds none.
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def too_large() -> ClientProblem:
    return ClientProblem(status=413, title="Payload Too Large",
                         detail=f"The request body is larger than {MAX_BODY_BYTES} bytes.")


async def bounded(scope: Scope, receive: Receive) -> tuple[Scope, Receive]:
    """A POST's or PATCH's body read (at most MAX_BODY_BYTES: 413 past it, read no
    further), a JSON one checked to be UTF-8, and handed on whole: the scope and receive
    the validators and the handler read it from. Other methods' go on as they are."""
    if scope["type"] != "http" or scope["method"] not in ("POST", "PATCH"):
        return scope, receive
    headers = dict(scope["headers"])
    length = headers.get(b"content-length", b"")
    if length.isdigit() and content_length(length) > MAX_BODY_BYTES:
        raise too_large()
    body, more = b"", True
    while more:
        message = await receive()
        if message["type"] != "http.request":  # the client left
            return scope, replay([message], receive)
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > MAX_BODY_BYTES:
            raise too_large()
    if b"json" in headers.get(b"content-type", b"").lower():
        try:
            body.decode("utf-8")
        except UnicodeDecodeError:
            raise whole_body_problem("not_utf8") from None
        if lone_surrogate(body):
            raise whole_body_problem("lone_surrogate")
    if (length or body) and length != b"%d" % len(body):
        # Validation reads the body's length from Content-Length, with int(): a chunked
        # body has none, and was refused as missing; a value of leading zeros past 4,300
        # digits made int() a ValueError, and a 500. The body goes on whole, so it is no
        # longer chunked: the handler reads none of a body still said to be.
        scope["headers"] = [*((name, value) for name, value in scope["headers"]
                              if name not in (b"content-length", b"transfer-encoding")),
                            (b"content-length", b"%d" % len(body))]
    return scope, replay([{"type": "http.request", "body": body}], receive)


def lone_surrogate(body: bytes) -> bool:
    """Whether a JSON body's escapes stand for half a surrogate pair alone ("\\ud800"), in a
    string or a member's name. JSON's grammar lets one through, but it is no character
    (RFC 8259 section 8.2; I-JSON, RFC 7493, refuses it): Python's parser keeps it in the
    text, where no encoder to UTF-8 takes it, so that a name holding one (D37) reached
    orjson as a 500, and a member named by one broke even the Error that refused it."""
    if not SURROGATE_ESCAPE.search(body):
        return False
    try:
        json.dumps(json.loads(body), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    except (ValueError, RecursionError):  # not JSON at all: validation says so
        return False
    return False


def content_length(value: bytes) -> int:
    """A Content-Length of digits as a number; one of more digits than MAX_BODY_BYTES has
    (bar leading zeros) as one past it, which int() could not read past 4,300 digits."""
    digits = value.lstrip(b"0")
    return int(digits or b"0") if len(digits) <= LIMIT_DIGITS else MAX_BODY_BYTES + 1


def replay(messages: list[Message], receive: Receive) -> Receive:
    """receive, with these messages first."""
    pending = list(messages)

    async def replaying() -> Message:
        return pending.pop(0) if pending else await receive()

    return replaying
