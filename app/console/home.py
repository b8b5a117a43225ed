"""The console's home page and its audit log (D35)."""

from __future__ import annotations

import datetime as dt

import flask

from app.console.blueprint import (
    OWNER,
    STAFF,
    Page,
    address,
    console,
    needs,
    notice,
    query_id,
    render,
    see_other,
    state,
    store,
    visitor,
)
from app.console.chart import bars
from app.core import figures, pets
from app.core.errors import InvalidParameter
from app.core.users import accounts


def _home(status: int = 200, error: str | None = None, written: str | None = None) -> Page:
    """The home page: today's figures, the inventory, the last 30 UTC days' orders placed
    and units shipped as two charts (with their table), and the pets running out."""
    today = dt.datetime.now(dt.UTC).date()
    found = store()
    summary = found.order_summary(f"{today.isoformat()}T00:00:00Z",
                                  f"{(today + dt.timedelta(days=1)).isoformat()}T00:00:00Z")
    days = figures.last_days(found, today)
    running_out = figures.low_stock(found)
    return render("home.html", status, summary=summary, today=today.isoformat(),
                  inventory=pets.inventory(found), days=days,
                  placed=bars([(day.day, day.placed) for day in days]),
                  shipped=bars([(day.day, day.shipped) for day in days]),
                  low=running_out, error=error,
                  threshold=running_out.at if written is None else written,
                  notice=notice({"threshold": "The low-stock threshold is saved."}))


@console.route("/")
@needs(STAFF)
def home() -> Page:
    """What a shop owner looks at first: the orders waiting, the units they hold, what
    shipped today (UTC), and the inventory (D34), as the store keeps them; the last 30
    days' orders and shipments, and the pets running out (docs/console.md)."""
    return _home()


@console.route("/low-stock", methods=["POST"])
@needs(OWNER)
def set_low_stock() -> Page:
    """Keep the owner's low-stock threshold; a refusal is the home page again (400) with
    what was wrong and what was sent. Either is audited."""
    written = flask.request.form.get("threshold", "")
    _, user = visitor()
    name = user.name if user is not None else None
    try:
        units = figures.set_low_stock_at(store(), written)
    except InvalidParameter as exc:
        sentence = f"The low-stock threshold {exc.message}"
        accounts.record(store(), name, address(), "low-stock threshold refused", sentence)
        return _home(400, sentence, written)
    accounts.record(store(), name, address(), "low-stock threshold set", f"{units} units")
    return see_other("console.home", done="threshold")


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
