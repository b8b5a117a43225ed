"""The webhooks pages (D35 over D28): every endpoint of every key with its state (enabled,
failing with its next attempt, disabled with its reason) and its lag; adding one (its
secret shown once) and editing it; an endpoint's deliveries, newest first, each attempt's
status, time taken, error and the start of the answer; sending a test; enabling,
disabling; rotating its secret; replaying from a time or from a feed cursor; deleting it
(after its confirmation page, confirm.py).

Each action is the core's rule (app.core.webhooks), the API's and the CLI's, as the
operator carries it out (the operator sees every endpoint): a URL, a type or a description
the API refuses (its scheme, an address that is not public, D28; its length; D37's text)
is refused here by the same call, and shown on the form that was sent, kept as it was
typed, with nothing changed. An endpoint added here is the shop's own, as `petstore
webhooks add` makes one: no API key owns it (docs/console.md, "Webhooks"). The test
message is the outbound wing's send_test, as theirs. Every text a key's owner or a
receiver wrote (a URL, a description, an answer's first KiB) is shown as text. Every
action, and every refusal, goes to the audit log, which names an endpoint by its id and
its URL's host: never its secret, nor the rest of its URL (a receiver's URL may carry a
token of its own).
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
    query_id,
    render,
    see_other,
    state,
    store,
    visitor,
)
from app.core import webhook_urls, webhooks
from app.core.errors import (
    InvalidParameter,
    PetstoreError,
    ResyncRequired,
    WebhookEndpointLimitReached,
    WebhookEndpointNotFound,
    WebhookUrlNotAllowed,
)
from app.core.orders import format_time
from app.core.storage.records import WebhookEndpoint
from app.core.users import accounts
from app.outbound import send_test

DELIVERIES_PAGE = 50
SECRET_HEADERS = {"Cache-Control": "no-store"}  # a page with a secret is never kept
SHOWN_OF_ANSWER = 200  # characters of an answer a row shows; the rest on asking
# The fields as the forms label them, for the core's sentences (InvalidParameter.name).
LABELS = {"url": "The URL", "types": "The types", "description": "The description"}
# The core's refusals of what a form asks, shown on that form (400): anything else is a
# 404 (an endpoint gone) or a failure.
REFUSALS = (InvalidParameter, WebhookUrlNotAllowed, WebhookEndpointLimitReached)


def _record(action: str, detail: str) -> None:
    _, user = visitor()
    assert user is not None
    accounts.record(store(), user.name, address(), action, detail)


def _allowed() -> tuple[webhook_urls.Network, ...]:
    return webhook_urls.networks(state().services.settings.webhook_allowed_networks)


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


def _sentence(exc: PetstoreError) -> str:
    """A refusal of the core, as a sentence for a person, the field as the form labels it."""
    if isinstance(exc, InvalidParameter):
        return f"{LABELS.get(exc.name, exc.name)} {exc.message}"
    return exc.message


def _sent(form: Any) -> dict[str, Any]:
    """What an endpoint's form sent: its URL and description (without the spaces a paste
    brings around them) and the types ticked (none: every type), as typed, for the core to
    judge and for the form to show again."""
    return {"url": form.get("url", "").strip(), "types": form.getlist("types"),
            "description": form.get("description", "").strip()}


def _fields(endpoint: WebhookEndpoint) -> dict[str, Any]:
    """An endpoint as its edit form shows it."""
    return {"url": endpoint.url, "types": list(endpoint.types),
            "description": endpoint.description}


def _host(endpoint: WebhookEndpoint) -> str:
    """The host of an endpoint's URL: what the audit log names of it (a URL stored before
    the rules it breaks, by an earlier version or a hand edit, is named as such)."""
    try:
        return webhook_urls.check_url(endpoint.url).host
    except InvalidParameter:
        return "a URL the rules refuse now"


def _form_context() -> dict[str, Any]:
    """What an endpoint's fields need (webhook_fields.html)."""
    return {"types": webhooks.TYPES, "url_max": webhook_urls.URL_MAX,
            "description_max": webhooks.DESCRIPTION_MAX}


def _list_notice() -> tuple[str, str] | None:
    """What the last action on the list did (known words only)."""
    number = query_id("webhook")
    if number is None:
        return None
    return notice({"deleted": f"Endpoint {number} is deleted: nothing more is sent to it, "
                              "and its deliveries are forgotten."})


def _list(status: int = 200, error: str | None = None,
          form: dict[str, Any] | None = None) -> Page:
    rows = [row_of(endpoint) for endpoint in webhooks.endpoints(store(), None)]
    return render("webhooks.html", status, rows=rows, error=error, notice=_list_notice(),
                  fields=form or {"url": "", "types": [], "description": ""},
                  **_form_context())


@console.route("/webhooks")
@needs(OWNER)
def webhooks_page() -> Page:
    """Every endpoint of every key, with its state and lag, and the form that adds one."""
    return _list()


@console.route("/webhooks", methods=["POST"])
@needs(OWNER)
def create_webhook() -> Page:
    """Add the endpoint the form describes, the shop's own (no API key), and show its
    secret, once: applied once for the form's key (blueprint.once), as a key's."""
    form = flask.request.form
    sent = _sent(form)
    with once(form, flask.url_for("console.webhooks_page")) as sending:
        if sending.before is not None:  # the form sent again: see blueprint.once
            try:
                endpoint, secret = webhooks.renew_secret(store(), None, sending.before)
            except WebhookEndpointNotFound as exc:  # deleted since its first sending
                flask.abort(404, description=exc.message)
            _record("webhook secret renewed",
                    f"endpoint {endpoint.id}: its form was sent again")
            return render("webhook_secret.html", 200, SECRET_HEADERS, endpoint=endpoint,
                          secret=secret, made="created", again=True)
        try:
            endpoint, secret = webhooks.create(store(), None, sent["url"], sent["types"],
                                               sent["description"], _allowed())
        except REFUSALS as exc:
            _record("add webhook refused", _sentence(exc))
            return _list(400, f"{_sentence(exc)} Nothing was added.", sent)
        sending.made = endpoint.id
    _record("webhook added", f"endpoint {endpoint.id} to {_host(endpoint)}, types "
                             f"{', '.join(endpoint.types) or 'all'}")
    return render("webhook_secret.html", 200, SECRET_HEADERS, endpoint=endpoint,
                  secret=secret, made="created")


def _notice() -> tuple[str, str] | None:
    """What the last action did, from the redirect's parameters (known words only)."""
    done = {"enabled": "The endpoint is enabled: it goes on from where it stopped.",
            "disabled": "The endpoint is disabled: nothing is sent until it is enabled.",
            "replayed": "The endpoint goes on from the point asked: those changes are sent "
                        "again, each order as it is now.",
            "nothing": "No message was sent to this endpoint since then; nothing changed.",
            "edited": "The endpoint is saved: what it is sent from now on follows it.",
            "unchanged": "The form was as the endpoint is; nothing changed.",
            "test-delivered": "The test message was delivered."}
    refused = {"test-failed": "The test message was not delivered: its row below says why."}
    return notice(done, refused)


def _endpoint_view(number: int, status: int = 200, error: str | None = None,
                   fields: dict[str, Any] | None = None) -> Page:
    """An endpoint's page; after a refused edit, its form as it was sent (fields)."""
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
                  shown_of_answer=SHOWN_OF_ANSWER,
                  fields=fields if fields is not None else _fields(endpoint),
                  **_form_context())


@console.route("/webhooks/<endpoint_id>")
@needs(OWNER)
def webhook_page(endpoint_id: str) -> Page:
    """An endpoint, its actions and its deliveries, newest first."""
    return _endpoint_view(path_id(endpoint_id))


def _done(number: int, **word: str) -> Page:
    """Back to the endpoint's page, saying what was done (done=...) or refused."""
    return see_other("console.webhook_page", endpoint_id=number, **word)


@console.route("/webhooks/<endpoint_id>/edit", methods=["POST"])
@needs(OWNER)
def edit_webhook(endpoint_id: str) -> Page:
    """Save the endpoint's URL, types and description. Its URL is checked again only when
    it changed (an endpoint a key made stays editable if the allowed networks changed
    since)."""
    number = path_id(endpoint_id)
    before = _find(number)
    sent = _sent(flask.request.form)
    changes = {"types": sent["types"], "description": sent["description"]}
    if sent["url"] != before.url:
        changes["url"] = sent["url"]
    try:
        after = webhooks.update(store(), None, number, changes, _allowed())
    except WebhookEndpointNotFound as exc:  # deleted meanwhile
        flask.abort(404, description=exc.message)
    except REFUSALS as exc:
        _record("edit webhook refused", f"endpoint {number}: {_sentence(exc)}")
        return _endpoint_view(number, 400, f"{_sentence(exc)} Nothing was saved.", sent)
    changed = [name for name in ("url", "types", "description")
               if getattr(after, name) != getattr(before, name)]
    if not changed:
        return _done(number, done="unchanged")
    _record("webhook edited", f"endpoint {number} to {_host(after)}: "
                              f"{', '.join(changed)} changed")
    return _done(number, done="edited")


@console.route("/webhooks/<endpoint_id>/delete", methods=["POST"])
@needs(OWNER)
def delete_webhook(endpoint_id: str) -> Page:
    """Delete the endpoint and its log of attempts (its confirmation page is confirm.py's
    GET of this path)."""
    number = path_id(endpoint_id)
    try:
        webhooks.delete(store(), None, number)
    except WebhookEndpointNotFound as exc:  # deleted already, or never was
        flask.abort(404, description=exc.message)
    _record("webhook deleted", f"endpoint {number}")
    return see_other("console.webhooks_page", done="deleted", webhook=number)


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
                  secret=secret, made="rotated", until=endpoint.previous_until,
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
