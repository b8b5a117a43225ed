"""Request ids on every response and in 500s, and one access line per request."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from app.core.config import Settings
from app.core.logs import configure_logging
from app.core.storage import Store
from app.web import create_app
from tests.support import assert_error, make_key, wrap_store
from tests.web.test_failures import ExplodingStore

LIST = "/v1/store/orders"


@pytest.mark.parametrize("given", ["abc-123", "x" * 128, "4bf92f3577b34da6a3ce929d0e0e4736"])
def test_a_short_printable_request_id_is_echoed(client: Any, auth: dict[str, str],
                                                given: str) -> None:
    response = client.get(LIST, headers={**auth, "X-Request-ID": given})
    assert response.headers["x-request-id"] == given


@pytest.mark.parametrize("given", ["", "x" * 129, "has space", "caf\u00e9", "a\tb"])
def test_any_other_request_id_is_replaced_by_a_new_one(client: Any, auth: dict[str, str],
                                                      given: str) -> None:
    headers = [("Authorization", auth["Authorization"]),
               ("X-Request-ID", given.encode("latin-1"))]
    response = client.get(LIST, headers=headers)
    made = response.headers["x-request-id"]
    assert made != given and len(made) == 32 and made.isalnum()


def test_every_answer_carries_a_request_id_and_each_is_new(client: Any,
                                                           auth: dict[str, str]) -> None:
    answers = [client.get(LIST, headers=auth), client.get(LIST),
               client.delete(f"{LIST}/99", headers=auth), client.put(LIST, headers=auth),
               client.get("/nowhere")]
    ids = [response.headers["x-request-id"] for response in answers]
    assert len(set(ids)) == len(ids)


def test_a_429_from_the_quota_middleware_carries_the_request_id(
    settings: Settings, store: Store
) -> None:
    key = make_key(store, plan="enterprise", per_minute=1, per_day=10)
    with create_app(settings.replace(ban_seconds=0)).test_client() as client:
        client.get(LIST, headers={"Authorization": f"Bearer {key}"})
        refused = client.get(LIST, headers={"Authorization": f"Bearer {key}",
                                            "X-Request-ID": "retry-7"})
    assert_error(refused, 429, "rate_limit_exceeded")
    assert refused.headers["x-request-id"] == "retry-7"


def test_a_500_quotes_its_request_id_and_logs_it_with_the_traceback(
    app: Any, auth: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    wrap_store(app, ExplodingStore)
    with app.test_client() as client, caplog.at_level(logging.INFO):
        response = client.get(LIST, headers={**auth, "X-Request-ID": "report-me"})
    body = assert_error(response, 500, "internal_error")
    assert "report-me" in body["message"]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert errors and errors[0].request_id == "report-me" and errors[0].exc_info


def test_one_access_line_per_request_with_template_status_and_key_id(
    client: Any, auth: dict[str, str], key: str, store: Store,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, "petstore.access"):
        client.delete(f"{LIST}/2", headers={**auth, "X-Request-ID": "line-1"})
        client.get(LIST, headers={"Authorization": "Bearer nope"})
    lines = [r for r in caplog.records if r.name == "petstore.access"]
    assert len(lines) == 2
    first, second = lines
    assert (first.request_id, first.method, first.path, first.status) == (
        "line-1", "DELETE", "/v1/store/orders/{orderId}", 409)
    assert first.key_id == store.list_keys()[0].id and first.duration_ms >= 0
    assert (second.status, second.key_id) == (401, None)
    for record in lines:
        text = record.getMessage() + json.dumps(vars(record), default=str)
        assert key not in text and "nope" not in text and "Bearer" not in text


def test_json_log_lines_parse_and_text_is_available(settings: Settings,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    for fmt in ("json", "text"):
        configure_logging(settings.replace(log_format=fmt))
        logging.getLogger("petstore.access").info("GET /v1/store/orders 200",
                                                  extra={"request_id": "r1", "status": 200})
        line = capsys.readouterr().err.strip().splitlines()[-1]
        if fmt == "json":
            record = json.loads(line)
            assert record["message"] == "GET /v1/store/orders 200"
            assert (record["request_id"], record["status"], record["level"]) == ("r1", 200, "INFO")
            assert "time" in record
        else:
            assert "INFO petstore.access GET /v1/store/orders 200" in line
    configure_logging(settings)
