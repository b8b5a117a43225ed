"""The console's failures are pages too (D35): a database that does not answer is a 503
page with Retry-After, and a fault of the console's own a 500 page, never an Error body
and never a trace; the API keeps its JSON meanwhile."""

from __future__ import annotations

import asyncio
from typing import Any

from app.core.errors import StoreUnavailable
from app.web import PetstoreApp
from app.web.access import AccessLog
from app.web.exchange import EXCHANGE
from tests.console.conftest import Visitor, console_store


class Failing:
    """A store whose home page figures fail as told; everything else as the store."""

    def __init__(self, store: Any, error: Exception) -> None:
        self.store, self.error = store, error

    def order_summary(self, *args: Any) -> Any:
        raise self.error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def _failing(app: PetstoreApp, error: Exception) -> None:
    console_store(app, lambda store: Failing(store, error))


def test_a_database_that_does_not_answer_is_a_page_to_retry(app: PetstoreApp,
                                                            signed_in: Visitor) -> None:
    _failing(app, StoreUnavailable("SQLite: database is locked"))
    answer = signed_in.get("/console/")
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert answer.headers["content-type"].startswith("text/html")
    assert "cannot reach its database" in answer.text and "locked" not in answer.text


def test_a_fault_of_the_console_is_a_500_page_without_a_trace(app: PetstoreApp,
                                                             signed_in: Visitor) -> None:
    _failing(app, RuntimeError("secret internals"))
    answer = signed_in.get("/console/")
    assert answer.status_code == 500
    assert answer.headers["content-type"].startswith("text/html")
    assert answer.headers["content-security-policy"].startswith("default-src 'none'")
    assert "Something went wrong" in answer.text
    assert "secret internals" not in answer.text and "Traceback" not in answer.text
    api = signed_in.client.get("/v2/store/orders/1")
    assert api.status_code == 401 and api.headers["content-type"] == "application/json"


def test_a_failure_outside_the_blueprint_is_a_500_page_from_the_access_layer() -> None:
    """What the blueprint did not answer (its bridge failing, say) the access layer
    answers, with the headers of every console page and the request's id."""

    async def api(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("a console request went on to the API's layers")

    async def failing(scope: Any, receive: Any, send: Any) -> None:
        raise RuntimeError("the bridge broke")

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "path": "/console/orders", "method": "GET",
             "headers": [(b"x-request-id", b"request-1")]}
    asyncio.run(AccessLog(api, pages=lambda: failing)(scope, receive, send))
    start, body = sent
    headers = dict(start["headers"])
    assert start["status"] == 500 and scope[EXCHANGE].status == 500
    assert headers[b"content-type"] == b"text/html; charset=utf-8"
    assert headers[b"x-request-id"] == b"request-1"
    assert headers[b"content-security-policy"].startswith(b"default-src 'none'")
    assert b"logged as request request-1" in body["body"] and b"broke" not in body["body"]
