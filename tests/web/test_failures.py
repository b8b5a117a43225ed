"""What a client sees when the service itself fails: never a stack trace, never empty."""

from __future__ import annotations

import logging
import sqlite3
from typing import Any

import pytest
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.config import Settings
from app.core.storage import Store
from app.web import chain, create_app
from tests.support import assert_error, make_key, wrap_store

LIST = "/v1/store/orders"


class ExplodingStore:
    """Wraps a store; every order operation raises an unexpected error."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def list_orders(self, status: str | None = None) -> list[dict[str, Any]]:
        raise RuntimeError("secret internals: SELECT * FROM orders")

    def orders_json(self) -> tuple[int, bytes]:
        raise RuntimeError("secret internals: SELECT * FROM orders")

    def cancel_order(self, *args: Any) -> Any:
        raise KeyError("boom")


def test_an_unexpected_error_in_a_handler_is_500_logged_not_shown(
    app: Any, auth: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    wrap_store(app, ExplodingStore)
    with app.test_client() as client, caplog.at_level(logging.ERROR):
        body = assert_error(client.get(LIST, headers=auth), 500, "internal_error")
        assert "secret" not in body["message"]
        assert_error(client.delete(f"{LIST}/1", headers=auth), 500, "internal_error")
    assert "Traceback" in caplog.text and "secret internals" in caplog.text


class Boom:
    """A middleware that fails outside every handler, like a broken quota storage would."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raise RuntimeError("failure outside the handlers")
        await self.app(scope, receive, send)


def test_an_error_outside_the_handlers_is_a_500_error_object_not_an_empty_body(
    settings: Settings, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    # Boom between the access layer and the errors layer: outside Connexion's exception
    # middleware, where only the server errors layer answers.
    layers = list(chain.LAYERS)
    layers.insert(next(i for i, layer in enumerate(layers) if layer.name == "errors"),
                  chain.Layer("boom", "fails outside the errors layer", lambda _: Boom))
    app = create_app(settings, layers=tuple(layers))
    with app.test_client(raise_server_exceptions=False) as client, \
            caplog.at_level(logging.ERROR):
        assert_error(client.get(LIST), 500, "internal_error")
    assert "failure outside the handlers" in caplog.text


def test_a_database_locked_past_the_busy_timeout_is_503_with_retry_after(
    settings: Settings, store: Store
) -> None:
    store.import_orders([{"id": 1, "status": "pending"}])
    key = make_key(store)
    app = create_app(settings.replace(busy_timeout_ms=100))
    headers = {"Authorization": f"Bearer {key}"}
    blocker = sqlite3.connect(settings.database, isolation_level=None)
    with app.test_client() as client:
        assert client.get(LIST, headers=headers).status_code == 200
        blocker.execute("BEGIN EXCLUSIVE")
        try:
            response = client.delete(f"{LIST}/1", headers=headers)
            assert_error(response, 503, "service_unavailable")
            assert int(response.headers["retry-after"]) >= 1
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        assert client.delete(f"{LIST}/1", headers=headers).status_code == 204, "recovered"


def test_a_read_only_database_is_503_for_writes_and_recovers(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own refusal to write (PRAGMA query_only, as on a read-only open; root
    ignores file modes): cancels are 503 with Retry-After, lists go on, and writes work
    again as soon as the database does."""
    from app.core.storage.sqlite import SQLiteStore

    store.import_orders([{"id": 1, "status": "pending"}, {"id": 2, "status": "pending"}])
    key = make_key(store)
    headers = {"Authorization": f"Bearer {key}"}
    read_only = False
    connection = SQLiteStore.db.fget  # type: ignore[attr-defined]

    def connection_where_allowed(self: SQLiteStore) -> Any:
        # Every connection a thread uses, whichever way it writes (alone or in a group
        # commit, app/core/storage/group_commit.py).
        db = connection(self)
        db.execute(f"PRAGMA query_only = {int(read_only)}")
        return db

    monkeypatch.setattr(SQLiteStore, "db", property(connection_where_allowed))
    with create_app(settings).test_client() as client:
        read_only = True
        response = client.delete(f"{LIST}/1", headers=headers)
        assert_error(response, 503, "service_unavailable")
        assert int(response.headers["retry-after"]) >= 1
        assert response.headers["x-ratelimit-remaining"]
        assert client.get(LIST, headers=headers).status_code == 200
        read_only = False
        assert client.delete(f"{LIST}/1", headers=headers).status_code == 204, "recovered"
    assert store.list_orders()[0]["status"] == "cancelled"
