"""v2 over HTTP, in process: pages by cursor and Link, filters, sorts, one order, cancel, the
ETag and 304, and every malformed request an Error naming its parameter (D17-D20).
Every response is validated against openapi/petstore-v2.yaml."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from app.core.config import Settings
from app.core.errors import StoreUnavailable
from app.core.storage import Store
from app.web import create_app
from tests.support import assert_error, make_key, wrap_store

LIST = "/v2/store/orders"
RATE_HEADERS = ("x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset")
STATUSES = ("pending", "shipped", "cancelled")


def _orders(count: int) -> list[dict[str, Any]]:
    """Orders 1..count: statuses in turn, pets 0-4, every third without a shipDate, ship
    dates repeating so that ties break by id."""
    return [{"id": i, "petId": i % 5, "quantity": 1, "status": STATUSES[i % 3],
             "complete": i % 4 == 0,
             **({} if i % 3 == 0 else {"shipDate": f"2026-11-{10 + i % 7:02d}T10:00:00Z"})}
            for i in range(1, count + 1)]


@pytest.fixture
def many(store: Store) -> list[dict[str, Any]]:
    """30 more orders than the web fixture's four (ids 101 and up, whose fields differ)."""
    rows = [{**order, "id": order["id"] + 100} for order in _orders(30)]
    store.import_orders(rows)
    return rows


def _walk(client: Any, auth: dict[str, str], url: str) -> list[dict[str, Any]]:
    """Every order of a list, following Link from the first page to the last."""
    seen: list[dict[str, Any]] = []
    pages = 0
    while url:
        response = client.get(url, headers=auth)
        assert response.status_code == 200, response.text
        body = response.json()
        seen += body["orders"]
        link = response.headers.get("link")
        if body["next"] is None:
            assert link is None
            url = ""
        else:
            target = re.fullmatch(r'<([^>]+)>; rel="next"', link)
            assert target, link
            assert parse_qs(urlsplit(target.group(1)).query)["cursor"] == [body["next"]]
            url = target.group(1)
        pages += 1
        assert pages < 100
    return seen


def test_the_first_page_has_the_default_limit_and_a_next_cursor(
        client: Any, auth: dict[str, str], store: Store) -> None:
    store.import_orders(_orders(150)[100:] + [{**o, "id": o["id"] + 1000}
                                              for o in _orders(100)])
    response = client.get(LIST, headers=auth)
    assert response.status_code == 200
    body = response.json()
    assert len(body["orders"]) == 100 and isinstance(body["next"], str)
    ids = [order["id"] for order in body["orders"]]
    assert ids == sorted(ids)
    assert response.headers["link"].startswith(f'<{LIST}?cursor=')
    for header in RATE_HEADERS:
        assert header in response.headers


@pytest.mark.parametrize("sort", ["id", "-id", "shipDate", "-shipDate"])
def test_walking_the_links_returns_every_order_once_in_the_sort(
        client: Any, auth: dict[str, str], many: list[dict[str, Any]], sort: str) -> None:
    seen = _walk(client, auth, f"{LIST}?limit=4&sort={sort}")
    everything = client.get(f"{LIST}?limit=1000", headers=auth).json()["orders"]
    assert len(seen) == len(everything) == 34
    assert len({order["id"] for order in seen}) == 34
    descending = sort.startswith("-")
    if sort.endswith("id"):
        expected = sorted(everything, key=lambda o: o["id"], reverse=descending)
    else:
        dated = sorted((o for o in everything if "shipDate" in o),
                       key=lambda o: (o["shipDate"], o["id"]), reverse=descending)
        undated = sorted((o for o in everything if "shipDate" not in o),
                         key=lambda o: o["id"], reverse=descending)
        expected = dated + undated  # undated last in both directions (D19)
    assert [o["id"] for o in seen] == [o["id"] for o in expected]


def test_filters_combine_with_and_and_the_links_keep_them(
        client: Any, auth: dict[str, str], many: list[dict[str, Any]]) -> None:
    url = (f"{LIST}?status=pending,shipped&petId=2&shipDateFrom=2026-11-11T10:00:00Z"
           f"&shipDateTo=2026-11-15T10:00:00%2B00:00&limit=1")
    seen = _walk(client, auth, url)
    expected = [o for o in many if o["status"] in ("pending", "shipped") and o["petId"] == 2
                and "2026-11-11T10:00:00Z" <= o.get("shipDate", "") < "2026-11-15T10:00:00Z"]
    assert expected and [o["id"] for o in seen] == [o["id"] for o in expected]
    complete = client.get(f"{LIST}?complete=true&limit=1000", headers=auth).json()["orders"]
    assert complete and all(order["complete"] for order in complete)
    cancelled = client.get(f"{LIST}?status=cancelled&limit=1000", headers=auth).json()
    assert cancelled["orders"] and {o["status"] for o in cancelled["orders"]} == {"cancelled"}


def test_a_date_bound_with_an_offset_or_a_fraction_selects_by_the_instant(
        client: Any, auth: dict[str, str], many: list[dict[str, Any]]) -> None:
    # 11:00+01:00 is 10:00Z: the orders of 2026-11-11T10:00:00Z are in, inclusive.
    start = client.get(f"{LIST}?shipDateFrom=2026-11-11T11:00:00%2B01:00&"
                       f"shipDateTo=2026-11-11T10:00:00.5Z&limit=1000", headers=auth).json()
    assert start["orders"] and {o["shipDate"] for o in start["orders"]} == {
        "2026-11-11T10:00:00Z"}


def test_a_cursor_with_other_filters_or_sort_is_refused_but_limit_may_change(
        client: Any, auth: dict[str, str], many: list[dict[str, Any]]) -> None:
    cursor = client.get(f"{LIST}?status=pending&limit=2", headers=auth).json()["next"]
    for other in ("", "&status=shipped", "&status=pending&sort=-id", "&status=pending&petId=1"):
        body = assert_error(client.get(f"{LIST}?cursor={cursor}{other}", headers=auth),
                            400, "invalid_request")
        assert "cursor" in body["message"]
    more = client.get(f"{LIST}?status=pending&limit=5&cursor={cursor}", headers=auth)
    assert more.status_code == 200 and len(more.json()["orders"]) == 5


@pytest.mark.parametrize("query", [
    "cursor=abc", "cursor=%21%21", "limit=0", "limit=1001", "limit=ten", "limit=",
    "status=lost", "status=", "sort=price", "petId=seven", "complete=maybe",
    "shipDateFrom=yesterday", "shipDateTo=2026-11-20T10:00:00", "color=red", "offset=10",
    # Before the year 1 or after 9999 once in UTC: refused, not an overflow (was a 500).
    "shipDateFrom=0001-01-01T00:00:00%2B01:00", "shipDateTo=9999-12-31T23:59:59-01:00",
])
def test_malformed_queries_are_400_naming_the_parameter(
        client: Any, auth: dict[str, str], query: str) -> None:
    body = assert_error(client.get(f"{LIST}?{query}", headers=auth), 400, "invalid_request")
    assert query.split("=")[0] in body["message"], body


def test_an_edited_cursor_is_refused(client: Any, auth: dict[str, str],
                                     many: list[dict[str, Any]]) -> None:
    cursor = client.get(f"{LIST}?limit=2", headers=auth).json()["next"]
    for edited in (cursor[:-1], cursor[:-2] + ("A" if cursor[-2] != "A" else "B") + cursor[-1],
                   "x" + cursor, cursor + "A"):
        body = assert_error(client.get(f"{LIST}?cursor={edited}", headers=auth),
                            400, "invalid_request")
        assert "cursor" in body["message"]


def test_a_page_and_an_order_answer_a_matching_if_none_match_with_304(
        client: Any, auth: dict[str, str], many: list[dict[str, Any]]) -> None:
    for url in (f"{LIST}?limit=3", f"{LIST}/101"):
        first = client.get(url, headers=auth)
        tag = first.headers["etag"]
        # Pages carry a weak ETag of their content, single orders a strong one of their
        # version (D25).
        assert tag.startswith('W/"' if "limit" in url else '"')
        again = client.get(url, headers={**auth, "If-None-Match": tag})
        assert again.status_code == 304 and again.content == b""
        assert again.headers["etag"] == tag
        for header in RATE_HEADERS:
            assert header in again.headers
        stale = client.get(url, headers={**auth, "If-None-Match": 'W/"other"'})
        assert stale.status_code == 200
    # Cancelling order 1 (pending) changes the first page, not a page of shipped orders.
    other_page = client.get(f"{LIST}?limit=3&status=shipped", headers=auth).headers["etag"]
    page = client.get(f"{LIST}?limit=3", headers=auth).headers["etag"]
    assert client.delete(f"{LIST}/1", headers=auth).status_code == 204
    assert client.get(f"{LIST}?limit=3", headers={**auth, "If-None-Match": page}
                      ).status_code == 200
    assert client.get(f"{LIST}?limit=3&status=shipped",
                      headers={**auth, "If-None-Match": other_page}).status_code == 304
    # A matching tag never needs a key.
    assert_error(client.get(f"{LIST}?limit=3&status=shipped",
                            headers={"If-None-Match": other_page}), 401, "missing_api_key")


def test_one_order_by_id_and_its_errors(client: Any, auth: dict[str, str]) -> None:
    response = client.get(f"{LIST}/2", headers=auth)
    assert response.status_code == 200
    assert response.json() == {"id": 2, "petId": 20, "quantity": 2,
                               "shipDate": "2026-11-20T10:00:00Z", "complete": True,
                               "status": "shipped"}
    unknown = assert_error(client.get(f"{LIST}/999", headers=auth), 404, "order_not_found")
    assert unknown["message"] == "No order has the id 999."
    assert_error(client.get(f"{LIST}/999", headers={**auth, "If-None-Match": "*"}),
                 404, "order_not_found")
    for bad in ("abc", "1.5", "+5", "005", str(2**63)):
        assert_error(client.get(f"{LIST}/{bad}", headers=auth), 400, "invalid_request")
    assert_error(client.get(f"{LIST}/2"), 401, "missing_api_key")


def test_cancel_in_v2_is_v1s(client: Any, auth: dict[str, str]) -> None:
    assert client.delete(f"{LIST}/1", headers=auth).status_code == 204
    assert client.delete(f"{LIST}/1", headers=auth).status_code == 204
    assert client.get(f"{LIST}/1", headers=auth).json()["status"] == "cancelled"
    assert_error(client.delete(f"{LIST}/2", headers=auth), 409, "order_already_shipped")
    assert_error(client.delete(f"{LIST}/999", headers=auth), 404, "order_not_found")


def test_a_method_the_path_does_not_take_is_405_listing_every_method_it_does(
        client: Any, auth: dict[str, str]) -> None:
    response = client.put(f"{LIST}/1", headers=auth)
    assert_error(response, 405, "method_not_allowed")
    assert response.headers["allow"] == "DELETE, GET, HEAD"
    assert client.put(LIST, headers=auth).headers["allow"] == "GET, HEAD, POST"
    assert client.put("/v1/store/orders/1", headers=auth).headers["allow"] == "DELETE"


def test_one_key_has_one_quota_across_v1_and_v2(settings: Settings, store: Store) -> None:
    key = make_key(store, plan="free")
    auth = {"Authorization": f"Bearer {key}"}
    app = create_app(settings)
    with app.test_client() as client:
        statuses = [client.get(url, headers=auth).status_code
                    for url in ["/v1/store/orders", LIST] * 30]
        assert statuses == [200] * 60
        remaining = {client.get(url, headers=auth).headers["x-ratelimit-remaining"]
                     for url in ("/v1/store/orders", LIST)}
        assert remaining == {"0"}
        assert_error(client.get(LIST, headers=auth), 429, "rate_limit_exceeded")
        assert_error(client.get("/v1/store/orders", headers=auth), 429, "rate_limit_exceeded")


class CountingStore:
    """Wraps a store, counting the pages and orders read."""

    def __init__(self, inner: Store) -> None:
        self.inner, self.reads = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def page_orders(self, *args: Any) -> Any:
        self.reads += 1
        return self.inner.page_orders(*args)

    def get_versioned_order(self, order_id: int) -> Any:
        self.reads += 1
        return self.inner.get_versioned_order(order_id)


def test_repeats_are_answered_from_the_cache_until_any_order_changes(
        app: Any, client: Any, auth: dict[str, str], store: Store) -> None:
    counting: dict[str, CountingStore] = {}
    wrap_store(app, lambda inner: counting.setdefault("store", CountingStore(inner)))
    reads = lambda: counting["store"].reads  # noqa: E731
    first = client.get(f"{LIST}?limit=2", headers=auth)
    one = client.get(f"{LIST}/1", headers=auth)
    assert reads() == 2
    again = client.get(f"{LIST}?limit=2", headers=auth)
    assert client.get(f"{LIST}/1", headers=auth).content == one.content
    assert reads() == 2 and again.content == first.content
    assert again.headers["etag"] == first.headers["etag"]
    assert again.headers["link"] == first.headers["link"]
    # This request's own quota state and id, never the cached answer's.
    assert int(again.headers["x-ratelimit-remaining"]) < int(
        first.headers["x-ratelimit-remaining"])
    assert again.headers["x-request-id"] != first.headers["x-request-id"]
    revalidated = client.get(f"{LIST}?limit=2", headers={**auth,
                                                          "If-None-Match": first.headers["etag"]})
    assert revalidated.status_code == 304 and reads() == 2
    # Another query is another answer.
    client.get(f"{LIST}?limit=3", headers=auth)
    assert reads() == 3
    # A change from outside the app (the CLI, another host) is seen at once.
    store.ship_order(1, "2026-12-24T10:00:00Z")
    changed = client.get(f"{LIST}/1", headers={**auth, "If-None-Match": one.headers["etag"]})
    assert changed.status_code == 200 and changed.json()["status"] == "shipped"
    assert client.get(f"{LIST}?limit=2", headers=auth).json()["orders"][0]["status"] == "shipped"
    assert reads() == 5


def test_a_failing_store_is_a_500_or_503_error_object_in_v2_too(
        app: Any, client: Any, auth: dict[str, str]) -> None:
    class Failing(CountingStore):
        def page_orders(self, *args: Any) -> Any:
            raise RuntimeError("secret internals: SELECT * FROM orders")

        def get_versioned_order(self, order_id: int) -> Any:
            raise StoreUnavailable("SQLite: database is locked")

    wrap_store(app, Failing)
    body = assert_error(client.get(LIST, headers=auth), 500, "internal_error")
    assert "secret" not in body["message"] and "request" in body["message"]
    unavailable = client.get(f"{LIST}/1", headers=auth)
    assert_error(unavailable, 503, "service_unavailable")
    assert int(unavailable.headers["retry-after"]) >= 1


def test_an_answer_just_under_the_page_cache_size_is_served_not_a_500(
        settings: Settings, store: Store) -> None:
    key = make_key(store)
    auth = {"Authorization": f"Bearer {key}"}
    store.import_orders(_orders(30))
    with create_app(settings).test_client() as client:
        size = len(client.get(f"{LIST}?limit=30", headers=auth).content)
    # Kept with the bookkeeping of an entry, this body no longer fits: not kept, still 200.
    small = settings.replace(page_cache_bytes=size + 10)
    with create_app(small).test_client() as client:
        answers = [client.get(f"{LIST}?limit=30", headers=auth) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].content == answers[1].content


@pytest.mark.parametrize("path", ["/v2/store/orders/1", "/v2/store/orders?limit=2",
                                  "/v1/store/orders"])
def test_head_answers_the_get_headers_without_a_body(client: Any, auth: dict[str, str],
                                                     path: str) -> None:
    got = client.get(path, headers=auth)
    head = client.head(path, headers=auth)
    assert (head.status_code, head.content) == (200, b"")
    assert head.headers["etag"] == got.headers["etag"]
    assert head.headers["content-type"] == got.headers["content-type"]
    assert head.headers["x-ratelimit-limit"] == got.headers["x-ratelimit-limit"]
    assert int(head.headers["x-ratelimit-remaining"]) == \
        int(got.headers["x-ratelimit-remaining"]) - 1
