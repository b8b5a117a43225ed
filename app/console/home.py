"""The console's home page and its audit log (D35)."""

from __future__ import annotations

import datetime as dt

import flask

from app.console.blueprint import (
    OWNER,
    STAFF,
    Page,
    console,
    needs,
    query_id,
    render,
    state,
    store,
)
from app.core import pets


@console.route("/")
@needs(STAFF)
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
@needs(OWNER)
def audit() -> Page:
    """The audit log, newest first, a page at a time, filtered by user and by action
    (each chosen from what the log holds)."""
    args = flask.request.args
    before = query_id("before")
    if before is None and args.get("before"):
        flask.abort(400, description="This page's link is not one the audit log made; start "
                                     "from the first page.")
    user, action = args.get("user", ""), args.get("action", "")
    found = store()
    entries = found.audit_entries(AUDIT_PAGE, before,
                                  user_name=user or None, action=action or None)
    older = entries[-1].id if len(entries) == AUDIT_PAGE else None
    users, actions = found.audit_names()
    kept = {name: value for name, value in (("user", user), ("action", action)) if value}
    return render("audit.html", entries=entries, older=older, users=users,
                  actions=actions, chosen={"user": user, "action": action}, kept=kept,
                  days=state().services.settings.console_audit_days)
