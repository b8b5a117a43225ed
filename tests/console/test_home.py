"""The home page's picture of the shop (docs/console.md), as a signed-in owner sees it:
the last 30 UTC days' orders placed and units shipped, drawn as SVG whose numbers are
those of its table, moved by placing, shipping and cancelling (a day with none is zero);
the pets running out by the threshold the owner sets, its refusals, and the audit log."""

from __future__ import annotations

import datetime as dt
import re
import sqlite3

from app.core import orders
from app.core.config import Settings
from app.core.storage import Store
from tests.console.conftest import Visitor, row
from tests.support import make_key


def _today(days_ago: int = 0) -> str:
    return (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=days_ago)).isoformat()


def _table(page: str) -> dict[str, tuple[int, int]]:
    """The days' table: day -> (orders placed, units shipped)."""
    return {day: (int(placed.replace(",", "")), int(shipped.replace(",", "")))
            for day, placed, shipped in re.findall(
                r'<tr id="day-[\d-]+"><th scope="row" class="day">([\d-]+)</th>'
                r'<td class="placed">([\d,]+)</td><td class="shipped">([\d,]+)</td></tr>',
                page)}


def _chart(page: str, chart_id: str) -> dict[str, int]:
    """A chart's bars: day -> the value its title gives (and its data-value agrees)."""
    svg = page.split(f'<figure class="chart" id="{chart_id}">', 1)[1].split("</svg>", 1)[0]
    bars = re.findall(r'<rect class="bar"[^>]* data-day="([\d-]+)" data-value="(\d+)">'
                      r'<title>([\d-]+): ([\d,]+) ', svg)
    assert all(day == titled and value == shown.replace(",", "")
               for day, value, titled, shown in bars)
    return {day: int(value) for day, value, _, _ in bars}


def _svgs(page: str) -> list[str]:
    return re.findall(r"<svg[ >].*?</svg>", page, re.S)


def test_the_days_follow_places_ships_and_cancels(signed_in: Visitor, store: Store) -> None:
    before = _table(signed_in.get("/console/").text)
    assert list(before) == [_today(n) for n in range(29, -1, -1)]  # 30 days, oldest first
    # The fixture's four orders were imported today: all placed today; order 2's unit
    # shipped on its shipDate's day, 2026-11-20 (on the page while within 30 days).
    assert before[_today()][0] == 4 and sum(placed for placed, _ in before.values()) == 4
    placing = orders.Placing()
    new = placing.place(store, {"petId": 10, "quantity": 3}, 0, "k1").order
    other = placing.place(store, {"petId": 10, "quantity": 2}, 0, "k2").order
    orders.ship(store, new["id"])  # today
    orders.ship(store, 1, f"{_today(2)}T12:00:00Z")  # order 1's 2 units, two days ago
    orders.cancel(store, other["id"], None)  # placed all the same
    page = signed_in.get("/console/").text
    days = _table(page)
    expected = dict(before)
    expected[_today()] = (before[_today()][0] + 2, before[_today()][1] + 3)
    expected[_today(2)] = (before[_today(2)][0], before[_today(2)][1] + 2)
    assert days == expected
    # A day with none is zero.
    assert all(days[day] == (0, 0) for day in days
               if day not in (_today(), _today(2), "2026-11-20"))
    assert _chart(page, "placed-chart") == {day: placed for day, (placed, _) in days.items()}
    assert _chart(page, "shipped-chart") == {day: shipped
                                             for day, (_, shipped) in days.items()}
    figures = dict(re.findall(r'<dd id="([a-z-]+)">(?:<a [^>]+>)?([\d,]+)<', page))
    assert figures["pending"] == "1"  # order 4 alone waits
    assert "UTC days" in page


def test_the_charts_are_drawn_without_script_and_read_without_colour(signed_in: Visitor,
                                                                     store: Store) -> None:
    store.import_orders([{"id": 50 + n, "petId": 1, "quantity": 9 if n == 2 else 7,
                          "status": "shipped",
                          "shipDate": f"{_today(n)}T09:00:00Z"} for n in range(3)])
    answer = signed_in.get("/console/")
    svgs = _svgs(answer.text)
    assert len(svgs) == 2
    for svg in svgs:
        assert "<script" not in svg.lower() and " on" not in svg.lower()
        assert "href" not in svg and "style=" not in svg  # nothing loaded, nothing inline
        assert 'role="img"' in svg and "aria-labelledby" in svg
    shipped = svgs[1]
    # The scale is labelled with its values, and the most and the last day's are written.
    assert re.findall(r'<text class="scale"[^>]*>([\d,]+)</text>', shipped) == ["0", "5", "10"]
    assert re.findall(r'<text class="value"[^>]*>([\d,]+)</text>', shipped) == ["9", "7"]
    assert "<script" not in answer.text.lower().split("</head>", 1)[1]
    assert answer.headers["content-security-policy"] == signed_in.get(
        "/console/orders").headers["content-security-policy"]


def test_the_pets_running_out_follow_the_owners_threshold(signed_in: Visitor,
                                                          store: Store) -> None:
    # Pet 10 holds order 1's 2 units (6 left); pet 30 order 4's 3 (0 left); 40 untracked.
    store.import_pets([{"id": 10, "name": "Rex <b>", "stock": 8},
                       {"id": 30, "name": "Tom", "stock": 3}, {"id": 40, "name": "Kit"},
                       {"id": 50, "name": "Bo", "stock": 5}])
    page = signed_in.get("/console/").text
    assert re.findall(r'<tr id="low-(\d+)"', page) == ["30", "50"]  # at most 5 by default
    assert 'value="5"' in page.split('id="threshold"', 1)[1][:60]
    assert "Rex" not in page.split('id="low-stock"', 1)[1]
    saved = signed_in.post("/console/low-stock", {"threshold": "6"})
    page = signed_in.follow(saved).text
    assert "The low-stock threshold is saved." in page
    assert re.findall(r'<tr id="low-(\d+)"', page) == ["30", "50", "10"]
    assert "Rex &lt;b&gt;" in row(page, "low-10") and ">6</td>" in row(page, "low-10")
    assert store.low_stock_at() == 6
    signed_in.post("/console/low-stock", {"threshold": "0"})
    page = signed_in.get("/console/").text
    assert re.findall(r'<tr id="low-(\d+)"', page) == ["30"]
    entries = [(e.user_name, e.action, e.detail) for e in store.audit_entries(2)]
    assert entries == [("owner", "low-stock threshold set", "0 units"),
                       ("owner", "low-stock threshold set", "6 units")]


def test_a_threshold_that_is_no_number_of_units_is_refused(signed_in: Visitor,
                                                           store: Store) -> None:
    signed_in.get("/console/")
    for bad in ("", "-1", "2.5", "ten", "1000000001", "٣", "9" * 40, "<b>5</b>"):
        refused = signed_in.post("/console/low-stock", {"threshold": bad})
        assert refused.status_code == 400, bad
        assert ("The low-stock threshold must be a whole number from 0 to 1,000,000,000"
                in refused.text.replace("1000000000", "1,000,000,000")), refused.text
        assert "<b>5</b>" not in refused.text
        assert store.low_stock_at() == 5
    assert [e.action for e in store.audit_entries(1)] == ["low-stock threshold refused"]
    no_token = signed_in.post("/console/low-stock", {"threshold": "3"}, token="forged")
    assert no_token.status_code == 403 and store.low_stock_at() == 5


def test_the_home_page_reads_the_days_the_store_keeps(signed_in: Visitor, store: Store,
                                                      settings: Settings) -> None:
    """The figures are the store's kept rows, not a count of the orders at the visit: a
    row changed by hand is what the page shows (the chart's and "Shipped today")."""
    with sqlite3.connect(settings.database) as db:
        db.execute("UPDATE order_days SET placed = 1234, orders_shipped = 77 WHERE day = ?",
                   (_today(),))
    page = signed_in.get("/console/").text
    assert _table(page)[_today()] == (1234, 0)
    figures = dict(re.findall(r'<dd id="([a-z-]+)">(?:<a [^>]+>)?([\d,]+)<', page))
    assert figures["shipped-today"] == "77"


def test_orders_placed_and_shipped_through_the_api_are_on_the_page(signed_in: Visitor,
                                                                   store: Store) -> None:
    before = _table(signed_in.get("/console/").text)[_today()]
    auth = {"Authorization": f"Bearer {make_key(store)}"}
    placed = signed_in.client.post("/v2/store/orders", json={"petId": 3, "quantity": 4},
                                   headers={**auth, "Idempotency-Key": "k1"})
    assert placed.status_code == 201
    again = signed_in.client.post("/v2/store/orders", json={"petId": 3, "quantity": 4},
                                  headers={**auth, "Idempotency-Key": "k1"})
    assert again.json()["id"] == placed.json()["id"]  # a replay places nothing
    shipped = signed_in.client.post(f"/v2/store/orders/{placed.json()['id']}/ship",
                                    headers=auth)
    assert shipped.status_code == 200
    after = _table(signed_in.get("/console/").text)[_today()]
    assert after == (before[0] + 1, before[1] + 4)
