"""Confirmation before an act that cannot be undone (docs/console.md, "Before an act that
cannot be undone"): cancelling an order, revoking an API key, withdrawing a pet, deleting
a webhook endpoint, disabling a user (which ends their sessions at once: "Users and
roles"). The button on the board, the keys page, the pet's page, the endpoint's page or
the users page is a link to a page (GET, which
changes nothing) that says what will happen and holds the real form; that form posts to
the action's own URL, which is as it was (the API's rules, the version, the token). No
script is needed, and none is inline (the Content-Security-Policy stays as it is).

Each page shows the thing as it is now. An order that changed since the board showed it
goes back to the board, which says so, as its action would (D25); a key revoked already,
a pet withdrawn already, a user disabled already or oneself (D38) is said so, with no
form; an endpoint deleted already is no page (404), as its other pages are."""

from __future__ import annotations

from typing import Any

import flask
from markupsafe import Markup

from app.console import users
from app.console.blueprint import (
    OWNER,
    STAFF,
    Page,
    console,
    int64_of,
    needs,
    path_id,
    render,
    state,
    store,
    visitor,
)
from app.console.board import back_url
from app.console.hooks import row_of
from app.console.times import moment
from app.core import pets, webhooks
from app.core.errors import OrderNotFound, PetNotFound, WebhookEndpointNotFound
from app.core.keys import KeyNotFound


def _page(title: str, facts: list[tuple[str, Any]], effect: str, action: str | None,
          button: str, back: str, keep: str, fields: dict[str, Any] | None = None,
          refused: str | None = None) -> Page:
    """The confirmation page: what it is, what will happen, and the form that does it
    (none where refused says why it cannot be done)."""
    return render("confirm.html", title=title, facts=facts, effect=effect, action=action,
                  button=button, back=back, keep=keep, fields=fields or {},
                  refused=refused)


@console.route("/orders/<order_id>/cancel", methods=["GET"])
@needs(STAFF)
def confirm_cancel(order_id: str) -> Page:
    """Cancel an order? At the version the board's row (or the order's page) showed
    (its link carries it, and to=order when it came from the order's page)."""
    number = path_id(order_id)
    found = store().get_versioned_order(number)
    if found is None:
        flask.abort(404, description=OrderNotFound(number).message)
    order, now = found
    args = flask.request.args
    shown = int64_of(args.get("version", ""), 0)
    version = now if shown is None else shown
    back = args.get("back", "")
    if version != now:  # changed since the page showed it: that page says so
        return flask.redirect(back_url(args, number, refused="changed", order=number), 303)
    refused = (None if order["status"] == "pending" else
               f"Order {number} is {order['status']}: only a pending order can be cancelled.")
    pet = order.get("petId")
    name = store().pet_names([pet]).get(pet) if pet is not None else None
    return _page(
        f"Cancel order {number}?",
        [("Pet", f"{pet} · {name}" if name else pet if pet is not None else "-"),
         ("Quantity", order.get("quantity", "-")), ("Status", order["status"]),
         ("Ship date", moment(order.get("shipDate")) or "-")],
        "The order is cancelled for good: it cannot be shipped afterwards, the units it held "
        "are free again (where the pet's stock is kept), and the API's clients and webhooks "
        "are told.",
        flask.url_for("console.act", order_id=number, action="cancel"), "Cancel the order",
        back_url(args, number), "Keep the order",
        {"version": version, "back": back, **({"to": "order"} if args.get("to") == "order"
                                              else {})}, refused)


@console.route("/keys/<key_id>/revoke", methods=["GET"])
@needs(OWNER)
def confirm_revoke(key_id: str) -> Page:
    """Revoke an API key?"""
    number = path_id(key_id)
    key = store().get_key(number)
    if key is None:
        flask.abort(404, description=KeyNotFound(number).message)
    seconds = state().services.settings.key_cache_seconds
    return _page(
        f"Revoke key {number}?",
        [("Name", key.name or "-"), ("Prefix", Markup("<code>{}…</code>").format(key.prefix)),
         ("Plan", key.plan), ("Scope", key.scope),
         ("Last used", moment(key.last_used_at and f"{key.last_used_at[:16]}Z") or "never")],
        f"Every request with its secret is refused (401) within {seconds:g} "
        f"{'second' if seconds == 1 else 'seconds'}, for good: a revoked key cannot be "
        "brought back. The clients that use it need a new key.",
        flask.url_for("console.revoke_key", key_id=number), "Revoke the key",
        flask.url_for("console.keys_page"), "Keep the key",
        refused=f"Key {number} is revoked already." if key.revoked_at else None)


@console.route("/pets/<pet_id>/withdraw", methods=["GET"])
@needs(STAFF)
def confirm_withdraw(pet_id: str) -> Page:
    """Withdraw a pet from the catalogue?"""
    number = path_id(pet_id)
    try:
        pet, _ = pets.get_versioned(store(), number)
    except PetNotFound as exc:
        flask.abort(404, description=exc.message)
    return _page(
        f"Withdraw pet {number}?",
        [("Name", pet["name"]), ("Status", pet["status"]),
         ("Stock", pet.get("stock", "not tracked"))],
        "The pet leaves the catalogue: it takes no new order, and the API lists it as "
        "withdrawn. It stays in the store, since orders name it, and its pending orders can "
        "still ship or be cancelled. Its page here can restore it later.",
        flask.url_for("console.withdraw_pet", pet_id=number), "Withdraw the pet",
        flask.url_for("console.pet_page", pet_id=number), "Keep it in the catalogue",
        refused=f"Pet {number} is withdrawn already." if pet["status"] == "withdrawn"
        else None)


@console.route("/webhooks/<endpoint_id>/delete", methods=["GET"])
@needs(OWNER)
def confirm_delete_webhook(endpoint_id: str) -> Page:
    """Delete a webhook endpoint?"""
    number = path_id(endpoint_id)
    try:
        endpoint = webhooks.find(store(), None, number)
    except WebhookEndpointNotFound as exc:
        flask.abort(404, description=exc.message)
    row = row_of(endpoint)
    waiting = f"{row['lag']:,}{'+' if row['lag_more'] else ''}"
    owner = (f"API key {endpoint.api_key_id}" if endpoint.api_key_id is not None
             else "the shop")
    return _page(
        f"Delete webhook endpoint {number}?",
        [("URL", endpoint.url), ("Description", endpoint.description or "-"),
         ("Types", ", ".join(endpoint.types) or "all"), ("Owner", owner),
         ("State", row["sentence"]), ("Not yet delivered",
          f"{waiting} {'order' if row['lag'] == 1 and not row['lag_more'] else 'orders'}")],
        "The endpoint is deleted for good, with its log of deliveries: nothing more is sent "
        "to it, what it has not had yet is never sent, and its secret signs nothing more."
        + (f" API key {endpoint.api_key_id}, which made it, no longer finds it."
           if endpoint.api_key_id is not None else "")
        + " To stop it for a while instead, disable it.",
        flask.url_for("console.delete_webhook", endpoint_id=number), "Delete the endpoint",
        flask.url_for("console.webhook_page", endpoint_id=number), "Keep the endpoint")


@console.route("/users/<user_id>/disable", methods=["GET"])
@needs(OWNER)
def confirm_disable(user_id: str) -> Page:
    """Disable a console user?"""
    found = users.find(user_id)
    _, owner = visitor()
    assert owner is not None
    # The last enabled owner is the one disabling, here: oneself (the act's own rule, the
    # core's, holds the last owner for the CLI and for two owners at once).
    refused = (f"{found.name} is disabled already." if not found.active else
               "You cannot disable your own account: another owner can."
               if found.id == owner.id else None)
    return _page(
        f"Disable {found.name}?",
        [("Name", found.name), ("Role", found.role),
         ("Second factor", "set up" if found.totp_secret else "none"),
         ("Last signed in", moment(found.last_sign_in_at) or "never")],
        f"{found.name} can no longer sign in, and every session of theirs ends at once, on "
        "every worker and host. Their name and what they did stay in the audit log; an "
        "owner can enable them again.",
        flask.url_for("console.disable_user", user_id=found.id), f"Disable {found.name}",
        flask.url_for("console.users_page"), "Keep them", refused=refused)
