"""Users and roles (D38), as owners and staff see the console: every route declares who may
open it (the URL map is walked), staff are refused every owner's page with a 403 page that
says why and changes nothing, and the menu offers each role only what it may open; owners
list, add (the one-time password shown once), disable (after a confirmation page) and
enable users, and reset another's second factor after their own password, never disabling
themselves; each act and refusal is in the audit log."""

from __future__ import annotations

import html
import re
from typing import Any

import pyotp
import pytest

from app.console.blueprint import OWNER, PUBLIC, STAFF, access_of
from app.core import keys, webhook_urls, webhooks
from app.core.errors import SignInFailed, UserRefused
from app.core.storage import Store
from app.core.users import accounts, sessions
from app.web import PetstoreApp
from tests.console.conftest import GOOD, Visitor, cell, form_key, row

STAFF_PASSWORD = "plum ferry lantern 7 quietly"
ROLE_REFUSED = "This page is for the shop&#39;s owners"
FORM = re.compile(r'<form class="action confirm" id="confirm" method="post" '
                  r'action="([^"]+)">', re.S)
OWNER_MENU = ["API keys", "Webhooks", "Users", "Audit log"]
STAFF_MENU = ["Home", "Orders", "Pets", "Password", "Second factor"]


def _user(store: Store, name: str, role: str, password: str = STAFF_PASSWORD) -> int:
    """A user of the role, who has chosen the password; its id."""
    made, one_time = accounts.add(store, name, role)
    accounts.change_password(store, made, one_time, password, None)
    return made.id


@pytest.fixture
def staff(app: PetstoreApp, store: Store, owner: str) -> Visitor:
    """A second browser, signed in as "sam", staff (the owner exists too)."""
    _user(store, "sam", accounts.STAFF)
    # Not entered as a context: the visitor fixture's client holds the app's (test_sessions).
    visitor = Visitor(app.test_client())
    visitor.follow(visitor.sign_in("sam", STAFF_PASSWORD))
    assert "Pending orders" in visitor.page
    return visitor


def _console_rules(app: PetstoreApp) -> list[Any]:
    return [rule for rule in app.console.url_map.iter_rules()
            if rule.endpoint.startswith("console.") and rule.endpoint != "console.static"]


def _url(rule: Any) -> str:
    """The rule's path, each of its parts an id (1)."""
    return re.sub(r"<[^>]+>", "1", rule.rule)


def _menu(page: str) -> list[str]:
    nav = page.split("<nav>", 1)[1].split("</nav>", 1)[0]
    return re.findall(r"<a [^>]*>([^<]+)</a>", nav)


def _state(store: Store) -> tuple[Any, ...]:
    """What an owner's page could change, and the audit log short of the refusals."""
    audit = [(entry.action, entry.detail) for entry in store.audit_entries(1000)
             if entry.action != "page refused"]
    # An endpoint's fields an owner sets (its lease and position are the deliverer's).
    endpoints = [(e.id, e.url, e.types, e.description, e.enabled, e.secret, e.previous_secret)
                 for e in webhooks.endpoints(store, None)]
    return store.list_console_users(), store.list_keys(), endpoints, audit


def test_every_console_route_declares_who_may_open_it(app: PetstoreApp) -> None:
    rules = _console_rules(app)
    undeclared = [rule.rule for rule in rules
                  if access_of(app.console.view_functions[rule.endpoint]) is None]
    assert not undeclared, f"routes of the console without a needs(...): {undeclared}"
    declared = {access_of(app.console.view_functions[rule.endpoint]).who  # type: ignore[union-attr]
                for rule in rules}
    assert declared == {PUBLIC, STAFF, OWNER}
    assert len(rules) >= 40  # the walk found the console's routes


def test_a_route_that_declares_nothing_opens_to_owners_only(staff: Visitor,
                                                            app: PetstoreApp) -> None:
    """The guard fails closed: a page added without a declaration is an owner's."""
    view = app.console.view_functions["console.users_page"]
    declared = view.console_access
    del view.console_access
    try:
        assert access_of(view) is None
        assert staff.get("/console/users").status_code == 403
    finally:
        view.console_access = declared


def test_staff_are_refused_every_owners_page_and_nothing_changes(
        staff: Visitor, app: PetstoreApp, store: Store) -> None:
    keys.create(store, plan="free", name="warehouse", per_minute=None, per_day=None)
    webhooks.create(store, None, "http://127.0.0.1:9/", None, "shop",
                    webhook_urls.networks("127.0.0.0/8"))
    sam = store.console_user("sam")
    assert sam is not None
    before = _state(store)
    refused = []
    for rule in _console_rules(app):
        if access_of(app.console.view_functions[rule.endpoint]).who != OWNER:  # type: ignore[union-attr]
            continue
        for method in sorted(rule.methods & {"GET", "POST"}):
            staff.get("/console/orders")  # a page of staff's, with its form token
            answer = (staff.get(_url(rule)) if method == "GET" else
                      staff.post(_url(rule), {"password": STAFF_PASSWORD, "name": "eve",
                                              "role": "owner", "key": "console-" + "k" * 32}))
            assert answer.status_code == 403, (method, rule.rule, answer.status_code)
            assert ROLE_REFUSED in answer.text and "<h1>Not allowed</h1>" in answer.text
            refused.append((method, rule.rule))
    assert {("GET", "/console/keys"), ("POST", "/console/keys"), ("GET", "/console/webhooks"),
            ("GET", "/console/users"), ("POST", "/console/users"), ("GET", "/console/audit"),
            ("POST", "/console/users/<user_id>/disable"),
            ("GET", "/console/keys/<key_id>/revoke")} <= set(refused)
    assert _state(store) == before
    lines = store.audit_entries(1000, user_name="sam", action="page refused")
    assert len(lines) == len(refused)
    assert "GET /console/keys: owners only" in {line.detail for line in lines}
    # Staff are still signed in: a refusal is not a sign-out.
    assert staff.get("/console/orders").status_code == 200


def test_a_refusal_is_audited_with_its_address_and_the_first_200_characters_of_its_path(
        staff: Visitor, store: Store) -> None:
    path = "/console/webhooks/" + "9" * 300  # an owner's page, of an id past any
    refused = staff.get(path)
    assert refused.status_code == 403 and ROLE_REFUSED in refused.text
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.address, entry.action, entry.detail) == (
        "sam", "testclient", "page refused", f"GET {path[:200]}: owners only")


def test_staff_open_the_orders_the_pets_and_their_own_account(staff: Visitor,
                                                              app: PetstoreApp) -> None:
    opened = []
    for rule in _console_rules(app):
        access = access_of(app.console.view_functions[rule.endpoint])
        if access is None or access.who != STAFF or "GET" not in rule.methods or (
                "<" in rule.rule) or sessions.OPEN not in access.stages:
            continue
        # The search box's answer needs what was typed, and sends on to the order's page.
        query, status = (("?id=1", 303) if rule.endpoint == "console.find_order"
                         else ("", 200))
        answer = staff.get(rule.rule + query)
        assert answer.status_code == status, (rule.rule, answer.status_code)
        opened.append(rule.rule)
    assert {"/console/", "/console/orders", "/console/pets", "/console/account/password",
            "/console/account/second-factor"} <= set(opened)


def test_the_menu_offers_each_role_what_it_may_open(signed_in: Visitor,
                                                    staff: Visitor) -> None:
    owners = _menu(signed_in.get("/console/").text)
    assert owners == ["Home", "Orders", "Pets", "API keys", "Webhooks", "Users",
                      "Audit log", "Password", "Second factor"]
    staffs = _menu(staff.get("/console/").text)
    assert staffs == STAFF_MENU and not set(OWNER_MENU) & set(staffs)
    assert 'class="who">sam <span class="role">(staff)</span>' in staff.page


def test_the_users_page_lists_each_user_with_role_state_and_second_factor(
        signed_in: Visitor, store: Store) -> None:
    sam = _user(store, "sam", accounts.STAFF)
    store.update_console_user(sam, {"totp_secret": pyotp.random_base32(32)})
    new, _ = accounts.add(store, "kim", accounts.OWNER)
    page = signed_in.get("/console/users").text
    owner = store.console_user("owner")
    assert owner is not None
    me = row(page, f"user-{owner.id}")
    assert (cell(me, "role"), cell(me, "state"), cell(me, "second-factor")) == (
        "owner", "enabled", "off")
    assert cell(me, "last-sign-in").startswith("<time datetime=")
    assert cell(me, "actions").strip() == "you"
    sams = row(page, f"user-{sam}")
    assert (cell(sams, "role"), cell(sams, "second-factor"), cell(sams, "last-sign-in")) == (
        "staff", "on", "never")
    assert "Disable…" in cell(sams, "actions") and "Reset second factor" in cell(
        sams, "actions")
    kims = row(page, f"user-{new.id}")
    assert (cell(kims, "role"), cell(kims, "state")) == (
        "owner", "enabled; must choose a password")
    assert "Reset second factor" not in cell(kims, "actions")


def _add(visitor: Visitor, **fields: str) -> Any:
    visitor.get("/console/users")
    return visitor.post("/console/users", {"key": form_key(visitor.page, "/console/users"),
                                           **fields})


def _password(page: str) -> str:
    found = re.search(r'<code class="secret" id="secret">([^<]+)</code>', page)
    assert found, "the page shows no password"
    return html.unescape(found.group(1))


def test_an_owner_adds_a_user_whose_password_is_shown_once(signed_in: Visitor, app: PetstoreApp,
                                                           store: Store) -> None:
    added = _add(signed_in, name="sam", role="staff", password=GOOD)
    assert added.status_code == 200 and added.headers["cache-control"] == "no-store"
    one_time = _password(added.text)
    assert "sam is added (staff)" in added.text and "shown only this once" in added.text
    sam = store.console_user("sam")
    assert sam is not None and (sam.role, sam.must_change_password) == ("staff", True)
    assert one_time not in signed_in.get("/console/users").text
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.action, entry.detail) == ("owner", "user added",
                                                             "sam (staff)")
    assert one_time not in str(store.audit_entries(100))
    sams = Visitor(app.test_client())  # sam signs in and must choose a password first
    answer = sams.sign_in("sam", one_time)
    assert answer.headers["location"] == "/console/account/password"


def test_a_user_is_added_only_with_the_owners_password_and_good_fields(
        signed_in: Visitor, store: Store) -> None:
    refused = _add(signed_in, name="sam", role="staff", password="wrong")
    assert refused.status_code == 403 and "That is not your password" in refused.text
    assert 'value="sam"' in refused.text
    for fields, status, words in (
            ({"name": "<b>sam</b>", "role": "staff"}, 400, "letters, digits"),
            ({"name": "sam", "role": "admin"}, 400, "owner or staff, not &#39;admin&#39;"),
            ({"name": "owner", "role": "staff"}, 409, "named owner exists already")):
        answer = _add(signed_in, password=GOOD, **fields)
        assert answer.status_code == status, (fields, answer.status_code)
        assert words in answer.text and 'id="secret"' not in answer.text
    assert [user.name for user in store.list_console_users()] == ["owner"]
    actions = [entry.action for entry in store.audit_entries(10)]
    assert actions[:4] == ["add user refused"] * 3 + ["password confirmation failed"]


def test_the_add_form_sent_again_adds_no_second_user_and_a_new_password(
        signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/users")
    key = form_key(signed_in.page, "/console/users")
    first = signed_in.post("/console/users", {"key": key, "name": "sam", "role": "staff",
                                              "password": GOOD})
    signed_in.get("/console/users")
    again = signed_in.post("/console/users", {"key": key, "name": "sam", "role": "staff",
                                              "password": GOOD})
    assert again.status_code == 200 and 'id="again"' in again.text
    old, new = _password(first.text), _password(again.text)
    assert old != new and [u.name for u in store.list_console_users()] == ["owner", "sam"]
    with pytest.raises(SignInFailed):
        accounts.sign_in(store, "sam", old, None)
    assert accounts.sign_in(store, "sam", new, None).must_change_password
    sam = store.console_user("sam")
    assert sam is not None
    accounts.change_password(store, sam, new, STAFF_PASSWORD, None)
    signed_in.get("/console/users")
    late = signed_in.post("/console/users", {"key": key, "name": "sam", "role": "staff",
                                             "password": GOOD})
    assert late.status_code == 409 and "has chosen a password since" in late.text
    assert accounts.sign_in(store, "sam", STAFF_PASSWORD, None)


def _confirm_action(visitor: Visitor) -> str:
    found = FORM.search(visitor.page)
    assert found, "the page has no confirmation form"
    return html.unescape(found.group(1))


def test_a_user_is_disabled_only_from_its_confirmation_and_its_sessions_end(
        signed_in: Visitor, staff: Visitor, store: Store) -> None:
    sam = store.console_user("sam")
    assert sam is not None
    page = signed_in.get("/console/users").text
    assert f'href="/console/users/{sam.id}/disable">Disable…</a>' in page
    shown = signed_in.get(f"/console/users/{sam.id}/disable")
    assert shown.status_code == 200 and "<h1>Disable sam?</h1>" in shown.text
    assert "every session of theirs ends at once" in shown.text
    assert store.console_user("sam").active  # type: ignore[union-attr]
    action = _confirm_action(signed_in)
    assert action == f"/console/users/{sam.id}/disable"
    done = signed_in.follow(signed_in.post(action))
    assert "sam is disabled: their sessions have ended" in done.text
    assert not store.console_user("sam").active  # type: ignore[union-attr]
    assert "disabled since" in cell(row(done.text, f"user-{sam.id}"), "state")
    # sam's open browser is signed out, and sam cannot sign in again.
    assert staff.get("/console/orders").headers["location"].startswith("/console/sign-in")
    assert "do not match a console user" in staff.sign_in("sam", STAFF_PASSWORD).text
    again = signed_in.get(f"/console/users/{sam.id}/disable")
    assert "sam is disabled already." in again.text and not FORM.search(again.text)
    entry = store.audit_entries(1, user_name="owner")[0]
    assert (entry.action, entry.detail) == ("user disabled", "sam")
    # Enabled again, sam signs in.
    signed_in.get("/console/users")
    enabled = signed_in.follow(signed_in.post(f"/console/users/{sam.id}/enable"))
    assert "sam may sign in again." in enabled.text
    assert staff.sign_in("sam", STAFF_PASSWORD).status_code == 303
    assert store.audit_entries(1, user_name="owner")[0].action == "user enabled"


def test_an_owner_cannot_disable_themself(signed_in: Visitor, store: Store) -> None:
    owner = store.console_user("owner")
    assert owner is not None
    shown = signed_in.get(f"/console/users/{owner.id}/disable")
    assert "You cannot disable your own account: another owner can." in shown.text
    assert not FORM.search(shown.text)
    refused = signed_in.post(f"/console/users/{owner.id}/disable")
    assert refused.status_code == 409
    assert "You cannot disable your own account" in refused.text and 'id="users"' in (
        refused.text)
    assert store.console_user("owner").active  # type: ignore[union-attr]
    assert signed_in.get("/console/orders").status_code == 200  # still signed in
    entry = store.audit_entries(1)[0]
    assert (entry.action, entry.detail) == ("disable user refused", "owner: oneself")


def test_another_owner_is_disabled_but_never_the_last(signed_in: Visitor,
                                                      store: Store) -> None:
    """The last enabled owner cannot be disabled (D38): in the console the only owner who
    could is the one acting (refused above); the rule holds in the core for the CLI."""
    kim = _user(store, "kim", accounts.OWNER)
    signed_in.get(f"/console/users/{kim}/disable")
    signed_in.follow(signed_in.post(_confirm_action(signed_in)))
    assert not store.console_user("kim").active  # type: ignore[union-attr]
    with pytest.raises(UserRefused, match="owner is the last enabled owner"):
        accounts.disable(store, "owner")
    assert store.console_user("owner").active  # type: ignore[union-attr]


def test_disabling_or_enabling_nobody_is_a_404(signed_in: Visitor) -> None:
    signed_in.get("/console/users")
    for path in ("/console/users/99/disable", "/console/users/x/disable",
                 "/console/users/9999999999999999999/disable"):
        assert signed_in.get(path).status_code == 404, path
        signed_in.get("/console/users")
        assert signed_in.post(path).status_code == 404, path
    signed_in.get("/console/users")
    assert signed_in.post("/console/users/99/enable").status_code == 404
    signed_in.get("/console/users")
    assert signed_in.post("/console/users/99/second-factor/reset",
                          {"password": GOOD}).status_code == 404


def test_a_second_factor_is_reset_only_after_the_owners_password(
        signed_in: Visitor, staff: Visitor, store: Store) -> None:
    sam = store.console_user("sam")
    assert sam is not None
    store.update_console_user(sam.id, {"totp_secret": pyotp.random_base32(32)})
    path = f"/console/users/{sam.id}/second-factor/reset"
    signed_in.get("/console/users")
    assert f'action="{path}"' in signed_in.page
    wrong = signed_in.post(path, {"password": "not mine"})
    assert wrong.status_code == 403 and "That is not your password" in wrong.text
    assert store.console_user("sam").totp_secret is not None  # type: ignore[union-attr]
    done = signed_in.follow(signed_in.post(path, {"password": GOOD}))
    assert "sam&#39;s second factor is removed" in done.text
    assert cell(row(done.text, f"user-{sam.id}"), "second-factor") == "off"
    assert store.console_user("sam").totp_secret is None  # type: ignore[union-attr]
    # sam's sessions ended; sam signs in with the password alone.
    assert staff.get("/console/orders").status_code == 303
    assert staff.sign_in("sam", STAFF_PASSWORD).headers["location"] == "/console/"
    entries = [(e.action, e.detail) for e in store.audit_entries(10, user_name="owner")]
    assert ("second factor reset", "sam") in entries
    assert ("password confirmation failed", "reset second factor of sam") in entries
    signed_in.get("/console/users")
    none = signed_in.post(path, {"password": GOOD})
    assert none.status_code == 409 and "sam has no second factor to reset." in none.text


def test_an_owner_resets_not_their_own_second_factor_here(signed_in: Visitor,
                                                          store: Store) -> None:
    owner = store.console_user("owner")
    assert owner is not None
    secret = pyotp.random_base32(32)
    store.update_console_user(owner.id, {"totp_secret": secret})
    page = signed_in.get("/console/users").text
    assert "Reset second factor" not in cell(row(page, f"user-{owner.id}"), "actions")
    refused = signed_in.post(f"/console/users/{owner.id}/second-factor/reset",
                             {"password": GOOD})
    assert refused.status_code == 409 and "Second factor page" in refused.text
    assert store.console_user("owner").totp_secret == secret  # type: ignore[union-attr]


def test_wrong_passwords_at_a_reset_are_throttled(signed_in: Visitor, store: Store) -> None:
    sam = _user(store, "sam", accounts.STAFF)
    store.update_console_user(sam, {"totp_secret": pyotp.random_base32(32)})
    path = f"/console/users/{sam}/second-factor/reset"
    for _ in range(5):
        signed_in.get("/console/users")
        assert signed_in.post(path, {"password": "a guess"}).status_code == 403
    signed_in.get("/console/users")
    throttled = signed_in.post(path, {"password": GOOD})
    assert throttled.status_code == 429 and int(throttled.headers["retry-after"]) > 0
    assert "Too many wrong passwords" in throttled.text
    assert store.console_user("sam").totp_secret is not None  # type: ignore[union-attr]


def test_staff_signing_in_to_an_owners_page_are_refused_once_not_looped(
        visitor: Visitor, store: Store, owner: str) -> None:
    _user(store, "sam", accounts.STAFF)
    asked = visitor.get("/console/keys")
    assert asked.headers["location"] == "/console/sign-in?next=/console/keys"
    visitor.get(asked.headers["location"])
    signed = visitor.post("/console/sign-in?next=/console/keys",
                          {"name": "sam", "password": STAFF_PASSWORD})
    assert signed.headers["location"] == "/console/keys"
    refused = visitor.follow(signed)
    assert refused.status_code == 403 and ROLE_REFUSED in refused.text
    assert _menu(refused.text) == STAFF_MENU
