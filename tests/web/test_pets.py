"""The pets resource and the deprecation signals from the YAML (D13)."""

from __future__ import annotations

import email.utils
from typing import Any

import pytest

from app.core.config import Settings
from app.core.storage import Store
from app.web import create_app, deprecation, routed
from tests.support import assert_error, make_key

SUNSET = "Wed, 30 Jun 2027 00:00:00 GMT"


@pytest.fixture
def pets_client(settings: Settings, store: Store) -> Any:
    store.import_pets([{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}])
    with create_app(settings).test_client() as client:
        yield client


@pytest.fixture
def pets_auth(store: Store) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_key(store)}"}


def test_list_pets_is_not_deprecated(pets_client: Any, pets_auth: dict[str, str]) -> None:
    response = pets_client.get("/v1/pets", headers=pets_auth)
    assert response.json() == [{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}]
    assert "deprecation" not in response.headers and "sunset" not in response.headers


def test_get_pet_answers_with_deprecation_and_sunset(pets_client: Any,
                                                     pets_auth: dict[str, str]) -> None:
    response = pets_client.get("/v1/pets/1", headers=pets_auth)
    assert response.json() == {"id": 1, "name": "Rex"}
    assert response.headers["deprecation"] == "@1788220800"  # 2026-09-01T00:00:00Z
    assert response.headers["sunset"] == SUNSET
    assert email.utils.parsedate_to_datetime(response.headers["sunset"]).year == 2027


def test_every_answer_of_the_deprecated_operation_carries_the_signals(
    pets_client: Any, pets_auth: dict[str, str]
) -> None:
    missing = pets_client.get("/v1/pets/9", headers=pets_auth)
    assert_error(missing, 404, "pet_not_found")
    unauthorised = pets_client.get("/v1/pets/1")
    assert_error(unauthorised, 401, "missing_api_key")
    malformed = pets_client.get("/v1/pets/abc", headers=pets_auth)
    assert_error(malformed, 400, "invalid_request")
    # A newline in the id, as schemathesis sent one: the operation's 400 all the same.
    newline = pets_client.get("/v1/pets/T1%C2%9B%0AH", headers=pets_auth)
    assert_error(newline, 400, "invalid_request")
    for response in (missing, unauthorised, malformed, newline):
        assert response.headers["sunset"] == SUNSET
        assert response.headers["deprecation"] == "@1788220800"


def test_after_the_sunset_the_operation_answers_410_gone(
    pets_client: Any, pets_auth: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(routed.Routing, "__init__", _after_sunset(routed.Routing.__init__))
    app = create_app(pets_client.app.services.settings)
    with app.test_client() as client:
        response = client.get("/v1/pets/1", headers=pets_auth)
        body = assert_error(response, 410, "gone")
        assert SUNSET in body["message"]
        assert response.headers["sunset"] == SUNSET
        assert "x-ratelimit-remaining" in response.headers
        assert client.get("/v1/pets", headers=pets_auth).status_code == 200


def _after_sunset(init: Any) -> Any:
    def patched(self: Any, app: Any, **kwargs: Any) -> None:
        init(self, app, **kwargs, clock=lambda: 1_830_000_000.0)  # 2027-12-28
    return patched


def test_retirements_come_from_the_yaml_alone() -> None:
    operations = {
        "a": {"deprecated": True, "x-deprecation-date": "2026-01-01T00:00:00Z",
              "x-sunset": "2026-06-01T00:00:00Z"},
        "b": {"deprecated": False},
        "c": {"deprecated": True, "x-deprecation-date": "2026-01-01T00:00:00Z"},
    }
    retired = deprecation.retirements(operations)
    assert set(retired) == {"a", "c"}
    assert retired["c"].sunset is None
    assert retired["a"].headers() == [(b"deprecation", b"@1767225600"),
                                      (b"sunset", b"Mon, 01 Jun 2026 00:00:00 GMT")]
