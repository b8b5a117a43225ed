"""The order list's cache, ETag and compression, every response validated against the YAML."""

from __future__ import annotations

import gzip
import sqlite3
import subprocess
import sys
from typing import Any

import pytest

from app import __version__
from app.core.config import Settings
from app.core.storage import Store
from app.web import encoding
from tests.support import assert_error, wrap_store

LIST = "/v1/store/orders"


def ids_and_statuses(response: Any) -> dict[int, str]:
    return {o["id"]: o["status"] for o in response.json()}


def test_the_list_has_a_weak_etag_and_a_matching_if_none_match_is_304_with_no_body(
    client: Any, auth: dict[str, str]
) -> None:
    first = client.get(LIST, headers=auth)
    tag = first.headers["etag"]
    assert tag.startswith(f'W/"{__version__}-') and tag.endswith('"')
    for sent in (tag, tag.removeprefix("W/"), f'"other", {tag}', "*"):
        again = client.get(LIST, headers={**auth, "If-None-Match": sent})
        assert again.status_code == 304, sent
        assert again.content == b""
        assert again.headers["etag"] == tag
        assert "content-type" not in again.headers
        assert again.headers["x-ratelimit-remaining"]
    changed = client.get(LIST, headers={**auth, "If-None-Match": 'W/"1.0.0-0", "other"'})
    assert changed.status_code == 200 and changed.json() == first.json()


def test_a_304_needs_a_valid_key_and_counts_against_the_quota(
    client: Any, auth: dict[str, str]
) -> None:
    """The 304 is answered after security and quotas: no key is 401 whatever the tag,
    and each 304 spends one request of the minute."""
    tag = client.get(LIST, headers=auth).headers["etag"]
    for headers in ({}, {"Authorization": "Bearer psk_" + "x" * 43}):
        refused = client.get(LIST, headers={**headers, "If-None-Match": tag})
        assert refused.status_code == 401 and refused.json()["status"] == 401
    first = client.get(LIST, headers={**auth, "If-None-Match": tag})
    second = client.get(LIST, headers={**auth, "If-None-Match": tag})
    assert first.status_code == second.status_code == 304
    assert (int(second.headers["x-ratelimit-remaining"])
            == int(first.headers["x-ratelimit-remaining"]) - 1)


def test_an_if_none_match_longer_than_the_contract_allows_is_400(
    client: Any, auth: dict[str, str]
) -> None:
    response = client.get(LIST, headers={**auth, "If-None-Match": '"' + "x" * 8200 + '"'})
    assert_error(response, 400, "invalid_request")
    assert response.headers["x-ratelimit-limit"]


def test_a_cancel_changes_the_etag_and_the_list_at_once(
    client: Any, auth: dict[str, str]
) -> None:
    before = client.get(LIST, headers=auth)
    assert client.delete(f"{LIST}/1", headers=auth).status_code == 204
    stale = client.get(LIST, headers={**auth, "If-None-Match": before.headers["etag"]})
    assert stale.status_code == 200
    assert stale.headers["etag"] != before.headers["etag"]
    assert ids_and_statuses(stale)[1] == "cancelled"


def test_a_write_from_another_process_is_seen_by_the_next_list(
    client: Any, auth: dict[str, str], settings: Settings
) -> None:
    """The CLI in a process of its own, and a hand edit with the sqlite3 module: the
    cached list is never served after either."""
    cached = client.get(LIST, headers=auth)
    assert ids_and_statuses(cached)[1] == "pending"
    subprocess.run([sys.executable, "-m", "app.cli", "orders", "ship", "1"], check=True,
                   env={"PETSTORE_DATABASE": settings.database, "PATH": ""},
                   capture_output=True)
    shipped = client.get(LIST, headers={**auth, "If-None-Match": cached.headers["etag"]})
    assert shipped.status_code == 200
    assert ids_and_statuses(shipped)[1] == "shipped"

    with sqlite3.connect(settings.database) as db:
        db.execute("UPDATE orders SET quantity = 9 WHERE id = 4")
    edited = client.get(LIST, headers=auth)
    assert edited.headers["etag"] != shipped.headers["etag"]
    assert next(o for o in edited.json() if o["id"] == 4)["quantity"] == 9


def test_the_list_is_read_once_per_change(
    client: Any, auth: dict[str, str], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    store_type = type(store)
    reads = []
    original = store_type.orders_json

    def counted(self: Store) -> Any:
        reads.append(1)
        return original(self)  # type: ignore[arg-type]

    monkeypatch.setattr(store_type, "orders_json", counted)
    for _ in range(3):
        client.get(LIST, headers=auth)
    assert len(reads) == 1
    client.delete(f"{LIST}/1", headers=auth)
    client.get(LIST, headers=auth)
    client.get(LIST, headers=auth)
    assert len(reads) == 2


def test_repeats_of_an_unchanged_list_are_answered_without_the_handler(
        app: Any, client: Any, auth: dict[str, str], store: Store) -> None:
    class Counting:
        def __init__(self, inner: Store) -> None:
            self.inner, self.calls = inner, 0

        def __getattr__(self, name: str) -> Any:
            self.calls += 1
            return getattr(self.inner, name)

    counting: dict[str, Counting] = {}
    wrap_store(app, lambda inner: counting.setdefault("store", Counting(inner)))
    first = client.get(LIST, headers=auth)
    handled = counting["store"].calls
    assert handled >= 1
    again = client.get(LIST, headers=auth)
    assert counting["store"].calls == handled  # the handler's store was not asked again
    assert again.content == first.content and again.headers["etag"] == first.headers["etag"]
    assert again.headers["x-ratelimit-remaining"] != first.headers["x-ratelimit-remaining"]
    store.ship_order(1, "2026-12-24T10:00:00Z")  # as another process would
    changed = client.get(LIST, headers=auth)
    assert counting["store"].calls > handled and changed.content != first.content


@pytest.fixture
def many_orders(store: Store) -> None:
    store.import_orders({"id": i, "petId": i, "quantity": 1} for i in range(10, 200))


def test_a_large_list_is_gzipped_for_clients_that_accept_it_and_compressed_once(
    client: Any, auth: dict[str, str], many_orders: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = client.get(LIST, headers={**auth, "Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert len(plain.content) > encoding.MINIMUM_SIZE

    compressions = []
    original = gzip.compress

    def counted(data: bytes, *args: Any, **kwargs: Any) -> bytes:
        compressions.append(len(data))
        return original(data, *args, **kwargs)

    monkeypatch.setattr(encoding.gzip, "compress", counted)
    for _ in range(3):
        zipped = client.get(LIST, headers={**auth, "Accept-Encoding": "gzip, br"})
        assert zipped.headers["content-encoding"] == "gzip"
        assert "Accept-Encoding" in zipped.headers["vary"]
        assert zipped.headers["etag"] == plain.headers["etag"]
        assert int(zipped.headers["content-length"]) == zipped.num_bytes_downloaded
        assert zipped.num_bytes_downloaded < len(plain.content)
        assert zipped.json() == plain.json()  # the client decompresses
    assert compressions == [len(plain.content)], "compressed once, then kept"


def test_small_responses_and_errors_are_not_compressed(
    client: Any, auth: dict[str, str]
) -> None:
    small = client.get(LIST, headers={**auth, "Accept-Encoding": "gzip"})
    assert small.status_code == 200 and "content-encoding" not in small.headers
    error = client.get(f"{LIST}/x", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in error.headers


def test_gzip_level_0_turns_compression_off(
    settings: Settings, store: Store, many_orders: None, auth: dict[str, str]
) -> None:
    from app.web import create_app

    with create_app(settings.replace(gzip_level=0)).test_client() as client:
        response = client.get(LIST, headers={**auth, "Accept-Encoding": "gzip"})
    assert response.status_code == 200 and "content-encoding" not in response.headers


@pytest.fixture
def streamed(settings: Settings, store: Store) -> Any:
    """An app whose list cache is too small for 25,000 orders: the list is streamed."""
    from app.web import create_app

    store.import_orders([{"id": i, "petId": i % 7, "quantity": 1} for i in range(5, 25_005)])
    with create_app(settings.replace(list_cache_bytes=100_000)).test_client() as client:
        yield client


def test_a_list_too_large_for_the_cache_streams_the_same_json_with_its_etag(
    streamed: Any, store: Store, auth: dict[str, str]
) -> None:
    response = streamed.get(LIST, headers=auth)
    assert response.status_code == 200
    assert "content-length" not in response.headers  # sent in pieces
    assert response.content == store.orders_json()[1]
    assert len(response.json()) == 25_000
    tag = response.headers["etag"]
    assert streamed.get(LIST, headers={**auth, "If-None-Match": tag}).status_code == 304
    assert streamed.delete(f"{LIST}/9", headers=auth).status_code == 204
    after = streamed.get(LIST, headers={**auth, "If-None-Match": tag})
    assert after.status_code == 200 and ids_and_statuses(after)[9] == "cancelled"

    zipped = streamed.get(LIST, headers={**auth, "Accept-Encoding": "gzip"})
    assert zipped.headers["content-encoding"] == "gzip"
    assert zipped.headers["vary"] == "Accept-Encoding"
    assert zipped.json() == after.json()  # the client decoded the gzip stream


def test_a_database_that_cannot_be_read_is_503_for_lists_and_revalidations(
    client: Any, auth: dict[str, str], settings: Settings
) -> None:
    tag = client.get(LIST, headers=auth).headers["etag"]
    with sqlite3.connect(settings.database) as db:
        db.execute("DROP TABLE revision")  # a damaged database: every read of it fails
    for headers in (auth, {**auth, "If-None-Match": tag}):
        response = client.get(LIST, headers=headers)
        assert_error(response, 503, "service_unavailable")
        assert response.headers["retry-after"]
        assert response.headers["x-ratelimit-remaining"]
