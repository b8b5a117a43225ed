"""Times as the console's pages show them (docs/console.md, "Times"): each a <time> element
with the UTC moment in its datetime attribute and its title (shown on hover), and as its
text a UTC time a person reads ("2026-11-28 09:41 UTC"); the console's own script
(static/times.js) writes the text again in the browser's time zone. Without script the UTC
time stays, and says that it is UTC."""

from __future__ import annotations

import datetime as dt
import re

from markupsafe import Markup, escape

from app.console.blueprint import console


def _parsed(value: str | float) -> dt.datetime | None:
    """A moment from the store's text (RFC 3339, as format_time writes it) or a Unix time;
    None for anything else."""
    try:
        if isinstance(value, (int, float)):
            return dt.datetime.fromtimestamp(value, dt.UTC)
        moment = dt.datetime.fromisoformat(value)
    except (ValueError, OverflowError, OSError):
        return None
    return (moment.replace(tzinfo=dt.UTC) if moment.tzinfo is None
            else moment.astimezone(dt.UTC))


@console.app_template_filter("moment")
def moment(value: object) -> Markup:
    """A moment as a page shows it: <time datetime="...Z" title="... UTC">... UTC</time>;
    text it cannot read as a moment, as it is (escaped)."""
    if not value:  # none (an order not shipped: undefined in its row, or None)
        return Markup("")
    found = _parsed(value) if isinstance(value, (str, int, float)) else None
    if found is None:
        return escape(str(value))
    return Markup('<time datetime="{}" title="{}">{}</time>').format(
        found.isoformat(timespec="seconds").replace("+00:00", "Z"),
        found.strftime("%Y-%m-%d %H:%M:%S UTC"), found.strftime("%Y-%m-%d %H:%M UTC"))


# A moment as the store and the core write one inside a sentence ("banned until ...").
WRITTEN = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:\d\d)")


@console.app_template_filter("moments")
def moments(text: object) -> Markup:
    """Text (escaped) with each moment written in it shown as moment() shows one."""
    written = str(text)
    shown, last = Markup(""), 0
    for found in WRITTEN.finditer(written):
        shown += escape(written[last:found.start()]) + moment(found.group())
        last = found.end()
    return shown + escape(written[last:])
