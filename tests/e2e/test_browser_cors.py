"""A storefront on another origin, in a real browser: headless Chromium loads a page from
one origin and, with fetch(), calls `petstore serve` (gunicorn) on another that
PETSTORE_CORS_ORIGINS allows. It places an order, replays it, ships it with If-Match,
follows a page's Link, and reads every header the documents declare for it to read; a
page from an origin not allowed reads nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support import page_elsewhere, serving

pytestmark = pytest.mark.slow

PAGE = b"<!doctype html><title>A shop</title><p>A shop on an origin of its own.</p>"

# What the page's script does, as a shop's would: every answer it saw, with the headers it
# could read (null for one CORS kept from it).
SHOP_SCRIPT = """
const [api, key, limitedKey, done] = arguments;
const READ = ["Location", "ETag", "Link", "Idempotent-Replayed", "Retry-After",
              "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset",
              "X-Request-ID", "Deprecation", "Sunset", "Content-Type"];
async function call(method, path, headers, body, bearer = key) {
  const response = await fetch(new URL(path, api), {
    method, body, headers: {"Authorization": `Bearer ${bearer}`, ...headers}});
  const seen = {status: response.status, body: await response.text()};
  for (const name of READ) seen[name] = response.headers.get(name);
  return seen;
}
const order = JSON.stringify({petId: 7, quantity: 2});
const placing = {"Content-Type": "application/json", "Idempotency-Key": "shop-order-1",
                 "X-Request-ID": "shop-page-1"};
(async () => {
  const seen = {};
  seen.placed = await call("POST", "/v2/store/orders", placing, order);
  seen.replayed = await call("POST", "/v2/store/orders", placing, order);
  const where = seen.placed.Location;
  seen.stale = await call("POST", `${where}/ship`, {"If-Match": '"99"'});
  seen.shipped = await call("POST", `${where}/ship`, {"If-Match": seen.placed.ETag});
  for (const n of [2, 3]) {
    await call("POST", "/v2/store/orders", {...placing, "Idempotency-Key": `shop-order-${n}`},
               order);
  }
  seen.cancelled = await call("DELETE", "/v2/store/orders/3", {"If-Match": '"1"'});
  seen.first = await call("GET", "/v2/store/orders?limit=2");
  seen.next = await call("GET", seen.first.Link.match(/^<([^>]+)>; rel="next"$/)[1]);
  seen.pet = await call("GET", "/v1/pets/7");
  seen.limited = [];
  for (let i = 0; i < 3; i++) {
    seen.limited.push(await call("GET", "/v2/store/orders/1", {}, undefined, limitedKey));
  }
  return seen;
})().then(done, (error) => done({error: String(error)}));
"""

# The same call from a page CORS does not allow: fetch() fails, the answer unread.
REFUSED_SCRIPT = """
const [api, key, done] = arguments;
fetch(new URL("/v2/store/orders", api), {headers: {"Authorization": `Bearer ${key}`}})
  .then((response) => done(`read ${response.status}`), (error) => done(error.name));
"""


def test_a_shop_on_another_origin_places_ships_pages_and_reads_every_header(
        browser: Any, tmp_path: Path) -> None:
    with page_elsewhere(PAGE) as port:  # the shop's page, on an origin of its own
        shop = f"http://127.0.0.1:{port}"
        with serving(tmp_path, cors_origins=shop) as server:
            key = server.petstore("keys", "create", "--plan", "business",
                                  "--name", "shop").stdout.strip()
            limited = server.petstore("keys", "create", "--plan", "enterprise",
                                      "--per-minute", "2", "--per-day", "1000",
                                      "--name", "small").stdout.strip()
            pets = tmp_path / "pets.json"
            pets.write_text(json.dumps([{"id": 7, "name": "Rex"}]))
            server.petstore("pets", "import", str(pets))
            api = f"http://127.0.0.1:{server.port}"
            browser.set_script_timeout(60)
            browser.get(f"{shop}/")
            seen = browser.execute_async_script(SHOP_SCRIPT, api, key, limited)
            # The same page from an origin CORS does not allow (localhost is not 127.0.0.1).
            browser.get(f"http://localhost:{port}/")
            refused = browser.execute_async_script(REFUSED_SCRIPT, api, key)
    assert "error" not in seen, seen

    placed, replayed = seen["placed"], seen["replayed"]
    assert placed["status"] == 201, placed
    order = json.loads(placed["body"])
    assert placed["Location"] == f"/v2/store/orders/{order['id']}"
    assert placed["ETag"] == '"1"'
    assert placed["Idempotent-Replayed"] is None
    assert placed["X-Request-ID"] == "shop-page-1"
    assert int(placed["X-RateLimit-Limit"]) > int(placed["X-RateLimit-Remaining"]) >= 0
    assert int(placed["X-RateLimit-Reset"]) >= 0
    assert (replayed["status"], replayed["Idempotent-Replayed"]) == (201, "true")
    assert json.loads(replayed["body"]) == order and replayed["Location"] == placed["Location"]

    stale, shipped = seen["stale"], seen["shipped"]
    assert stale["status"] == 412 and stale["ETag"] == '"1"', stale
    assert json.loads(stale["body"])["code"] == "precondition_failed"
    assert shipped["status"] == 200 and shipped["ETag"] == '"2"', shipped
    assert json.loads(shipped["body"])["status"] == "shipped"
    assert seen["cancelled"]["status"] == 204, seen["cancelled"]

    first, following = seen["first"], seen["next"]
    assert first["status"] == 200 and first["ETag"], first
    assert first["Link"].endswith('>; rel="next"')
    ids = [o["id"] for page in (first, following) for o in json.loads(page["body"])["orders"]]
    assert ids == [1, 2, 3], ids
    assert following["status"] == 200 and following["Link"] is None

    pet = seen["pet"]
    assert pet["status"] in (200, 410), pet  # 410 gone once its sunset has passed
    assert pet["Deprecation"].startswith("@") and pet["Sunset"].endswith(" GMT"), pet

    counted = seen["limited"]
    assert [answer["status"] for answer in counted] == [200, 200, 429], counted
    assert [answer["X-RateLimit-Remaining"] for answer in counted] == ["1", "0", "0"]
    assert int(counted[2]["Retry-After"]) >= 1
    assert json.loads(counted[2]["body"])["code"] == "rate_limit_exceeded"

    assert refused == "TypeError", refused
