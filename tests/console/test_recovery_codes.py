"""Recovery codes (D38, after GitHub's), as a user meets them: ten shown once, when a first
second factor is set up, and kept only as digests; at the code step each signs in once in
place of the authenticator's code, and the page says how many are left; a spent or wrong
one is refused, audited and counted by the sign-in throttle; one stands in for the current
code when the authenticator is replaced; new ones, after the password, replace the old
set."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pyotp
import pytest

from app.core.config import Settings
from app.core.storage import Store
from app.core.users import recovery
from tests.console.conftest import GOOD, Visitor
from tests.console.test_second_factor import _offered, codes_shown, enrol, onward

PAGE = "/console/account/second-factor"
CODE = "/console/sign-in/code"
NEW = "/console/account/recovery-codes"


def _actions(store: Store, count: int) -> list[tuple[str | None, str, str]]:
    return [(e.user_name, e.action, e.detail) for e in store.audit_entries(count)]


def _to_code_step(visitor: Visitor) -> None:
    """Sign out, and in again with the password: the code step."""
    visitor.follow(visitor.post("/console/sign-out"))
    visitor.follow(visitor.sign_in("owner", GOOD))
    assert "The code of your authenticator" in visitor.page


def _left(store: Store) -> int:
    user = store.console_user("owner")
    assert user is not None
    return recovery.left(store, user)


def test_the_codes_are_shown_once_and_kept_only_as_digests(
        signed_in: Visitor, store: Store, console_settings: Settings) -> None:
    signed_in.get(PAGE)
    assert "ten recovery codes to keep" in signed_in.page
    secret = _offered(signed_in.page)
    enrolled = signed_in.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(secret).now()})
    codes = codes_shown(enrolled.text)
    assert len(set(codes)) == 10 and "shown only this once" in enrolled.text
    assert enrolled.headers["cache-control"] == "no-store"
    assert "replace your earlier" not in enrolled.text
    # Never again: not on the second factor page, which says how many are left, nor on
    # any page the menu reaches.
    for path in (PAGE, "/console/", "/console/audit", "/console/keys"):
        shown = signed_in.get(path).text
        assert not any(code in shown for code in codes), path
    assert re.search(r'id="codes-left">10 recovery codes are left', signed_in.get(PAGE).text)
    # The database holds digests: no code, with its dashes or without.
    database = Path(console_settings.database)
    held = b"".join(path.read_bytes() for path in database.parent.glob(f"{database.name}*"))
    for code in codes:
        assert code.encode() not in held and code.replace("-", "").encode() not in held
        assert (recovery.digest(code) or "").encode() in held


def test_each_code_signs_in_once_and_the_page_says_how_many_are_left(
        signed_in: Visitor, store: Store) -> None:
    _, codes = enrol(signed_in)
    _to_code_step(signed_in)
    assert 'id="recovery"' in signed_in.page and "Recovery code" in signed_in.page
    used = signed_in.post(CODE, {"code": codes[0]})
    assert used.status_code == 200 and "petstore-console=" in used.headers["set-cookie"]
    assert "You have 9 recovery codes left." in used.text
    assert onward(used.text) == "/console/"
    assert "Pending orders" in signed_in.get("/console/").text  # signed in
    assert _actions(store, 1) == [("owner", "signed in (recovery code)", "9 left")]
    # The same code again: refused, and the session still owes the code.
    _to_code_step(signed_in)
    again = signed_in.post(CODE, {"code": codes[0]})
    assert again.status_code == 200
    assert "That is not one of your recovery codes, or it was used already" in again.text
    assert "set-cookie" not in again.headers
    assert signed_in.get("/console/orders").headers["location"] == CODE
    assert _actions(store, 1) == [("owner", "sign-in failed", "spent recovery code")]
    # Typed in capitals, with spaces for dashes: the next one works.
    signed_in.get(CODE)
    typed = signed_in.post(CODE, {"code": codes[1].upper().replace("-", " ")})
    assert "You have 8 recovery codes left." in typed.text and _left(store) == 8


@pytest.mark.parametrize("recovery_code", [True, False], ids=["recovery code", "authenticator"])
def test_the_code_step_ends_its_session(signed_in: Visitor, recovery_code: bool) -> None:
    """The authenticator's code, or a recovery code (whose page says how many are left),
    comes with a new session: the cookie of the code step, were it kept (or stolen), opens
    nothing afterwards."""
    secret, codes = enrol(signed_in)
    _to_code_step(signed_in)
    before = signed_in.client.cookies.get("petstore-console")
    if recovery_code:
        used = signed_in.post(CODE, {"code": codes[0]})
        assert "You have 9 recovery codes left." in used.text
    else:  # the next step's code: enrolling spent this one's
        used = signed_in.post(CODE, {"code": pyotp.TOTP(secret).at(time.time() + 30)})
        assert used.status_code == 303 and used.headers["location"] == "/console/"
    assert signed_in.client.cookies.get("petstore-console") != before
    kept = signed_in.client.get("/console/orders", follow_redirects=False,
                                headers={"Cookie": f"petstore-console={before}"})
    assert kept.status_code == 303
    assert kept.headers["location"].startswith("/console/sign-in?")  # not the code step
    assert signed_in.get("/console/orders").status_code == 200  # the new one opens


def test_a_wrong_or_spent_code_is_counted_by_the_throttle(signed_in: Visitor,
                                                         store: Store) -> None:
    _, codes = enrol(signed_in)
    _to_code_step(signed_in)
    signed_in.post(CODE, {"code": codes[0]})
    _to_code_step(signed_in)
    for guess in (codes[0], "abcd-efgh-ijkl-mnop-qrst-uvwx", "not a code at all", codes[0],
                  "zzzz"):
        refused = signed_in.post(CODE, {"code": guess})
        assert refused.status_code == 200 and "recovery codes" in refused.text, guess
        signed_in.get(CODE)
    # The sixth waits, even with a good code, which stays unspent.
    sixth = signed_in.post(CODE, {"code": codes[1]})
    assert sixth.status_code == 429 and "Too many failed sign-ins" in sixth.text
    assert 14 * 60 < int(sixth.headers["retry-after"]) <= 15 * 60
    assert _left(store) == 9
    assert [detail for _, action, detail in _actions(store, 7)
            if action == "sign-in failed"] == [
        "wrong recovery code", "spent recovery code", "wrong recovery code",
        "wrong recovery code", "spent recovery code"]


def test_new_codes_after_the_password_replace_the_old(signed_in: Visitor,
                                                      store: Store) -> None:
    _, old = enrol(signed_in)
    signed_in.get(PAGE)
    assert f'action="{NEW}"' in signed_in.page
    refused = signed_in.post(NEW, {"password": "not the password"})
    assert refused.status_code == 403
    assert "That is not your password; nothing was done." in refused.text
    assert codes_shown(refused.text) == [] and _left(store) == 10
    assert _actions(store, 1) == [("owner", "password confirmation failed",
                                   "new recovery codes")]
    made = signed_in.post(NEW, {"password": GOOD})
    new = codes_shown(made.text)
    assert made.status_code == 200 and len(set(new)) == 10 and not set(new) & set(old)
    assert "They replace your earlier recovery codes, which no longer work." in made.text
    assert onward(made.text) == PAGE
    assert _actions(store, 1) == [("owner", "recovery codes made", "asked for")]
    _to_code_step(signed_in)
    assert "recovery codes" in signed_in.post(CODE, {"code": old[2]}).text  # refused
    assert signed_in.get("/console/").headers["location"] == CODE
    signed_in.get(CODE)
    assert "You have 9 recovery codes left." in signed_in.post(CODE, {"code": new[2]}).text


def test_new_codes_need_a_second_factor(signed_in: Visitor, store: Store) -> None:
    signed_in.get(PAGE)
    assert NEW not in signed_in.page  # none to replace
    refused = signed_in.post(NEW, {"password": GOOD})
    assert refused.status_code == 409 and "set up a second factor first" in refused.text
    assert codes_shown(refused.text) == [] and _left(store) == 0
    assert _actions(store, 1) == [("owner", "recovery codes refused", "no second factor")]


def test_a_code_stands_in_for_a_lost_authenticator_when_it_is_replaced(
        signed_in: Visitor, store: Store) -> None:
    first, codes = enrol(signed_in)
    _to_code_step(signed_in)
    signed_in.get(onward(signed_in.post(CODE, {"code": codes[0]}).text))
    # The phone is lost: a new authenticator, with a recovery code for the current code.
    signed_in.get(PAGE)
    assert "Code of your current authenticator, or a recovery code" in signed_in.page
    second = _offered(signed_in.page)
    wrong = signed_in.post(PAGE, {"password": GOOD, "current_code": codes[0],
                                  "code": pyotp.TOTP(second).now()})
    assert wrong.status_code == 403
    assert "That is not one of your recovery codes, or it was used already" in wrong.text
    replaced = signed_in.post(PAGE, {"password": GOOD, "current_code": codes[1],
                                     "code": pyotp.TOTP(second).now()})
    assert replaced.status_code == 303  # a replacement keeps the codes left: none shown
    signed_in.follow(replaced)
    user = store.console_user("owner")
    assert user is not None and user.totp_secret == second != first
    assert _left(store) == 8
    assert _actions(store, 3) == [
        ("owner", "second factor replaced", ""),
        ("owner", "recovery code used", "second factor: 8 left"),
        ("owner", "code confirmation failed", "second factor: spent recovery code")]
    _to_code_step(signed_in)
    opened = signed_in.post(CODE, {"code": pyotp.TOTP(second).at(time.time() + 30)})
    assert opened.headers["location"] == "/console/"


def test_removing_the_second_factor_forgets_the_codes(signed_in: Visitor,
                                                      store: Store) -> None:
    secret, _ = enrol(signed_in)
    removed = signed_in.post(f"{PAGE}/remove", {
        "password": GOOD, "current_code": pyotp.TOTP(secret).at(time.time() + 30)})
    assert removed.status_code == 303 and _left(store) == 0
    signed_in.follow(removed)
    signed_in.follow(signed_in.post("/console/sign-out"))
    assert signed_in.sign_in("owner", GOOD).headers["location"] == "/console/"
