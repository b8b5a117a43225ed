"""Helpers every test suite shares: one way to check an Error response, one way to make keys."""

from __future__ import annotations

import socket
from typing import Any

from app import auth
from app.storage import Store

ERROR_FIELDS = {"code", "message", "status"}


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is an Error object with this status and code, as JSON, with a one-line
    message that leaks no stack trace, SQL or key."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == ERROR_FIELDS, body
    assert body["code"] == code, body
    assert body["status"] == status
    message = body["message"]
    assert isinstance(message, str) and message and "\n" not in message
    for leak in ("Traceback", "sqlite", "SELECT ", "UPDATE ", "psk_"):
        assert leak not in message, message
    return body


def make_key(
    store: Store,
    plan: str = "free",
    name: str = "test",
    per_minute: int | None = None,
    per_day: int | None = None,
) -> str:
    """Create a key in the store and return its secret."""
    new = auth.generate_key()
    store.create_key(
        digest=new.digest,
        prefix=new.prefix,
        name=name,
        plan=plan,
        per_minute=per_minute,
        per_day=per_day,
        now="2026-01-01T00:00:00Z",
    )
    return new.secret


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
