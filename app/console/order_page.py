"""An order's page (docs/console.md, "An order's page"): its fields, its pet, its story
(app.core.order_story: placed, shipped, completed, cancelled; when, by whom, from where, as
far as the store records it) and the actions its state allows, each the board's own form
(board.act, at the version this page showed, D25), come back here; and the search box's
answer, which goes from a typed id to the order's page."""

from __future__ import annotations

import re

import flask

from app.console.blueprint import STAFF, Page, console, needs, path_id, render, store
from app.console.board import actions_of, order_notice
from app.core import order_story
from app.core.errors import OrderNotFound

# What the search box takes: an order's number, in ASCII digits, with spaces around it or a
# hash sign before it (as a person may copy it from a message); anything else is not a
# number (400).
TYPED = re.compile(r"#?\s*([0-9]+)\Z")
SHOWN_MAX = 40  # characters of the refused text that the 400 page repeats


@console.route("/orders/find")
@needs(STAFF)
def find_order() -> Page:
    """The search box's answer: 303 to the order's page of the number typed (whose page is
    404 when no order has it, an id past int64 included, as path_id says), or a 400 page
    for text that is no number."""
    typed = flask.request.args.get("id", "").strip()
    found = TYPED.match(typed)
    if found is None:
        shown = typed if len(typed) <= SHOWN_MAX else f"{typed[:SHOWN_MAX]}…"
        flask.abort(400, description=(
            f"“{shown}” is not an order number: type its digits, such as 42." if typed
            else "Type an order's number, such as 42."))
    digits = found.group(1).lstrip("0") or "0"
    return flask.redirect(flask.url_for("console.order_page", order_id=digits), 303)


@console.route("/orders/<order_id>")
@needs(STAFF)
def order_page(order_id: str) -> Page:
    """The order's fields, its pet, its story and its actions."""
    number = path_id(order_id)
    story = order_story.tell(store(), number)
    if story is None:
        flask.abort(404, description=OrderNotFound(number).message)
    return render("order.html", story=story, order=story.order,
                  actions=actions_of(story.order),
                  notice=order_notice())
