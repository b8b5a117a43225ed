"""Repeated reads replayed from their kept answer right after the quotas (app/web/answer_cache.py):
each answers as the long way would, with its own request id, rate-limit headers and access
line, and whatever could tell a request apart from the one whose answer was kept still
goes the long way. Every response is validated against the YAML."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from app.core.config import Settings
from app.core.storage import Store
from app.web import create_app
from tests.support import LOADED_ROOM, assert_error, wait_until

READS = ("/v1/store/orders", "/v2/store/orders?limit=2", "/v2/store/orders/1")


@pytest.mark.parametrize("path", READS)
def test_a_repeated_read_answers_as_the_first_with_its_own_headers_and_access_line(
    client: Any, auth: dict[str, str], store: Store, path: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    first = client.get(path, headers={**auth, "X-Request-ID": "first"})
    caplog.clear()
    with caplog.at_level(logging.INFO, "petstore.access"):
        again = client.get(path, headers={**auth, "X-Request-ID": "again"})
        revalidated = client.get(path, headers={**auth, "If-None-Match": first.headers["etag"]})
    assert first.status_code == again.status_code == 200
    assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
    assert again.headers["x-request-id"] == "again"
    assert (int(again.headers["x-ratelimit-remaining"])
            == int(first.headers["x-ratelimit-remaining"]) - 1)
    assert revalidated.status_code == 304 and revalidated.content == b""
    assert revalidated.headers["etag"] == first.headers["etag"]
    assert revalidated.headers["x-ratelimit-remaining"]
    lines = [r for r in caplog.records if r.name == "petstore.access"]
    template = path.split("?")[0].replace("/1", "/{orderId}")
    assert [(r.path, r.status, r.key_id) for r in lines] == [
        (template, 200, store.list_keys()[0].id), (template, 304, store.list_keys()[0].id)]


@pytest.mark.parametrize("path", READS)
def test_a_repeated_read_still_refuses_what_the_long_way_refuses(
    app: Any, settings: Settings, auth: dict[str, str], store: Store, path: str
) -> None:
    # app: the store filled with the orders; the key cache as served.
    client = create_app(settings).test_client()
    assert client.get(path, headers=auth).status_code == 200
    assert_error(client.get(path), 401, "missing_api_key")
    assert_error(client.get(path, headers={"Authorization": "Bearer psk_" + "x" * 43}),
                 401, "invalid_api_key")
    twice = client.get(path, headers=[("Authorization", auth["Authorization"])] * 2)
    assert twice.status_code == 400 and twice.json()["status"] == 400
    too_long = client.get(path, headers={**auth, "If-None-Match": '"' + "x" * 8200 + '"'})
    assert_error(too_long, 400, "invalid_request")
    assert too_long.headers["x-ratelimit-limit"]
    store.set_expiry(store.list_keys()[0].id, "2020-01-01T00:00:00Z")
    # Asked until the expiry reaches the app, within the key cache's time to live (D21).
    def expired() -> Any:
        answer = client.get(path, headers=auth)
        return answer if answer.status_code == 401 else None

    assert_error(wait_until(expired, settings.key_cache_seconds + LOADED_ROOM,
                            "the expiry did not reach the app", every=0.1),
                 401, "api_key_expired")


def test_a_change_is_seen_by_the_next_repeated_read(
    client: Any, auth: dict[str, str]
) -> None:
    before = client.get("/v2/store/orders/1", headers=auth)
    assert before.json()["status"] == "pending"
    assert client.delete("/v1/store/orders/1", headers=auth).status_code == 204
    after = client.get("/v2/store/orders/1",
                       headers={**auth, "If-None-Match": before.headers["etag"]})
    assert after.status_code == 200 and after.json()["status"] == "cancelled"
    assert after.headers["etag"] != before.headers["etag"]
