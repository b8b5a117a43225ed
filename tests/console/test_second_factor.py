"""A second factor (D35, D36), as a signed-in visitor sees it: enrolled with the server's
secret (a form's own is ignored), the password and a code of the new authenticator, then
asked at each sign-in; replaced only with the password and the current code; removed the
same way unless every user must have one; each step, and each refusal, in the audit log;
and the password asked here counted by the throttle as at the sign-in."""

from __future__ import annotations

import re
import time

import pyotp

from app.core.config import Settings
from app.core.storage import Store
from app.core.users import accounts
from app.web import PetstoreApp, create_app
from tests.console.conftest import GOOD, Visitor, console_store, form_key
from tests.support import Interposed

PAGE = "/console/account/second-factor"
REMOVE = "/console/account/second-factor/remove"


def _offered(page: str) -> str:
    """The secret the page offers, as its key shows it."""
    found = re.search(r'<code class="secret">([A-Z2-7]{32})</code>', page)
    assert found, "the page offers no secret"
    return found.group(1)


def _other(code: str) -> str:
    return "000000" if code != "000000" else "111111"


def codes_shown(page: str) -> list[str]:
    """The recovery codes a page shows."""
    return re.findall(r"<li><code>([a-z2-7]{4}(?:-[a-z2-7]{4}){5})</code></li>", page)


def onward(page: str) -> str:
    """Where the link of a page to read before going on leads."""
    found = re.search(r'<a class="button" href="([^"]+)">(?:I have kept them; go on|Go on)<',
                      page)
    assert found, "the page has no link onward"
    return found.group(1).replace("&amp;", "&")


def enrol(visitor: Visitor) -> tuple[str, list[str]]:
    """Enrol the secret the page offers, a first second factor; its secret and the
    recovery codes the answer shows."""
    visitor.get(PAGE)
    secret = _offered(visitor.page)
    enrolled = visitor.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(secret).now()})
    assert enrolled.status_code == 200, enrolled.text[:500]
    codes = codes_shown(enrolled.text)
    assert len(codes) == 10
    visitor.get(onward(enrolled.text))
    return secret, codes


def _enrol(visitor: Visitor) -> str:
    """Enrol the secret the page offers; its secret."""
    return enrol(visitor)[0]


def _actions(store: Store, count: int) -> list[tuple[str | None, str, str]]:
    return [(e.user_name, e.action, e.detail) for e in store.audit_entries(count)]


def test_the_second_factor_is_enrolled_then_asked_at_each_sign_in(
        signed_in: Visitor, store: Store) -> None:
    page = signed_in.get(PAGE)
    assert page.status_code == 200 and "Scan this code" in page.text
    # The code is drawn as markup, with no script of its own (the one script is every
    # page's, which sends a form once a click).
    assert "<svg" in page.text and re.findall(r"<script[^>]*>", page.text) == [
        '<script src="/console/static/forms.js" defer>',
        '<script src="/console/static/times.js" defer>']
    assert 'id="otpauth">otpauth://totp/Pet%20Store%20Orders:owner?secret=' in page.text
    # Drawn dark on light, four pixels a module, at error correction M (15% of it may be
    # lost to a screen's glare): for this URI, version 7's 45 modules and a quiet zone of 4
    # each side, 212 pixels square, which a phone's camera reads off a screen.
    assert ('<svg width="212" height="212" class="segno"><path transform="scale(4)" '
            'class="qrline" stroke="#111" d="M') in page.text
    secret = _offered(page.text)
    assert 'name="secret"' not in page.text  # the server keeps it, not the form
    assert _offered(signed_in.get(PAGE).text) == secret  # the same, page after page
    wrong = signed_in.post(PAGE, {"password": GOOD, "code": "12345"})
    assert wrong.status_code == 200 and "not the current one" in wrong.text
    assert _actions(store, 1) == [("owner", "second factor refused",
                                   "wrong code of the new authenticator")]
    enrolled = signed_in.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(secret).now()})
    # Answered with its recovery codes (test_recovery_codes.py), then on Home.
    assert enrolled.status_code == 200 and len(codes_shown(enrolled.text)) == 10
    assert onward(enrolled.text) == "/console/"
    assert _actions(store, 2) == [("owner", "recovery codes made", "second factor enrolled"),
                                  ("owner", "second factor enrolled", "")]
    signed_in.get(onward(enrolled.text))
    signed_in.follow(signed_in.post("/console/sign-out"))
    # The page asked for signed out opens after the code (docs/console.md).
    signed_in.follow(signed_in.get("/console/pets?status=sold"))
    asked = signed_in.post("/console/sign-in", {"name": "owner", "password": GOOD,
                                                "next": "/console/pets?status=sold"})
    assert asked.headers["location"] == "/console/sign-in/code?next=/console/pets%3Fstatus%3Dsold"
    assert signed_in.get("/console/").headers["location"] == "/console/sign-in/code"
    signed_in.follow(asked)
    assert 'name="next" value="/console/pets?status=sold"' in signed_in.page
    # The code that enrolled it was used; the next step's is good.
    later = pyotp.TOTP(secret).at(time.time() + 30)
    opened = signed_in.post("/console/sign-in/code", {"code": later,
                                                      "next": "/console/pets?status=sold"})
    assert opened.headers["location"] == "/console/pets?status=sold"


def test_two_pages_shown_at_once_offer_the_one_secret_kept(app: PetstoreApp,
                                                           signed_in: Visitor,
                                                           store: Store) -> None:
    """A second tab's page kept its secret after this page found the session keeping none,
    and before this page kept its own: this page offers the one kept, whose code enrols."""
    other = accounts.new_totp_secret()
    interposed = console_store(app, lambda own: Interposed(
        own, "offer_totp_secret", lambda digest, _: store.offer_totp_secret(digest, other),
        armed=True))
    signed_in.get(PAGE)
    assert interposed.done.is_set() and _offered(signed_in.page) == other
    enrolled = signed_in.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(other).now()})
    assert enrolled.status_code == 200 and len(codes_shown(enrolled.text)) == 10
    assert store.console_user("owner").totp_secret == other  # type: ignore[union-attr]


def test_a_secret_of_the_forms_choosing_is_never_enrolled(signed_in: Visitor,
                                                          store: Store) -> None:
    """The issue's attack: with a session, a secret of the browser's choosing and its
    code. The form's secret is ignored, so its code is not the offered secret's."""
    signed_in.get(PAGE)
    chosen = pyotp.random_base32(32)
    sent = signed_in.post(PAGE, {"secret": chosen, "password": GOOD,
                                 "code": pyotp.TOTP(chosen).now()})
    assert sent.status_code == 200 and "not the current one" in sent.text
    assert store.console_user("owner").totp_secret is None  # type: ignore[union-attr]


def test_enrolling_needs_the_password(signed_in: Visitor, store: Store) -> None:
    signed_in.get(PAGE)
    secret = _offered(signed_in.page)
    refused = signed_in.post(PAGE, {"password": "not the password",
                                    "code": pyotp.TOTP(secret).now()})
    assert refused.status_code == 403
    assert "That is not your password; nothing was done." in refused.text
    assert store.console_user("owner").totp_secret is None  # type: ignore[union-attr]
    assert _actions(store, 1) == [("owner", "password confirmation failed", "second factor")]


def test_replacing_it_needs_the_password_and_the_current_code(signed_in: Visitor,
                                                              store: Store) -> None:
    first = _enrol(signed_in)
    signed_in.get(PAGE)
    assert "Code of your current authenticator" in signed_in.page
    second = _offered(signed_in.page)
    assert second != first
    new_code = pyotp.TOTP(second).now()
    without = signed_in.post(PAGE, {"password": GOOD, "code": new_code})
    assert without.status_code == 403 and "not the current code" in without.text
    wrong = signed_in.post(PAGE, {"password": GOOD, "code": new_code,
                                  "current_code": _other(pyotp.TOTP(first).at(time.time() + 30))})
    assert wrong.status_code == 403
    assert store.console_user("owner").totp_secret == first  # type: ignore[union-attr]
    assert _actions(store, 1) == [("owner", "code confirmation failed", "second factor")]
    replaced = signed_in.post(PAGE, {"password": GOOD, "code": new_code,
                                     "current_code": pyotp.TOTP(first).at(time.time() + 30)})
    assert replaced.status_code == 303
    assert store.console_user("owner").totp_secret == second  # type: ignore[union-attr]
    assert _actions(store, 1) == [("owner", "second factor replaced", "")]


def test_removing_it_needs_the_password_and_the_current_code(signed_in: Visitor,
                                                             store: Store) -> None:
    secret = _enrol(signed_in)
    signed_in.get(PAGE)
    assert 'action="/console/account/second-factor/remove"' in signed_in.page
    later = pyotp.TOTP(secret).at(time.time() + 30)
    refused = signed_in.post(REMOVE, {"password": "not the password", "current_code": later})
    assert refused.status_code == 403
    assert store.console_user("owner").totp_secret == secret  # type: ignore[union-attr]
    removed = signed_in.post(REMOVE, {"password": GOOD, "current_code": later})
    assert removed.status_code == 303, re.findall(r'role="alert">([^<]+)<', removed.text)
    assert store.console_user("owner").totp_secret is None  # type: ignore[union-attr]
    assert _actions(store, 1) == [("owner", "second factor removed", "")]
    signed_in.follow(removed)
    signed_in.follow(signed_in.post("/console/sign-out"))
    assert signed_in.sign_in("owner", GOOD).headers["location"] == "/console/"


def test_a_required_second_factor_is_not_removed(console_settings: Settings, store: Store,
                                                 owner: str) -> None:
    with create_app(console_settings.replace(console_require_totp=True)).test_client() as c:
        visitor = Visitor(c)
        visitor.follow(visitor.sign_in(owner, GOOD))
        secret = _offered(visitor.page)
        enrolled = visitor.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(secret).now()})
        visitor.get(onward(enrolled.text))
        visitor.get(PAGE)
        assert "/remove" not in visitor.page
        refused = visitor.post(REMOVE, {"password": GOOD, "current_code":
                                        pyotp.TOTP(secret).at(time.time() + 30)})
        assert refused.status_code == 403 and "asks every user" in refused.text
    assert store.console_user("owner").totp_secret == secret  # type: ignore[union-attr]


def test_the_password_asked_here_is_throttled_as_at_the_sign_in(
        app: PetstoreApp, signed_in: Visitor, store: Store) -> None:
    signed_in.get(PAGE)
    secret = _offered(signed_in.page)
    for _ in range(5):
        assert signed_in.post(PAGE, {"password": "a guess", "code": "123456"}
                              ).status_code == 403
    sixth = signed_in.post(PAGE, {"password": GOOD, "code": pyotp.TOTP(secret).now()})
    assert sixth.status_code == 429 and "Too many wrong passwords" in sixth.text
    assert 14 * 60 < int(sixth.headers["retry-after"]) <= 15 * 60
    assert store.console_user("owner").totp_secret is None  # type: ignore[union-attr]
    # The keys page's password too: one name, one address, one count.
    signed_in.get("/console/keys")
    assert signed_in.post("/console/keys", {"password": GOOD}).status_code == 429


def test_a_wrong_code_at_the_sign_in_opens_nothing_and_the_sixth_waits(
        signed_in: Visitor, store: Store) -> None:
    secret = _enrol(signed_in)
    signed_in.follow(signed_in.post("/console/sign-out"))
    signed_in.follow(signed_in.sign_in("owner", GOOD))
    assert "code" in signed_in.page
    right = pyotp.TOTP(secret).at(time.time() + 30)  # the enrolling code's step was used
    for _ in range(5):
        wrong = signed_in.post("/console/sign-in/code", {"code": _other(right)})
        assert wrong.status_code == 200
        assert "That code is not the current one of your authenticator" in wrong.text
        assert signed_in.get("/console/orders").headers["location"] == "/console/sign-in/code"
        signed_in.get("/console/sign-in/code")
    assert _actions(store, 1) == [("owner", "sign-in failed", "wrong code")]
    # The sixth waits, even with the right code: the session still owes it.
    sixth = signed_in.post("/console/sign-in/code", {"code": right})
    assert sixth.status_code == 429 and "Too many failed sign-ins" in sixth.text
    assert 14 * 60 < int(sixth.headers["retry-after"]) <= 15 * 60
    assert "petstore-console=" not in sixth.headers.get("set-cookie", "")
    assert _actions(store, 1) == [("owner", "sign-in refused", "throttled")]
    assert signed_in.get("/console/orders").headers["location"] == "/console/sign-in/code"


def test_a_wrong_current_code_is_counted_as_a_wrong_password_is(signed_in: Visitor,
                                                                store: Store) -> None:
    secret = _enrol(signed_in)
    # After an unlock the counts go under the user's new throttle epoch (D36).
    accounts.unlock(store, "owner")
    later = pyotp.TOTP(secret).at(time.time() + 30)
    for _ in range(5):
        wrong = signed_in.post(REMOVE, {"password": GOOD, "current_code": _other(later)})
        assert wrong.status_code == 403
        assert ("That is not the current code of your authenticator; nothing was done."
                in wrong.text)
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.address, entry.action, entry.detail) == (
        "owner", "testclient", "code confirmation failed", "remove second factor")
    sixth = signed_in.post(REMOVE, {"password": GOOD, "current_code": later})
    assert sixth.status_code == 429 and "Too many wrong passwords" in sixth.text
    assert store.console_user("owner").totp_secret == secret  # type: ignore[union-attr]


def test_a_key_is_made_with_the_password_alone_by_a_user_with_a_second_factor(
        signed_in: Visitor, store: Store) -> None:
    _enrol(signed_in)
    signed_in.get("/console/keys")
    made = signed_in.post("/console/keys", {
        "key": form_key(signed_in.page, "/console/keys"), "name": "till", "plan": "free",
        "scope": "read", "password": GOOD})
    assert made.status_code == 200 and 'id="secret">psk_' in made.text
    assert [k.name for k in store.list_keys()] == ["till"]
