"""Keys with a lifecycle over real HTTP (`petstore serve`: gunicorn, the uvicorn worker, two
workers), on SQLite and on PostgreSQL (D21): a read key refused on cancel, an
expired key refused, a rotated key's old secret working during its grace and refused after,
last use recorded, and keys moved from SQLite to PostgreSQL keeping their secrets."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import ISSUED_SECRETS, Server, serving, wait_until

pytestmark = pytest.mark.slow
CACHE = "0.5"  # PETSTORE_KEY_CACHE_SECONDS: how long a change takes to reach every worker


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def error_of(server: Server, method: str, path: str, secret: str) -> tuple[int, str, dict]:
    status, headers, body = server.request(method, path, bearer(secret))
    return status, json.loads(body)["code"], headers


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    database = {} if request.param == "sqlite" else {
        "database": request.getfixturevalue("postgres_database")}
    with serving(tmp_path, "--workers", "2", key_cache_seconds=CACHE,
                 ratelimit_storage=f"{request.getfixturevalue('redis_url')}",
                 ratelimit_key_prefix=request.getfixturevalue("redis_prefix"),
                 **database) as server:
        yield server


def new_key(server: Server, *args: str) -> str:
    return server.petstore("keys", "create", "--plan", "pro", *args).stdout.strip()


def test_a_read_key_is_refused_on_cancel_and_counted(server: Server) -> None:
    reader = new_key(server, "--scope", "read")
    status, headers, _ = server.request("GET", "/v1/store/orders", bearer(reader))
    assert status == 200
    remaining = int(headers["x-ratelimit-remaining"])
    for path in ("/v1/store/orders/1", "/v2/store/orders/1"):
        status, code, headers = error_of(server, "DELETE", path, reader)
        assert (status, code) == (403, "insufficient_scope")
        assert headers["www-authenticate"] == 'Bearer error="insufficient_scope"'
        remaining -= 1
        assert int(headers["x-ratelimit-remaining"]) == remaining
    writer = new_key(server)
    assert server.request("DELETE", "/v1/store/orders/1", bearer(writer))[0] == 404


def test_an_expired_key_is_refused_as_expired_on_every_worker(server: Server) -> None:
    secret = new_key(server, "--expires-in", "3s")
    assert server.request("GET", "/v2/store/orders", bearer(secret))[0] == 200
    # Asked until the expiry (3 s) has reached both workers, within the key cache's time.
    wait_until(lambda: all(server.request("GET", "/v1/store/orders", bearer(secret))[0]
                           == 401 for _ in range(4)),
               3 + float(CACHE) + 5, "the expiry did not reach every worker", every=0.1)
    for _ in range(4):  # both workers
        status, code, headers = error_of(server, "GET", "/v1/store/orders", secret)
        assert (status, code) == (401, "api_key_expired")
        assert headers["www-authenticate"] == 'Bearer error="invalid_token"'
        assert "x-ratelimit-remaining" in headers
    server.petstore("keys", "set-expiry", "1", "--never")
    wait_until(lambda: all(server.request("GET", "/v1/store/orders", bearer(secret))[0] == 200
                           for _ in range(4)),
               float(CACHE) + 5, "the new expiry did not reach every worker", every=0.1)


def test_a_rotated_key_keeps_its_old_secret_through_the_grace_only(server: Server) -> None:
    old = new_key(server, "--name", "integrator")
    _, headers, _ = server.request("GET", "/v1/store/orders", bearer(old))
    before = int(headers["x-ratelimit-remaining"])
    new = server.petstore("keys", "rotate", "1", "--grace", "3s").stdout.strip()
    assert new.startswith("psk_") and new != old
    # The new secret is let in on both workers (a 401 meanwhile counts against the address,
    # not the key).
    wait_until(lambda: all(server.request("GET", "/v1/store/orders", bearer(new))[0] == 200
                           for _ in range(4)),
               float(CACHE) + 5, "the new secret was not let in", every=0.1)
    answers = [server.request("GET", "/v1/store/orders", bearer(s)) for s in (old, new) * 2]
    assert [status for status, _, _ in answers] == [200] * 4
    # One key, one quota: the counters go on across both secrets.
    remaining = [int(headers["x-ratelimit-remaining"]) for _, headers, _ in answers]
    assert remaining == [remaining[0] - n for n in range(4)] and remaining[0] < before
    # Asked until the grace (3 s) has ended on both workers, within the key cache's time.
    wait_until(lambda: all(server.request("GET", "/v1/store/orders", bearer(old))[0] == 401
                           for _ in range(4)),
               3 + float(CACHE) + 5, "the old secret was not refused", every=0.1)
    for _ in range(4):
        status, code, _ = error_of(server, "GET", "/v1/store/orders", old)
        assert (status, code) == (401, "invalid_api_key")
        assert server.request("GET", "/v1/store/orders", bearer(new))[0] == 200


def test_keys_list_shows_when_each_key_was_last_used(server: Server) -> None:
    used, _unused = new_key(server), new_key(server)
    for _ in range(5):
        assert server.request("GET", "/v1/store/orders", bearer(used))[0] == 200
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        rows = json.loads(server.petstore("keys", "list", "--json").stdout)
        if rows[0]["last_used_at"]:
            break
        time.sleep(0.1)
    assert rows[0]["last_used_at"] is not None and rows[1]["last_used_at"] is None
    assert rows[0]["last_used_at"][:16] in server.petstore("keys", "list").stdout


def test_keys_moved_from_sqlite_to_postgresql_keep_their_secrets(
    tmp_path: Path, postgres_database: str
) -> None:
    (tmp_path / "before").mkdir()
    with serving(tmp_path / "before", key_cache_seconds=CACHE) as sqlite_server:
        secrets = [new_key(sqlite_server, "--scope", "read"), new_key(sqlite_server)]
        rotated = sqlite_server.petstore("keys", "rotate", "2", "--grace", "1h").stdout.strip()
        exported = sqlite_server.petstore("keys", "export").stdout
    assert not any(s in exported for s in (*secrets, rotated))
    path = tmp_path / "keys.csv"
    path.write_text(exported)
    (tmp_path / "after").mkdir()
    with serving(tmp_path / "after", database=postgres_database,
                 key_cache_seconds=CACHE) as pg_server:
        pg_server.petstore("keys", "import", str(path))
        for secret in (*secrets, rotated):
            assert pg_server.request("GET", "/v2/store/orders", bearer(secret))[0] == 200
        status, code, _ = error_of(pg_server, "DELETE", "/v1/store/orders/1", secrets[0])
        assert (status, code) == (403, "insufficient_scope")
        later = new_key(pg_server)
        ISSUED_SECRETS.add(later)
        listed = json.loads(pg_server.petstore("keys", "list", "--json").stdout)
        assert [row["id"] for row in listed] == [1, 2, 3]
