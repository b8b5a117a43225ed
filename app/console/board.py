"""The orders board (D35): v2's filters and sorts over cursor pages (app.core.paging, the
API's own rules, D18 and D19), each row's actions, the CSV export of exactly the filtered
orders, and the changes the board's script follows.

Each action carries the version its row showed (D25): an order changed since is not
acted on, and the board says so. The actions are the core's rules (app.core.orders), the
same as the API's, so they answer its refusals, in words for a person; a cancel records
the user as the API records its key (D2), every action goes to the audit log, and the feed
and the webhooks see each change as any other.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

import flask
import orjson

from app.console.blueprint import (
    STAFF,
    Page,
    address,
    console,
    int64_of,
    needs,
    notice,
    path_id,
    query_id,
    render,
    store,
    version_of,
    visitor,
)
from app.core import feed, orders, paging
from app.core.errors import (
    InvalidParameter,
    OrderAlreadyShipped,
    OrderCancelled,
    OrderNotFound,
    OrderNotShipped,
    PetstoreError,
    PreconditionFailed,
)
from app.core.storage import Store
from app.core.storage.records import ORDER_STATUSES, OrderQuery
from app.core.users import accounts

PAGE_SIZE = 100  # orders a page of the board
SORTS = {"-id": "Newest first", "id": "Oldest first", "shipDate": "Ship date, earliest first",
         "-shipDate": "Ship date, latest first"}
DEFAULT_SORT = "-id"  # the board shows new orders first, where its script adds them
FILTERS = ("status", "petId", "complete", "from", "to", "sort")
ACTIONS = ("ship", "complete", "cancel")
EXPORT_BATCH = 1000  # orders a piece of the CSV export (one trip to a handler thread)
# The filters' names as the form labels them, for the rules' sentences.
LABELS = {"status": "Status", "petId": "Pet", "complete": "Complete",
          "shipDateFrom": "Ship date from", "shipDateTo": "Ship date to", "sort": "Sort"}


@dataclass(frozen=True)
class Board:
    """The board's filters as the form holds them, and the query they make."""

    form: dict[str, Any]  # what the form shows: statuses a list, the others text
    query: OrderQuery | None  # None when the form holds a value the rules refuse
    error: str | None

    def args(self) -> dict[str, Any]:
        """The filters as query parameters, for links that keep them."""
        return {name: value for name, value in self.form.items() if value}


def _day(text: str, name: str, after: bool = False) -> str:
    """A date of the form (YYYY-MM-DD) as the start of that day in UTC, or of the next
    day (after: the board's "to" includes its day; v2's shipDateTo is exclusive). A date
    past the calendar is refused as one that is not a date: 9999-12-31 has no next day."""
    try:
        day = dt.date.fromisoformat(text)
        if after:
            day += dt.timedelta(days=1)
    except (ValueError, OverflowError):
        raise InvalidParameter(name, "date_time_range") from None
    return f"{day.isoformat()}T00:00:00Z"


def board_of(args: Any) -> Board:
    """The board that the query parameters describe."""
    statuses = [s for value in args.getlist("status") for s in value.split(",") if s]
    form = {"status": statuses, "petId": args.get("petId", "").strip(),
            "complete": args.get("complete", ""), "from": args.get("from", ""),
            "to": args.get("to", ""), "sort": args.get("sort", DEFAULT_SORT)}
    try:
        pet = int64_of(form["petId"]) if form["petId"] else None  # D7's range, as v2's
        if form["petId"] and pet is None:
            raise InvalidParameter("petId", "type", {
                "type": "integer", "minimum": orders.INT64_MIN, "maximum": orders.INT64_MAX})
        if form["complete"] not in ("", "true", "false"):
            raise InvalidParameter("complete", "type", {"type": "boolean"})
        query = paging.order_query(
            status=statuses, pet_id=pet,
            complete=None if not form["complete"] else form["complete"] == "true",
            ship_date_from=_day(form["from"], "shipDateFrom") if form["from"] else None,
            ship_date_to=_day(form["to"], "shipDateTo", after=True) if form["to"] else None,
            sort=form["sort"])
    except InvalidParameter as exc:
        return Board(form, None, f"{LABELS.get(exc.name, exc.name)} {exc.message}")
    return Board(form, query, None)


class PetNames:
    """The names of the pets some orders name, each looked up once: read (learn) for a
    page's orders in one query, or one by one as they come (an export's)."""

    def __init__(self, found: Store) -> None:
        self.store, self.names = found, dict[int, str | None]()

    def learn(self, orders: list[dict[str, Any]]) -> None:
        """Look up the pets of these orders at once."""
        wanted = {o["petId"] for o in orders if "petId" in o} - set(self.names)
        if wanted:
            found = self.store.pet_names(sorted(wanted))
            self.names.update({pet_id: found.get(pet_id) for pet_id in wanted})

    def __call__(self, pet_id: int | None) -> str | None:
        if pet_id is None:
            return None
        if pet_id not in self.names:
            self.learn([{"petId": pet_id}])
        return self.names[pet_id]


def row_of(order: dict[str, Any], version: int, names: PetNames) -> dict[str, Any]:
    """An order as its row shows it: its fields, its pet's name, its version, and which
    actions its state allows (the rules of app.core.orders decide again when one is
    sent)."""
    return {**order, "petName": names(order.get("petId")), "version": version,
            "actions": actions_of(order)}


def actions_of(order: dict[str, Any]) -> list[str]:
    """The actions an order's state allows (the board's row and the order's page offer
    them; the rules of app.core.orders decide again when one is sent)."""
    return [action for action, allowed in (
        ("ship", order["status"] == "pending"),
        ("complete", order["status"] == "shipped" and not order["complete"]),
        ("cancel", order["status"] == "pending")) if allowed]


def order_notice() -> tuple[str, str] | None:
    """What the last action on an order did or why it was refused (the board's and the
    order's page's)."""
    number = query_id("order")
    if number is None:
        return None
    done = {"ship": f"Order {number} is shipped.", "complete": f"Order {number} is complete.",
            "cancel": f"Order {number} is cancelled.",
            "same": f"Order {number} was so already; nothing changed."}
    refused = {
        "changed": f"Order {number} changed meanwhile; nothing was done. Its row shows it "
                   "as it is now: look again before acting.",
        "cancelled": f"Order {number} is cancelled; nothing was done.",
        "shipped": OrderAlreadyShipped(number).message,
        "not-shipped": OrderNotShipped(number).message,
        "not-found": OrderNotFound(number).message}
    return notice(done, refused)


@console.route("/orders")
@needs(STAFF)
def orders_board() -> Page:
    """The board: one page of the filtered orders, with each row's actions."""
    board = board_of(flask.request.args)
    if board.query is None:
        return render("orders.html", 400, board=board, rows=[], statuses=ORDER_STATUSES,
                      sorts=SORTS, notice=None)
    found = store()
    cursor = flask.request.args.get("cursor") or None
    try:
        page = paging.page(found, board.query, PAGE_SIZE, cursor)
    except InvalidParameter:
        flask.abort(400, description="This page's link is not one the board made, or it "
                                     "was made for other filters; start from the first page.")
    shown = [orjson.loads(text) for text in page.orders]
    names = PetNames(found)
    names.learn(shown)
    rows = [row_of(order, version, names)
            for order, version in zip(shown, page.versions, strict=True)]
    here = urlencode(board.args() | ({"cursor": cursor} if cursor else {}), doseq=True)
    return render("orders.html", board=board, rows=rows, statuses=ORDER_STATUSES,
                  sorts=SORTS, next=page.next, here=here, first_page=cursor is None,
                  acting=flask.url_for("console.orders_board"),
                  notice=order_notice(), after=feed.latest(found))


def board_url(text: str, **notice: Any) -> str:
    """The board page an action was sent from (its filters and cursor, read from the form
    or a link and kept only where they are the board's own), saying what happened."""
    kept: dict[str, Any] = {}
    for name, value in parse_qsl(text):
        if name in (*FILTERS, "cursor"):
            kept.setdefault(name, []).append(value)
    return flask.url_for("console.orders_board", **kept, **notice)


def back_url(values: Any, number: int, **notice: Any) -> str:
    """Where an action on an order goes back to, saying what happened: the order's page
    when its form (or its confirmation's link) came from there (to=order), else the board
    page it was sent from (back)."""
    if values.get("to") == "order":
        return flask.url_for("console.order_page", order_id=number, **notice)
    return board_url(values.get("back", ""), **notice)


def _back(values: Any, number: int, **notice: Any) -> Page:
    """303 to the page the action was sent from, saying what happened."""
    return flask.redirect(back_url(values, number, **notice, order=number), 303)


# The core's refusals, by the word the pages show them with (order_notice).
REFUSALS: dict[type[PetstoreError], str] = {
    PreconditionFailed: "changed", OrderCancelled: "cancelled",
    OrderAlreadyShipped: "shipped", OrderNotShipped: "not-shipped",
    OrderNotFound: "not-found"}


@console.route("/orders/<order_id>/<action>", methods=["POST"])
@needs(STAFF)
def act(order_id: str, action: str) -> Page:
    """Ship (with an optional date), complete or cancel an order, at the version its row
    showed."""
    if action not in ACTIONS:
        flask.abort(404)
    number = path_id(order_id)
    _, user = visitor()
    assert user is not None
    form = flask.request.form
    version = version_of(form, "order")
    found = store()
    try:
        if action == "ship":
            day = form.get("shipDate", "")
            result = orders.ship(found, number, _day(day, "shipDate") if day else None,
                                 version)
        elif action == "complete":
            result = orders.complete(found, number, version)
        else:
            result = orders.cancel(found, number, None, version, user_id=user.id)
    except InvalidParameter:
        flask.abort(400, description="The ship date is not a date (YYYY-MM-DD).")
    except PetstoreError as exc:
        refused = next((word for kind, word in REFUSALS.items() if isinstance(exc, kind)),
                       None)
        if refused is None:
            raise
        accounts.record(found, user.name, address(), f"{action} refused",
                        f"order {number}: {refused}")
        return _back(form, number, refused=refused)
    accounts.record(found, user.name, address(), action if result.changed else
                    f"{action} (unchanged)", f"order {number}")
    return _back(form, number, done=action if result.changed else "same")


# Where a spreadsheet may begin a cell inside one field's text (D37, after OWASP's CSV
# injection): the text's start, and after any separator it may be set to split on (a
# comma, a semicolon, a tab), a line break, or a quote; a cell that begins there with
# = + - @ (past any spaces), a tab or a return is taken for a formula.
FORMULA_CELL = re.compile(r'(?:^|(?<=[,;\t\r\n"]))(?= *[=+\-@\t\r])')


def plain_text(text: str) -> str:
    """Text that no spreadsheet takes for a formula, however it splits the file: a ' (which
    makes a cell plain text) before each place where a cell would begin as one (D37)."""
    return FORMULA_CELL.sub("'", text)


def _safe_cell(value: Any) -> Any:
    """A cell of the export: text made plain text (plain_text); a number left as it is, a
    negative one included (-5 is a number to a spreadsheet, never a formula)."""
    return plain_text(value) if isinstance(value, str) else value


EXPORT_COLUMNS = ("id", "petId", "petName", "quantity", "shipDate", "status", "complete")


def export_rows(found: Store, query: OrderQuery) -> Iterator[bytes]:
    """The CSV of every order the query selects, in its sort, a piece per EXPORT_BATCH
    orders, read a page at a time (paging.walk): memory stays flat however many."""
    names = PetNames(found)
    buffer = io.StringIO()
    writer = csv.writer(buffer, quoting=csv.QUOTE_ALL)  # every field quoted (D37)
    writer.writerow(EXPORT_COLUMNS)
    for count, text in enumerate(paging.walk(found, query, EXPORT_BATCH), start=1):
        order = orjson.loads(text)
        writer.writerow([_safe_cell(value) for value in (
            order["id"], order.get("petId", ""), names(order.get("petId")) or "",
            order.get("quantity", ""), order.get("shipDate", ""), order["status"],
            "true" if order["complete"] else "false")])
        if count % EXPORT_BATCH == 0:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


@console.route("/orders.csv")
@needs(STAFF)
def export() -> Page:
    """Every order the board's filters select, as CSV, streamed."""
    board = board_of(flask.request.args)
    if board.query is None:
        flask.abort(400, description=board.error)
    _, user = visitor()
    assert user is not None
    found = store()
    accounts.record(found, user.name, address(), "orders exported",
                    urlencode(board.args(), doseq=True))
    today = dt.datetime.now(dt.UTC).date().isoformat()
    return flask.Response(export_rows(found, board.query), mimetype="text/csv",
                          headers={"Content-Disposition":
                                   f'attachment; filename="orders-{today}.csv"'})


@console.route("/orders/changes")
@needs(STAFF)
def changes() -> Page:
    """The orders changed after the cursor (the board's script asks every few seconds,
    with the session's cookie: the API's feed needs a key), each as the board's row shows
    it, read with its version, and whether the board's filters select it."""
    board = board_of(flask.request.args)
    if board.query is None:
        flask.abort(400, description=board.error)
    found = store()
    try:
        page = feed.changes(found, flask.request.args.get("after") or None, 100)
    except PetstoreError:  # an edited cursor, or another database's: start from now
        return flask.Response(orjson.dumps({"orders": [], "next": feed.latest(found)}),
                              mimetype="application/json")
    names = PetNames(found)
    rows = []
    for text in page.items:
        read = found.get_versioned_order(orjson.loads(text)["id"])
        if read is not None:
            order, version = read
            rows.append(row_of(order, version, names)
                        | {"selected": paging.selects(board.query, order)})
    return flask.Response(orjson.dumps({"orders": rows, "next": page.next}),
                          mimetype="application/json")
