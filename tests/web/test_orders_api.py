"""The API through Connexion's test client, every response validated against the YAML."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.storage import Store
from tests.support import assert_error

LIST = "/v1/store/orders"


def cancel_path(order_id: str | int) -> str:
    return f"/v1/store/orders/{order_id}"


def test_list_returns_every_order_in_the_store(client: Any, auth: dict[str, str]) -> None:
    response = client.get(LIST, headers=auth)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    orders = response.json()
    assert [o["id"] for o in orders] == [1, 2, 3, 4]
    assert orders[1] == {
        "id": 2, "petId": 20, "quantity": 2, "shipDate": "2026-11-20T10:00:00Z",
        "complete": True, "status": "shipped",
    }
    assert "shipDate" not in orders[0], "a missing shipDate is omitted, never null"
    assert all(None not in o.values() for o in orders)


def test_list_ignores_query_parameters(client: Any, auth: dict[str, str]) -> None:
    response = client.get(LIST + "?status=pending&limit=1&page=2", headers=auth)
    assert response.status_code == 200
    assert len(response.json()) == 4


@pytest.mark.parametrize(("method", "path", "status"), [
    ("GET", LIST, 200), ("GET", "/v2/store/inventory", 200),
    ("GET", "/v2/webhook-endpoints", 200), ("DELETE", f"{LIST}/1", 204)])
@pytest.mark.parametrize("media_type", ["multipart/form-data",
                                        "application/x-www-form-urlencoded", "text/plain"])
def test_the_media_type_of_a_body_an_operation_does_not_take_is_ignored(
        client: Any, auth: dict[str, str], method: str, path: str, status: int,
        media_type: str) -> None:
    """D6: the body of a GET or a DELETE is ignored, and so is what its Content-Type says
    (a multipart type without a boundary was a 400 once the handlers read forms)."""
    answer = client.request(method, path, headers={**auth, "Content-Type": media_type})
    assert answer.status_code == status, answer.text


def test_cancel_of_a_pending_order_answers_204_with_no_body(
    client: Any, auth: dict[str, str]
) -> None:
    response = client.delete(cancel_path(1), headers=auth)
    assert response.status_code == 204
    assert response.content == b""
    assert "content-type" not in response.headers
    listed = {o["id"]: o for o in client.get(LIST, headers=auth).json()}
    assert listed[1]["status"] == "cancelled", "a cancelled order stays in the list"


def test_cancel_records_which_key_cancelled(
    client: Any, auth: dict[str, str], store: Store
) -> None:
    client.delete(cancel_path(1), headers=auth)
    # Not part of the API: read what the store recorded (D2).
    row = store.db.execute(  # type: ignore[attr-defined]
        "SELECT cancelled_by, cancelled_at FROM orders WHERE id = 1"
    ).fetchone()
    assert row[0] == store.list_keys()[0].id
    assert row[1].endswith("Z")


def test_cancel_again_answers_204_and_changes_nothing(
    client: Any, auth: dict[str, str]
) -> None:
    assert client.delete(cancel_path(1), headers=auth).status_code == 204
    assert client.delete(cancel_path(1), headers=auth).status_code == 204
    assert client.delete(cancel_path(3), headers=auth).status_code == 204


def test_cancel_refuses_a_shipped_order(client: Any, auth: dict[str, str]) -> None:
    body = assert_error(client.delete(cancel_path(2), headers=auth), 409, "order_already_shipped")
    assert "2" in body["message"]
    listed = {o["id"]: o for o in client.get(LIST, headers=auth).json()}
    assert listed[2]["status"] == "shipped"


@pytest.mark.parametrize("order_id", ["99", "0", "-1", "9223372036854775807",
                                      "-9223372036854775808"])
def test_cancel_of_an_unknown_order_is_404(
    client: Any, auth: dict[str, str], order_id: str
) -> None:
    assert_error(client.delete(cancel_path(order_id), headers=auth), 404, "order_not_found")


@pytest.mark.parametrize(
    "order_id",
    ["abc", "1.5", "+5", "005", "00", "-0x1", "0x10", "1e3", "1_000", "%201", "1%20",
     "9223372036854775808", "-9223372036854775809", "9" * 300, "%00", "%D9%A5",
     "%EF%BC%91", "--1", "-", "%0A", "1%0A", "T1%C2%9B%0AH"],
)
def test_a_malformed_order_id_is_400_naming_order_id(
    client: Any, auth: dict[str, str], order_id: str
) -> None:
    body = assert_error(client.delete(cancel_path(order_id), headers=auth), 400,
                        "invalid_request")
    assert "orderId" in body["message"]


def test_a_trailing_slash_is_404_not_a_redirect(client: Any, auth: dict[str, str]) -> None:
    for path in (LIST + "/", cancel_path(1) + "/"):
        response = client.request("GET" if path == LIST + "/" else "DELETE", path,
                                  headers=auth, follow_redirects=False)
        assert_error(response, 404, "not_found")
        assert "location" not in response.headers


@pytest.mark.parametrize("path", ["/v1/store/pets", "/v1/nope", "/nope", "/", "/v3/store/orders"])
def test_an_unknown_path_is_404_not_found(client: Any, auth: dict[str, str], path: str) -> None:
    assert_error(client.get(path, headers=auth), 404, "not_found")


@pytest.mark.parametrize(("method", "path", "answer"), [
    ("DELETE", "/v1/store/orders/1%0A", "orderId"), ("DELETE", "/v1/store/orders/1%0Ab", "orderId"),
    ("DELETE", "/v1/store/orders/%0A1", "orderId"), ("GET", "/v1/store/orders%0A", None),
    ("GET", "/v1/store/orders%0A/1", None), ("GET", "/v1/pets/1%0A", "petId"),
    ("GET", "/v1/pets/a%0Ab", "petId"), ("GET", "/v1%0A/pets/1", None),
])
@pytest.mark.parametrize("with_key", [True, False])
def test_a_newline_in_the_path_never_reaches_a_handler(
    client: Any, auth: dict[str, str], store: Any, method: str, path: str,
    answer: str | None, with_key: bool
) -> None:
    """Starlette's router once stopped at a newline where Flask's does not: such a request
    reached the handler without its operation, security or validation (a 500). In a path
    parameter, a newline is the operation's 401 without a key and its 400 naming the
    parameter with one (as any other bad id); anywhere else, the path is 404 not_found."""
    response = client.request(method, path, headers=auth if with_key else {})
    if answer is None:
        assert_error(response, 404, "not_found")
    elif not with_key:
        assert_error(response, 401, "missing_api_key")
    else:
        assert answer in assert_error(response, 400, "invalid_request")["message"]
    assert response.headers["x-ratelimit-limit"]
    assert {o["id"]: o["status"] for o in store.list_orders()}[1] == "pending"


@pytest.mark.parametrize("method", ["PUT", "POST", "PATCH"])
@pytest.mark.parametrize(("path", "allow"), [(LIST, "GET"), (cancel_path(1), "DELETE")])
def test_a_wrong_method_is_405_with_allow(
    client: Any, auth: dict[str, str], method: str, path: str, allow: str
) -> None:
    response = client.request(method, path, headers=auth)
    assert_error(response, 405, "method_not_allowed")
    assert allow in response.headers["allow"]


# authentication -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer"}, {"Authorization": "Bearer "}, {"Authorization": ""},
     {"Authorization": "Basic dXNlcjpwYXNz"}, {"Authorization": "Token abc"}],
    ids=["none", "bearer-empty", "bearer-space", "empty", "basic", "other-scheme"],
)
def test_no_bearer_token_is_401_missing_api_key(client: Any, headers: dict[str, str]) -> None:
    for response in (client.get(LIST, headers=headers),
                     client.delete(cancel_path(1), headers=headers)):
        assert_error(response, 401, "missing_api_key")
        assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "token",
    ["nope", "psk_" + "A" * 43, "x" * 10_000, "caf\u00e9\u00ff"],
    ids=["unknown", "well-formed-unknown", "10kB", "non-ascii"],
)
def test_an_unknown_token_is_401_invalid_api_key(client: Any, token: str) -> None:
    headers = [("Authorization", ("Bearer " + token).encode("latin-1"))]
    response = client.get(LIST, headers=headers)
    assert_error(response, 401, "invalid_api_key")
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'


def test_invalid_utf8_in_the_token_is_401(client: Any) -> None:
    response = client.get(LIST, headers=[(b"Authorization", b"Bearer \xff\xfe\xc3")])
    assert_error(response, 401, "invalid_api_key")


def test_the_scheme_is_case_insensitive(client: Any, key: str) -> None:
    for scheme in ("bearer", "BEARER", "bEaReR"):
        assert client.get(LIST, headers={"Authorization": f"{scheme} {key}"}).status_code == 200


def test_two_authorization_headers_are_400(client: Any, key: str) -> None:
    for pair in ([f"Bearer {key}", f"Bearer {key}"], [f"Bearer {key}", "Basic x"],
                 ["Basic x", f"Bearer {key}"]):
        headers = [("Authorization", value) for value in pair]
        assert_error(client.get(LIST, headers=headers), 400, "invalid_request")


def test_a_revoked_key_is_refused_once_the_cache_expires(
    settings: Any, store: Store
) -> None:
    from app.web import create_app
    from tests.support import make_key

    key = make_key(store)
    app = create_app(settings.replace(key_cache_seconds=0.3))
    headers = {"Authorization": f"Bearer {key}"}
    with app.test_client() as client:
        assert client.get(LIST, headers=headers).status_code == 200
        store.revoke_key(store.list_keys()[0].id, "2026-01-01T00:00:00Z")
        import time

        deadline = time.monotonic() + 3
        while client.get(LIST, headers=headers).status_code == 200:
            assert time.monotonic() < deadline, "revocation did not reach the app"
            time.sleep(0.05)
        assert_error(client.get(LIST, headers=headers), 401, "invalid_api_key")
