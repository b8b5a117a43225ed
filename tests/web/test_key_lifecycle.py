"""Keys with a lifecycle (D21) through the app, every response checked against the
documents: a read key refused on the operations marked x-scope: write (403), an expired key
(401 api_key_expired), a rotated key's old secret during and after its grace. The app keeps
keys as served, for PETSTORE_KEY_CACHE_SECONDS (2 s by default): a change of a key reaches
it within that time, and a key made just now within DIGESTS_FRESH, so a test asks until it
does, by that deadline."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from app.core import keys
from app.core.config import Settings
from app.core.storage import Store
from app.web import OPENAPI_DIR, create_app
from app.web.routing import APIS
from tests.support import ISSUED_SECRETS, LOADED_ROOM, assert_error, make_key, wait_until

RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")


CACHE = Settings().key_cache_seconds  # the served default


@pytest.fixture
def client(settings: Settings, store: Store) -> Any:
    store.import_orders([{"id": 1, "status": "pending"}, {"id": 2, "status": "pending"}])
    assert settings.key_cache_seconds == CACHE
    with create_app(settings).test_client() as client:
        yield client


def answered(ask: Callable[[], Any], status: int) -> Any:
    """ask()'s first answer with this status, asked again every 0.1 s until a change of a
    key reaches the app: within the key cache's time to live."""
    def seen() -> Any:
        answer = ask()
        return answer if answer.status_code == status else None
    return wait_until(seen, CACHE + LOADED_ROOM, f"no {status} within the key cache's time",
                      every=0.1)


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def key_id_of(store: Store, secret: str) -> int:
    key = store.find_key(keys.digest(secret))
    assert key is not None
    return key.id


def read_key(store: Store) -> str:
    secret = make_key(store)
    store.set_scope(key_id_of(store, secret), "read")
    return secret


# D28: a key's webhook endpoints are read with write too (what they hold is a write
# key's). The one kind of read that needs write; a prefix here that no operation's path
# starts with fails the test below.
READS_NEEDING_WRITE = ("/v2/webhook-endpoints",)


def test_the_documents_mark_every_change_and_only_changes_as_needing_write() -> None:
    """Walked from the documents: an operation needs write (x-scope: write, with a 403
    among its answers) if it changes something (any method but GET), or reads what only a
    writer may (READS_NEEDING_WRITE); no other operation does."""
    needing = []
    for api in APIS:
        document = yaml.safe_load((OPENAPI_DIR / api.document).read_text())
        for path, item in document["paths"].items():
            for method, operation in item.items():
                if not isinstance(operation, dict) or "operationId" not in operation:
                    continue
                where = f"{method.upper()} {api.base_path}{path}"
                reads_for_writers = (api.base_path + path).startswith(READS_NEEDING_WRITE)
                if method != "get" or reads_for_writers:
                    needing.append(where)
                    assert operation.get("x-scope") == "write", f"{where} changes: needs write"
                    assert "403" in operation["responses"], where
                else:
                    assert "x-scope" not in operation, f"{where} only reads: needs no write"
    assert any(where.startswith("POST ") for where in needing)
    for prefix in READS_NEEDING_WRITE:
        assert any(where.split(" ")[1].startswith(prefix) for where in needing), prefix


@pytest.mark.parametrize("path", ["/v1/store/orders/1", "/v2/store/orders/1"])
def test_a_read_key_calling_a_cancel_is_403_insufficient_scope_and_counted(
    client: Any, store: Store, path: str
) -> None:
    secret = read_key(store)
    before = client.get("/v1/store/orders", headers=bearer(secret))
    assert before.status_code == 200
    response = client.delete(path, headers=bearer(secret))
    assert_error(response, 403, "insufficient_scope")
    assert response.headers["www-authenticate"] == 'Bearer error="insufficient_scope"'
    for name in RATE_HEADERS:
        assert name in response.headers
    # The refused call counted against the key's quota.
    assert (int(response.headers["x-ratelimit-remaining"])
            == int(before.headers["x-ratelimit-remaining"]) - 1)
    assert client.get("/v2/store/orders/1", headers=bearer(secret)).json()["status"] == "pending"


def test_a_write_key_may_cancel_and_a_read_key_may_read_everything(
    client: Any, store: Store
) -> None:
    reader = read_key(store)
    for path in ("/v1/store/orders", "/v2/store/orders", "/v2/store/orders/1", "/v1/pets"):
        assert client.get(path, headers=bearer(reader)).status_code == 200, path
    writer = make_key(store)
    answered(lambda: client.delete("/v2/store/orders/2", headers=bearer(writer)), 204)


def test_a_key_moved_to_read_is_refused_on_cancel_and_back_to_write_allowed(
    client: Any, store: Store
) -> None:
    secret = read_key(store)
    key_id = key_id_of(store, secret)
    assert client.delete("/v1/store/orders/1", headers=bearer(secret)).status_code == 403
    store.set_scope(key_id, "write")
    answered(lambda: client.delete("/v1/store/orders/1", headers=bearer(secret)), 204)


def test_an_expired_key_is_401_api_key_expired_with_an_invalid_token_challenge(
    client: Any, store: Store
) -> None:
    secret = make_key(store)
    key_id = key_id_of(store, secret)
    assert client.get("/v1/store/orders", headers=bearer(secret)).status_code == 200
    store.set_expiry(key_id, "2020-01-01T00:00:00Z")
    answered(lambda: client.get("/v1/store/orders", headers=bearer(secret)), 401)
    for method, path in (("get", "/v1/store/orders"), ("delete", "/v1/store/orders/1"),
                         ("get", "/v2/store/orders")):
        response = getattr(client, method)(path, headers=bearer(secret))
        assert_error(response, 401, "api_key_expired")
        assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
        for name in RATE_HEADERS:
            assert name in response.headers
    store.set_expiry(key_id, None)
    answered(lambda: client.get("/v1/store/orders", headers=bearer(secret)), 200)


def test_a_rotated_key_answers_to_both_secrets_until_the_grace_ends(
    client: Any, store: Store
) -> None:
    old = make_key(store)
    key_id = key_id_of(store, old)
    first = client.get("/v1/store/orders", headers=bearer(old))
    grace = 2 * CACHE + 1  # outlasts what the app kept of the key before the rotation
    rotated = time.time()
    new, _ = keys.rotation(store, key_id, grace_seconds=grace, now=rotated)
    ISSUED_SECRETS.add(new)
    during_new = answered(lambda: client.get("/v1/store/orders", headers=bearer(new)), 200)
    # Each answer is judged by when its request was sent: a loaded machine may answer late.
    sent = time.time()
    during_old = client.get("/v1/store/orders", headers=bearer(old))
    assert during_old.status_code == 200 or sent >= int(rotated) + grace
    # One key, one quota: the counters go on across the secrets.
    remaining = [int(r.headers["x-ratelimit-remaining"])
                 for r in (first, during_new, during_old)]
    assert remaining == [remaining[0], remaining[0] - 1, remaining[0] - 2]
    # Once what the app kept before the rotation has run out, the old secret is still let
    # in by the grace: waited out, the cache's own time.
    time.sleep(max(0.0, rotated + CACHE + 0.2 - time.time()))
    sent = time.time()
    assert (client.get("/v1/store/orders", headers=bearer(old)).status_code == 200
            or sent >= int(rotated) + grace)
    # Asked until it is refused: never before the grace ends (stored to the second), and
    # within the cache's time after.
    def refused() -> Any:
        sent = time.time()
        answer = client.get("/v1/store/orders", headers=bearer(old))
        assert answer.status_code == 401 or sent < rotated + grace + CACHE + 0.5
        assert answer.status_code == 200 or time.time() >= int(rotated) + grace
        return answer if answer.status_code == 401 else None

    after = wait_until(refused, grace + CACHE + LOADED_ROOM, "the old secret was not refused",
                       every=0.1)
    assert_error(after, 401, "invalid_api_key")
    assert after.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert client.get("/v1/store/orders", headers=bearer(new)).status_code == 200
