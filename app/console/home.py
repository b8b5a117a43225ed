"""The console's home page and its audit log (D35)."""

from __future__ import annotations

import datetime as dt

import flask

from app.console.blueprint import Page, console, render, store
from app.core import pets


@console.route("/")
def home() -> Page:
    """What a shop owner looks at first: the orders waiting, the units they hold, what
    shipped today (UTC), and the inventory (D34): the stock on hand, what pending orders
    hold of it, and what is left to order, as the store keeps them (one statement)."""
    today = dt.datetime.now(dt.UTC).date()
    summary = store().order_summary(f"{today.isoformat()}T00:00:00Z",
                                    f"{(today + dt.timedelta(days=1)).isoformat()}T00:00:00Z")
    return render("home.html", summary=summary, today=today.isoformat(),
                  inventory=pets.inventory(store()))


AUDIT_PAGE = 100


@console.route("/audit")
def audit() -> Page:
    """The audit log, newest first, a page at a time."""
    before = flask.request.args.get("before", "")
    entries = store().audit_entries(AUDIT_PAGE, int(before) if before.isdigit() else None)
    older = entries[-1].id if len(entries) == AUDIT_PAGE else None
    return render("audit.html", entries=entries, older=older)
