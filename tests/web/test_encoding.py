"""The access layer's encoding rule for large bodies (app/web/encoding.py): a body over a slice
goes to the server a slice at a time, compressed or not, and arrives whole and in order."""

from __future__ import annotations

import asyncio
import gzip
import os
from typing import Any

import pytest
from starlette.types import Message

from app.web.encoding import Encoding

BODY = os.urandom(2 * Encoding.SLICE + 12_345)  # random: gzip cannot shrink it below a slice


async def _whole(scope: Any, receive: Any, send: Any) -> None:
    """An app that answers with BODY in one message, as a kept list does."""
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/octet-stream"),
                            (b"content-length", b"%d" % len(BODY))]})
    await send({"type": "http.response.body", "body": BODY})


def _sent(level: int, accept: bytes | None) -> list[Message]:
    layer = Encoding(_whole, level=level, max_bytes=0)
    scope = {"type": "http", "method": "GET", "path": "/v1/store/orders",
             "headers": [(b"accept-encoding", accept)] if accept else []}
    sent: list[Message] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(layer(scope, receive, send))
    return sent


@pytest.mark.parametrize(("level", "accept"), [(0, None), (5, None), (0, b"gzip"), (5, b"gzip")])
def test_a_body_over_a_slice_goes_out_a_slice_at_a_time_whole_and_in_order(
        level: int, accept: bytes | None) -> None:
    start, *pieces = _sent(level, accept)
    assert start["type"] == "http.response.start" and start["status"] == 200
    assert all(len(piece["body"]) <= Encoding.SLICE for piece in pieces)
    assert [piece.get("more_body", False) for piece in pieces][-1] is False
    assert all(piece["more_body"] for piece in pieces[:-1])
    assert len(pieces) >= 3
    body = b"".join(piece["body"] for piece in pieces)
    encoding = dict(start["headers"]).get(b"content-encoding")
    if level and accept:  # compressed as it goes, then sliced
        assert encoding == b"gzip" and gzip.decompress(body) == BODY
    else:
        assert encoding is None and body == BODY
