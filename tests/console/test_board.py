"""The orders board (D35), as a signed-in visitor sees it: v2's filters and sorts over
cursor pages, each action at the version its row showed ("changed meanwhile" otherwise),
the core's refusals in words, the user recorded, the changes the board's script follows,
the CSV export of exactly the filtered orders, the home page's figures, and text anyone
can put in shown as text."""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
import sqlite3

from app.core import feed, orders
from app.core.config import Settings
from app.core.storage import Store
from tests.console.conftest import Visitor, walk_pages


def _row_ids(page: str) -> list[int]:
    return [int(found) for found in re.findall(r'<tr id="order-(\d+)"', page)]


def _version_of(page: str, order_id: int) -> str:
    row = page.split(f'<tr id="order-{order_id}"', 1)[1].split("</tr>", 1)[0]
    return re.search(r'name="version" value="(\d+)"', row).group(1)  # type: ignore[union-attr]


def test_the_board_filters_and_sorts_as_v2_does(signed_in: Visitor) -> None:
    assert signed_in.get("/console/orders").status_code == 200
    assert _row_ids(signed_in.page) == [4, 3, 2, 1]  # newest first by default
    signed_in.get("/console/orders?status=pending&sort=id")
    assert _row_ids(signed_in.page) == [1, 4]
    signed_in.get("/console/orders?status=pending&status=cancelled&petId=10")
    assert _row_ids(signed_in.page) == [3, 1]
    signed_in.get("/console/orders?from=2026-11-20&to=2026-11-20")  # "to" includes its day
    assert _row_ids(signed_in.page) == [2]
    signed_in.get("/console/orders?complete=false&sort=shipDate")
    assert _row_ids(signed_in.page) == [2, 1, 3, 4]  # undated after dated, by id
    refused = signed_in.get("/console/orders?from=yesterday")
    assert refused.status_code == 400 and "Ship date from" in refused.text


def test_the_board_pages_by_cursor(signed_in: Visitor, store: Store) -> None:
    store.import_orders([{"id": n, "petId": 1, "quantity": 1} for n in range(5, 121)])
    seen = walk_pages(signed_in, "/console/orders?status=pending", _row_ids)
    assert seen == sorted([1, 4, *range(5, 121)], reverse=True)


def test_an_order_is_shipped_completed_and_the_board_says_so(signed_in: Visitor,
                                                            store: Store) -> None:
    signed_in.get("/console/orders?status=pending")
    shipped = signed_in.post("/console/orders/1/ship", {
        "version": _version_of(signed_in.page, 1), "shipDate": "2026-11-27",
        "back": "status=pending&sort=id&evil=1"})
    assert shipped.headers["location"] == (
        "/console/orders?status=pending&sort=id&done=ship&order=1")
    page = signed_in.follow(shipped).text
    assert "Order 1 is shipped." in page and _row_ids(page) == [4]
    assert store.get_order(1) == {"id": 1, "petId": 10, "quantity": 2,
                                  "shipDate": "2026-11-27T00:00:00Z", "complete": False,
                                  "status": "shipped"}
    signed_in.get("/console/orders?status=shipped")
    completed = signed_in.post("/console/orders/1/complete",
                               {"version": _version_of(signed_in.page, 1)})
    assert "Order 1 is complete." in signed_in.follow(completed).text
    assert [(e.user_name, e.action, e.detail) for e in store.audit_entries(2)] == [
        ("owner", "complete", "order 1"), ("owner", "ship", "order 1")]


def test_an_order_changed_meanwhile_is_not_acted_on(signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/orders")
    shown = _version_of(signed_in.page, 4)
    orders.ship(store, 4)  # through the API or the CLI, while the board was open
    refused = signed_in.post("/console/orders/4/cancel", {"version": shown})
    page = signed_in.follow(refused).text
    assert "Order 4 changed meanwhile; nothing was done." in page
    assert store.get_order(4)["status"] == "shipped"  # type: ignore[index]
    # The row now shows it as it is, with the version to act on.
    assert _version_of(page, 4) != shown and "shipped" in page.split('id="order-4"')[1]


def test_the_cores_refusals_are_said_in_words(signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/orders")
    version = str(store.order_version(2))
    cancel = signed_in.post("/console/orders/2/cancel", {"version": version})
    assert "has already shipped and can no longer be cancelled" in signed_in.follow(
        cancel).text
    missing = signed_in.post("/console/orders/99/ship", {"version": "1"})
    assert "No order has the id 99." in signed_in.follow(missing).text
    assert signed_in.post("/console/orders/1/ship", {}).status_code == 400


def test_a_cancel_records_the_user_and_reaches_the_feed(signed_in: Visitor, store: Store,
                                                        settings: Settings) -> None:
    after = feed.latest(store)
    signed_in.get("/console/orders")
    cancelled = signed_in.post("/console/orders/1/cancel",
                               {"version": _version_of(signed_in.page, 1)})
    assert "Order 1 is cancelled." in signed_in.follow(cancelled).text
    changed = feed.changes(store, after)
    assert changed.items == ['{"id":1,"petId":10,"quantity":2,"complete":false,'
                              '"status":"cancelled"}']
    owner = store.console_user("owner")
    with sqlite3.connect(settings.database) as db:
        assert db.execute("SELECT cancelled_by, cancelled_by_user FROM orders WHERE id = 1"
                          ).fetchall() == [(None, owner.id if owner else 0)]


def test_the_boards_script_reads_the_changes_with_the_session(signed_in: Visitor,
                                                              store: Store) -> None:
    page = signed_in.get("/console/orders?status=pending").text
    changes = re.search(r'data-changes="([^"]+)" data-after="([^"]+)"', page)
    assert changes is not None
    url = changes.group(1).replace("&amp;", "&")
    nothing = signed_in.get(f"{url}&after={changes.group(2)}")
    assert nothing.headers["content-type"] == "application/json"
    assert nothing.json()["orders"] == []
    store.import_orders([{"id": 9, "petId": 7, "quantity": 1}])
    orders.ship(store, 4)
    seen = signed_in.get(f"{url}&after={changes.group(2)}").json()
    assert [(o["id"], o["status"], o["selected"], o["version"], o["actions"])
            for o in seen["orders"]] == [(9, "pending", True, 1, ["ship", "cancel"]),
                                         (4, "shipped", False, 2, ["complete"])]
    assert signed_in.get(f"{url}&after={seen['next']}").json()["orders"] == []
    # Without a session, no changes: the sign-in page.
    signed_in.post("/console/sign-out")
    assert signed_in.get(f"{url}&after={seen['next']}").status_code == 303


def test_the_export_is_exactly_the_filtered_orders(signed_in: Visitor, store: Store) -> None:
    store.import_pets([{"id": 10, "name": "=HYPERLINK(\"http://x\")"}])
    store.import_orders([{"id": n, "petId": 10, "quantity": 1} for n in range(5, 2600)])
    exported = signed_in.get("/console/orders.csv?status=pending&petId=10&sort=id")
    assert exported.status_code == 200
    assert exported.headers["content-type"].startswith("text/csv")
    assert exported.headers["content-disposition"].startswith('attachment; filename="orders-')
    rows = list(csv.reader(io.StringIO(exported.text)))
    assert rows[0] == ["id", "petId", "petName", "quantity", "shipDate", "status", "complete"]
    assert [int(row[0]) for row in rows[1:]] == [1, *range(5, 2600)]
    assert rows[1] == ["1", "10", "'=HYPERLINK(\"http://x\")", "2", "", "pending", "false"]
    assert store.audit_entries(1)[0].action == "orders exported"


# Names a spreadsheet would take for formulas, at the start of a cell or after a separator
# (OWASP's CSV injection), some of them with characters D37 refuses now, as rows written
# before it may hold.
FORMULAS = ["Rex;=1+1;@SUM(1;2)", "=HYPERLINK(\"http://x\")", "+1", "-2+3", "@SUM(1)",
            "\t=1", "a\t=1", " =1", "x,=1", "x, +1", "a\";=1", "Rex\r\n=1", "Rex\n@A1",
            "a;\t;-1", "Tom"]


def _cells_as_a_spreadsheet_reads(text: str, separator: str) -> list[str]:
    """The cells of a CSV as a spreadsheet set to this separator reads them when it does not
    honour the quotes: each line split on it, the quoting around a cell dropped."""
    return [cell.strip('"') for line in re.split(r"\r\n|\r|\n", text)
            for cell in line.split(separator)]


def test_no_cell_of_the_export_is_a_formula_whatever_a_spreadsheet_splits_on(
        signed_in: Visitor, store: Store) -> None:
    store.import_pets([{"id": 100 + n, "name": name} for n, name in enumerate(FORMULAS)])
    store.import_orders([{"id": 100 + n, "petId": 100 + n, "quantity": 1}
                         for n in range(len(FORMULAS))]
                        + [{"id": 99, "petId": -5, "quantity": 1}])
    exported = signed_in.get("/console/orders.csv?sort=id").text
    assert exported.startswith('"id","petId","petName",')  # every field quoted
    for separator in (",", ";", "\t"):
        cells = _cells_as_a_spreadsheet_reads(exported, separator)
        formulas = [cell for cell in cells if cell.lstrip(" ")[:1] in ("=", "+", "-", "@")
                    and not re.fullmatch(r"-[0-9]+", cell)]  # a negative number is one
        assert formulas == [], (separator, formulas)
    rows = {row[0]: row for row in csv.reader(io.StringIO(exported))}
    assert rows["99"][1:3] == ["-5", ""]  # a number is left as it is
    assert [rows[str(100 + n)][2] for n in (0, 1, 5, 14)] == [
        "Rex;'=1+1;'@SUM(1;2)", "'=HYPERLINK(\"http://x\")", "'\t'=1", "Tom"]


def test_the_home_page_counts_what_waits_and_what_shipped_today(signed_in: Visitor,
                                                                store: Store) -> None:
    today = dt.datetime.now(dt.UTC).date().isoformat()
    store.import_orders([{"id": 7, "petId": 1, "quantity": 4, "status": "shipped",
                          "shipDate": f"{today}T08:00:00Z"}])
    page = signed_in.get("/console/").text
    figures = dict(re.findall(r'<dd id="([a-z-]+)">(?:<a [^>]+>)?([\d,]+)<', page))
    assert {name: figures[name] for name in ("pending", "units", "shipped-today")} == {
        "pending": "2", "units": "5", "shipped-today": "1"}


def test_text_anyone_can_put_in_is_shown_as_text(signed_in: Visitor, store: Store) -> None:
    store.import_pets([{"id": 10, "name": "<script>alert('pwned')</script><b>Rex</b>"}])
    page = signed_in.get("/console/orders").text
    assert "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;&lt;b&gt;Rex&lt;/b&gt;" in page
    assert "<script>alert" not in page and "<b>Rex" not in page


def test_the_home_page_shows_the_inventory_of_the_tracked_stock(signed_in: Visitor,
                                                                store: Store) -> None:
    # Pet 10 holds order 1's 2 units; pet 30 order 4's 3; pet 40 is not tracked.
    store.import_pets([{"id": 10, "name": "Rex", "stock": 5},
                       {"id": 30, "name": "Tom", "stock": 3},
                       {"id": 40, "name": "Kit"}])
    page = signed_in.get("/console/").text
    figures = dict(re.findall(r'<dd id="([a-z-]+)">(?:<a [^>]+>)?([\d,]+)<', page))
    assert {name: figures[name] for name in ("on-hand", "reserved", "available")} == {
        "on-hand": "8", "reserved": "5", "available": "3"}
