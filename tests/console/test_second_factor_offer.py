"""The second factor at the first sign-in (issue 60; D35, D38), as a new user meets it: once
the one-time password is changed, the console offers an authenticator, which can be set up
there (its recovery codes shown once) or skipped, and is not offered again at the next
sign-in; the server's reset of a lost authenticator offers it again. Where
PETSTORE_CONSOLE_REQUIRE_TOTP asks for one, there is no skipping, and no page of the console
opens (every rule of its URL map walked) until it is set up."""

from __future__ import annotations

from typing import Any

import pyotp

from app.console.blueprint import PUBLIC, stages_of
from app.core.config import Settings
from app.core.storage import Store
from app.core.users import accounts, recovery, sessions
from app.web import PetstoreApp, create_app
from tests.console.conftest import GOOD, Visitor
from tests.console.test_second_factor import _offered, codes_shown, enrol, onward

PAGE = "/console/account/second-factor"
SKIP = "/console/account/second-factor/skip"


def _first_password(visitor: Visitor, store: Store, name: str = "ann") -> Any:
    """A new user's first sign-in, up to the answer to the new password."""
    _, one_time = accounts.add(store, name)
    visitor.follow(visitor.sign_in(name, one_time))
    return visitor.post("/console/account/password",
                        {"current": one_time, "new": GOOD, "repeat": GOOD})


def _actions(store: Store, count: int) -> list[tuple[str | None, str, str]]:
    return [(e.user_name, e.action, e.detail) for e in store.audit_entries(count)]


def test_a_new_user_is_offered_a_second_factor_after_the_one_time_password(
        visitor: Visitor, store: Store) -> None:
    changed = _first_password(visitor, store)
    assert changed.headers["location"] == PAGE
    page = visitor.follow(changed)
    assert page.status_code == 200 and "You may skip this" in page.text
    assert f'action="{SKIP}"' in page.text and "Skip for now" in page.text
    assert "<nav>" not in page.text  # the console's menu waits for the answer
    # Until it is answered, every other page leads back to it.
    for path in ("/console/", "/console/orders", "/console/keys", "/console/account/password"):
        assert visitor.get(path).headers["location"] == PAGE, path
    # Set up from the offer: its recovery codes, then Home; asked at the next sign-in.
    visitor.get(PAGE)
    secret = _offered(visitor.page)
    enrolled = visitor.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(secret).now()})
    assert enrolled.status_code == 200 and len(codes_shown(enrolled.text)) == 10
    assert onward(enrolled.text) == "/console/"
    assert "Pending orders" in visitor.get("/console/").text
    assert _actions(store, 3) == [("ann", "recovery codes made", "second factor enrolled"),
                                  ("ann", "second factor enrolled", ""),
                                  ("ann", "password changed", "")]
    visitor.follow(visitor.post("/console/sign-out"))
    assert visitor.sign_in("ann", GOOD).headers["location"] == "/console/sign-in/code"


def test_the_offer_may_be_skipped_and_is_made_once(visitor: Visitor, store: Store) -> None:
    visitor.follow(_first_password(visitor, store))
    skipped = visitor.post(SKIP)
    assert skipped.headers["location"] == "/console/"
    assert "Pending orders" in visitor.follow(skipped).text
    assert store.console_user("ann").totp_secret is None  # type: ignore[union-attr]
    assert _actions(store, 2) == [("ann", "second factor skipped", ""),
                                  ("ann", "password changed", "")]
    # The next sign-in opens with the password alone; the menu's page sets one up later,
    # with nothing to skip.
    visitor.follow(visitor.post("/console/sign-out"))
    assert visitor.sign_in("ann", GOOD).headers["location"] == "/console/"
    page = visitor.get(PAGE).text
    assert "Scan this code" in page and SKIP not in page and "You may skip" not in page
    # Skipping answers the offer alone: from an open session it is refused.
    refused = visitor.post(SKIP)
    assert refused.status_code == 403
    assert _actions(store, 1) == [("ann", "signed in (password)", "")]


def test_the_page_asked_for_opens_after_the_offer_is_answered(visitor: Visitor,
                                                             store: Store) -> None:
    _, one_time = accounts.add(store, "ann")
    visitor.follow(visitor.get("/console/pets?status=sold"))
    visitor.follow(visitor.post("/console/sign-in", {
        "name": "ann", "password": one_time, "next": "/console/pets?status=sold"}))
    changed = visitor.post("/console/account/password", {
        "current": one_time, "new": GOOD, "repeat": GOOD, "next": "/console/pets?status=sold"})
    assert changed.headers["location"] == f"{PAGE}?next=/console/pets%3Fstatus%3Dsold"
    visitor.follow(changed)
    secret = _offered(visitor.page)
    enrolled = visitor.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(secret).now(),
                                   "next": "/console/pets?status=sold"})
    assert onward(enrolled.text) == "/console/pets?status=sold"


def test_the_servers_reset_of_a_lost_authenticator_offers_one_again(
        signed_in: Visitor, store: Store) -> None:
    enrol(signed_in)
    user = store.console_user("owner")
    assert user is not None and recovery.left(store, user) == 10
    # `petstore users reset-password owner --second-factor`, on the server.
    one_time = accounts.reset_password(store, "owner", second_factor=True)
    assert recovery.left(store, user) == 0  # its recovery codes went with it
    assert signed_in.get("/console/").headers["location"].startswith("/console/sign-in")
    assert signed_in.sign_in("owner", one_time).headers["location"] == (
        "/console/account/password")
    signed_in.get("/console/account/password")
    changed = signed_in.post("/console/account/password", {
        "current": one_time, "new": GOOD + "!", "repeat": GOOD + "!"})
    assert changed.headers["location"] == PAGE
    assert "You may skip this" in signed_in.follow(changed).text


def test_where_required_no_page_opens_until_a_second_factor_is_set_up(
        console_settings: Settings, store: Store) -> None:
    app: PetstoreApp = create_app(console_settings.replace(console_require_totp=True))
    with app.test_client() as client:
        visitor = Visitor(client)
        changed = _first_password(visitor, store)
        assert changed.headers["location"] == PAGE
        page = visitor.follow(changed).text
        assert "asks every user" in page and SKIP not in page and "<nav>" not in page
        token, audited, revision = visitor.token(), len(store.audit_entries(100)), \
            store.revision()
        # Every rule of the console's URL map that is a page of it: a GET goes to the
        # second factor, anything else is refused, and nothing changes.
        walked = 0
        for rule in app.console.url_map.iter_rules():
            stages = stages_of(app.console.view_functions[rule.endpoint])
            if (not rule.endpoint.startswith("console.") or rule.endpoint == "console.static"
                    or PUBLIC in stages or sessions.ENROL in stages):
                continue
            url = rule.rule
            for argument in rule.arguments:
                url = url.replace(f"<{argument}>", "1")
            for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
                walked += 1
                if method == "GET":
                    answer = visitor.get(url)
                    assert (answer.status_code, answer.headers.get("location")) == (
                        303, PAGE), (method, url)
                else:
                    answer = visitor.post(url, {"password": GOOD}, token=token)
                    assert answer.status_code == 403, (method, url)
        assert walked >= 30
        assert len(store.audit_entries(100)) == audited and store.revision() == revision
        assert visitor.post(SKIP, token=token).status_code == 403  # no skipping here
        # Set up, it opens, after the recovery codes.
        visitor.get(PAGE)
        secret = _offered(visitor.page)
        enrolled = visitor.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(secret).now()})
        assert enrolled.status_code == 200 and len(codes_shown(enrolled.text)) == 10
        assert "Pending orders" in visitor.get(onward(enrolled.text)).text
        assert visitor.get("/console/orders").status_code == 200
