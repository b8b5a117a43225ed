"""The webhooks pages (D35 over D28): every endpoint of every key with its state (enabled,
failing with its next attempt, disabled with its reason) and its lag; an endpoint's
deliveries, newest first, each attempt's status, time taken, error and the start of the
answer; sending a test; enabling, disabling; rotating its secret; replaying from a time or
from a feed cursor.

Each action is the core's rule (app.core.webhooks), the API's and the CLI's, as the
operator carries it out (the operator sees every endpoint); the test message is the
outbound wing's send_test, as theirs. Every text a key's owner or a receiver wrote (a URL,
a description, an answer's first KiB) is shown as text. Every action goes to the audit
log.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import flask
from markupsafe import Markup

from app.console import times
from app.console.blueprint import (
    OWNER,
    Page,
    address,
    console,
    needs,
    notice,
    once,
    path_id,
    render,
    see_other,
    state,
    store,
    visitor,
)
from app.core import webhooks
from app.core.errors import InvalidParameter, PetstoreError, ResyncRequired
from app.core.orders import format_time
from app.core.storage.records import WebhookEndpoint
from app.core.users import accounts
from app.outbound import send_test

DELIVERIES_PAGE = 50
SECRET_HEADERS = {"Cache-Control": "no-store"}  # a page with a secret is never kept
SHOWN_OF_ANSWER = 200  # characters of an answer a row shows; the rest on asking


def _record(action: str, detail: str) -> None:
    _, user = visitor()
    assert user is not None
    accounts.record(store(), user.name, address(), action, detail)


def _allowed() -> tuple[webhooks.Network, ...]:
    return webhooks.networks(state().services.settings.webhook_allowed_networks)


def state_of(endpoint: WebhookEndpoint) -> tuple[str, Markup]:
    """The endpoint's state, as a word and a sentence: enabled; failing, with its next
    attempt (a <time>, times.py); disabled, with its reason (as text)."""
    if not endpoint.enabled:
        return "disabled", Markup("Disabled: {}.").format(
            endpoint.disabled_reason or "no reason kept")
    if endpoint.attempt:
        tries = "attempt" if endpoint.attempt == 1 else "attempts"
        return "failing", Markup("Failing: {} failed {} of one message; next attempt {}.").format(
            endpoint.attempt, tries, Markup("at ") + times.moment(endpoint.next_attempt_at)
            if endpoint.next_attempt_at is not None else "once due")
    return "enabled", Markup("Enabled.")


def row_of(endpoint: WebhookEndpoint) -> dict[str, Any]:
    word, sentence = state_of(endpoint)
    lag = webhooks.lag(store(), endpoint)
    return {"endpoint": endpoint, "state": word, "sentence": sentence, "lag": lag,
            "lag_more": lag >= webhooks.LAG_COUNTED}


def _find(number: int) -> WebhookEndpoint:
    try:
        return webhooks.find(store(), None, number)
    except PetstoreError as exc:
        flask.abort(404, description=exc.message)


@console.route("/webhooks")
@needs(OWNER)
def webhooks_page() -> Page:
    """Every endpoint of every key, with its state and lag."""
    rows = [row_of(endpoint) for endpoint in webhooks.endpoints(store(), None)]
    return render("webhooks.html", rows=rows)


def _notice() -> tuple[str, str] | None:
    """What the last action did, from the redirect's parameters (known words only)."""
    done = {"enabled": "The endpoint is enabled: it goes on from where it stopped.",
            "disabled": "The endpoint is disabled: nothing is sent until it is enabled.",
            "replayed": "The endpoint goes on from the point asked: those changes are sent "
                        "again, each order as it is now.",
            "nothing": "No message was sent to this endpoint since then; nothing changed.",
            "test-delivered": "The test message was delivered."}
    refused = {"test-failed": "The test message was not delivered: its row below says why."}
    return notice(done, refused)


def _endpoint_view(number: int, status: int = 200, error: str | None = None) -> Page:
    endpoint = _find(number)
    cursor = flask.request.args.get("cursor") or None
    try:
        attempts, following = webhooks.deliveries(store(), None, number, cursor,
                                                  DELIVERIES_PAGE)
    except InvalidParameter:
        flask.abort(400, description="This page's link is not one the console made; start "
                                     "from the first page.")
    return render("webhook.html", status, row=row_of(endpoint), attempts=attempts,
                  next=following, first_page=cursor is None, notice=_notice(),
                  error=error, grace=webhooks.GRACE_DEFAULT // 3600,
                  shown_of_answer=SHOWN_OF_ANSWER)


@console.route("/webhooks/<endpoint_id>")
@needs(OWNER)
def webhook_page(endpoint_id: str) -> Page:
    """An endpoint, its actions and its deliveries, newest first."""
    return _endpoint_view(path_id(endpoint_id))


def _done(number: int, **word: str) -> Page:
    """Back to the endpoint's page, saying what was done (done=...) or refused."""
    return see_other("console.webhook_page", endpoint_id=number, **word)


@console.route("/webhooks/<endpoint_id>/test", methods=["POST"])
@needs(OWNER)
def test_webhook(endpoint_id: str) -> Page:
    """Send a signed ping now; its attempt joins the deliveries."""
    number = path_id(endpoint_id)
    endpoint = _find(number)
    msg_id, outcome = send_test(store(), endpoint, state().services.settings.webhook_timeout,
                                _allowed())
    _record("webhook test sent", f"endpoint {number}, {msg_id}: " + (
        "delivered" if outcome.delivered else outcome.failure()))
    if outcome.delivered:
        return _done(number, done="test-delivered")
    return _done(number, refused="test-failed")


@console.route("/webhooks/<endpoint_id>/<action>", methods=["POST"])
@needs(OWNER)
def switch_webhook(endpoint_id: str, action: str) -> Page:
    """Enable (from where it stopped: nothing skipped) or disable the endpoint."""
    if action not in ("enable", "disable"):
        flask.abort(404)
    number = path_id(endpoint_id)
    try:
        webhooks.update(store(), None, number, {"enabled": action == "enable"},
                        _allowed())
    except PetstoreError as exc:
        flask.abort(404, description=exc.message)
    _record(f"webhook {action}d", f"endpoint {number}")
    return _done(number, done=f"{action}d")


GRACE_HOURS_MAX = webhooks.GRACE_MAX // 3600


@console.route("/webhooks/<endpoint_id>/rotate", methods=["POST"])
@needs(OWNER)
def rotate_webhook(endpoint_id: str) -> Page:
    """Give the endpoint a new secret, shown once; the old one signs beside it through the
    grace."""
    number = path_id(endpoint_id)
    hours = flask.request.form.get("graceHours", "").strip()
    if not re.fullmatch(r"[0-9]{1,4}", hours) or int(hours) > GRACE_HOURS_MAX:
        return _endpoint_view(number, 400, f"The grace is a whole number of hours, 0 to "
                                           f"{GRACE_HOURS_MAX}; nothing changed.")
    with once(flask.request.form,
              flask.url_for("console.webhook_page", endpoint_id=number)) as sending:
        try:
            if sending.before is not None:  # the form sent again: see blueprint.once
                endpoint, secret = webhooks.renew_secret(store(), None, sending.before)
            else:
                endpoint, secret = webhooks.rotate(store(), None, number, int(hours) * 3600)
        except PetstoreError as exc:
            flask.abort(404, description=exc.message)
        sending.made = endpoint.id
    if sending.before is not None:
        _record("webhook secret renewed", f"endpoint {endpoint.id}: its form was sent again")
    else:
        _record("webhook secret rotated", f"endpoint {number}, old secret for {hours} h")
    return render("webhook_secret.html", 200, SECRET_HEADERS, endpoint=endpoint,
                  secret=secret, until=endpoint.previous_until,
                  again=sending.before is not None)


def _since(text: str) -> str:
    """A time of the replay form (the browser's datetime-local, taken as UTC) as stored."""
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidParameter("since", "date_time_range") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return format_time(moment.astimezone(dt.UTC))


@console.route("/webhooks/<endpoint_id>/replay", methods=["POST"])
@needs(OWNER)
def replay_webhook(endpoint_id: str) -> Page:
    """Deliver again from a time (every message attempted since, and what followed) or
    from a feed cursor (every change after it); the endpoint's retry state is cleared."""
    number = path_id(endpoint_id)
    _find(number)
    form = flask.request.form
    since, after = form.get("since", "").strip(), form.get("after", "").strip()
    if bool(since) == bool(after):
        return _endpoint_view(number, 400, "Give a time, or a point in the change feed, to "
                                           "replay from (one of them); nothing changed.")
    try:
        if since:
            moment = _since(since)
            replayed = webhooks.replay_since(store(), None, number, moment)
            detail = f"endpoint {number}, from {moment}"
        else:
            replayed = webhooks.replay(store(), None, number, after)
            detail = f"endpoint {number}, after a feed cursor"
    except InvalidParameter:
        what = "time (YYYY-MM-DDTHH:MM, UTC)" if since else "feed cursor of this database"
        return _endpoint_view(number, 400, f"That is not a {what}; nothing changed.")
    except ResyncRequired:
        return _endpoint_view(number, 409, "That feed cursor is of another database, or of "
                                           "before a restore; nothing changed.")
    if replayed is None:
        return _done(number, done="nothing")
    _record("webhook replayed", detail)
    return _done(number, done="replayed")
