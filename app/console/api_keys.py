"""The API keys page (D35 over D12, D21): every key with its name, plan, scope, quotas, last
use, expiry and ban; making one, rotating one with a grace, revoking one, lifting a ban.

Each action is the core's rule (app.core.keys), the CLI's: a new secret is shown once, on
the answer to the form that made it (never in a URL, never cached: Cache-Control:
no-store), with a copy button of the console's own script; the store keeps its digest
only. Those forms are applied once for the key each carries (blueprint.once): sent again
(a double click, a reload of the answer), they make no second key and no second rotation,
but give the key a new secret in place of the one the earlier answer showed, and say so.
Making and rotating a key ask for the user's password again (ASVS 3.7.1), counted by the
sign-in throttle when wrong (app.console.checks, D36). The audit log names the key by its
id and prefix, never its secret. Running workers see a revocation or a lifted ban within
PETSTORE_KEY_CACHE_SECONDS, as after the CLI's.
"""

from __future__ import annotations

import re
import time
from typing import Any

import flask

from app.console import checks
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
    state,
    store,
    visitor,
)
from app.core import keys
from app.core.orders import utc_now
from app.core.quotas.plans import plan_of
from app.core.storage.console_statements import ConsoleUser
from app.core.storage.records import PLANS, SCOPES, ApiKey
from app.core.users import accounts

GRACE_DEFAULT = "24h"
SECRET_HEADERS = {"Cache-Control": "no-store"}  # a page with a secret is never kept


def _user() -> ConsoleUser:
    _, user = visitor()
    assert user is not None
    return user


def _record(action: str, detail: str) -> None:
    accounts.record(store(), _user().name, address(), action, detail)


def row_of(key: ApiKey, now: str) -> dict[str, Any]:
    """A key as its row shows it: its quotas from its plan (or its own, enterprise; the
    service starts only with numbers for every other plan, D11)."""
    return {"key": key, "state": keys.state_of(key, now), "quotas": plan_of(key, state().plans),
            "banned": keys.banned(key, now),
            # Last used to the minute (D21), as the key's row keeps it.
            "last_used": f"{key.last_used_at[:16]}Z" if key.last_used_at else None}


def _notice() -> tuple[str, str] | None:
    """What the last action did, from the redirect's parameters (known words only)."""
    key_id = query_id("key")
    if key_id is None:
        return None
    seconds = state().services.settings.key_cache_seconds
    return notice({"revoked": f"Key {key_id} is revoked: the API refuses its secret within "
                              f"{seconds:g} {'second' if seconds == 1 else 'seconds'}.",
                   "unbanned": f"Key {key_id} is not banned."})


def _list(status: int = 200, error: str | None = None,
          form: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Page:
    now = utc_now()
    rows = [row_of(key, now) for key in store().list_keys()]
    return render("keys.html", status, headers, rows=rows, plans=PLANS, scopes=SCOPES,
                  form=form or {"plan": "free", "scope": "write"}, grace=GRACE_DEFAULT,
                  error=error, notice=_notice())


@console.route("/keys")
@needs(OWNER)
def keys_page() -> Page:
    """Every key, and the form that makes one."""
    return _list()


def _number(text: str, label: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    if not re.fullmatch(r"[0-9]{1,12}", text) or int(text) < 1:
        raise keys.InvalidKeyValue(f"{label} must be a whole number, 1 or more")
    return int(text)


@console.route("/keys", methods=["POST"])
@needs(OWNER)
def create_key() -> Page:
    """Make a key and show its secret, once."""
    form = flask.request.form
    kept = {name: form.get(name, "") for name in (
        "name", "plan", "scope", "perMinute", "perDay", "expiresIn", "grace")}
    refused = checks.reauthenticate(_user(), "create key")
    if refused is not None:
        return _list(refused.status, refused.message, kept, refused.headers)
    with once(form, flask.url_for("console.keys_page")) as sending:
        if sending.before is not None:
            return _renewed(sending.before, "created")
        try:
            name = form.get("name", "").strip()
            expires_in = form.get("expiresIn", "").strip()
            expires = keys.expiry(expires_in, None, time.time()) if expires_in else None
            secret, key = keys.create(
                store(), plan=form.get("plan", ""), name=name,
                per_minute=_number(form.get("perMinute", ""), "Requests a minute"),
                per_day=_number(form.get("perDay", ""), "Requests a day"),
                scope=form.get("scope", ""), expires_at=expires)
        except keys.InvalidKeyValue as exc:
            _record("create key refused", exc.message)
            return _list(400, _sentence(exc.message), kept)
        sending.made = key.id
    _record("key created", f"key {key.id} ({key.prefix}...), plan {key.plan}, scope "
                           f"{key.scope}: {key.name}")
    return render("key_secret.html", 200, SECRET_HEADERS, key=key, secret=secret,
                  made="created")


def _renewed(number: int, made: str) -> Page:
    """A form that made (made: "created") or rotated key number, sent again: a new secret in
    place of the one its earlier answer showed (keys.renew), shown once as that one was."""
    try:
        secret, key = keys.renew(store(), number)
    except keys.KeyNotFound as exc:
        flask.abort(404, description=exc.message)
    except keys.KeyRevoked as exc:
        _record("renew key secret refused", f"key {number}: revoked")
        return _list(409, exc.message)
    _record("key secret renewed", f"key {key.id} ({key.prefix}...): its form was sent again")
    return render("key_secret.html", 200, SECRET_HEADERS, key=key, secret=secret, made=made,
                  again=True)


def _sentence(message: str) -> str:
    """A core message as a sentence: a capital first, a full stop last."""
    text = message[:1].upper() + message[1:]
    return text if text.endswith(".") else f"{text}."


@console.route("/keys/<key_id>/rotate", methods=["POST"])
@needs(OWNER)
def rotate_key(key_id: str) -> Page:
    """Give the key a new secret, shown once; the old one works through the grace."""
    number = path_id(key_id)
    refused = checks.reauthenticate(_user(), f"rotate key {number}")
    if refused is not None:
        return _list(refused.status, refused.message, headers=refused.headers)
    form = flask.request.form
    with once(form, flask.url_for("console.keys_page")) as sending:
        if sending.before is not None:
            return _renewed(sending.before, "rotated")
        try:
            grace = keys.parse_duration(form.get("grace", "") or GRACE_DEFAULT)
            secret, key = keys.rotate(store(), number, grace, time.time())
        except keys.InvalidKeyValue as exc:
            return _list(400, _sentence(exc.message))
        except keys.KeyNotFound as exc:
            flask.abort(404, description=exc.message)
        except keys.KeyRevoked as exc:
            _record("rotate key refused", f"key {number}: revoked")
            return _list(409, exc.message)
        sending.made = key.id
    _record("key rotated", f"key {key.id} ({key.prefix}...), old secret until "
                           f"{key.previous_until}")
    return render("key_secret.html", 200, SECRET_HEADERS, key=key, secret=secret,
                  made="rotated")


@console.route("/keys/<key_id>/revoke", methods=["POST"])
@needs(OWNER)
def revoke_key(key_id: str) -> Page:
    """Revoke the key (again: nothing changes)."""
    number = path_id(key_id)
    key = store().revoke_key(number, utc_now())
    if key is None:
        flask.abort(404, description=keys.KeyNotFound(number).message)
    _record("key revoked", f"key {key.id} ({key.prefix}...)")
    return flask.redirect(flask.url_for("console.keys_page", done="revoked", key=number), 303)


@console.route("/keys/<key_id>/unban", methods=["POST"])
@needs(OWNER)
def unban_key(key_id: str) -> Page:
    """Lift the key's ban."""
    number = path_id(key_id)
    key = store().unban_key(number)
    if key is None:
        flask.abort(404, description=keys.KeyNotFound(number).message)
    _record("key unbanned", f"key {key.id} ({key.prefix}...)")
    return flask.redirect(flask.url_for("console.keys_page", done="unbanned", key=number), 303)
