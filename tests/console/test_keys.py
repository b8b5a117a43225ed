"""The API keys page (D35 over D12, D21), as a signed-in visitor sees it: every key with its
plan, quotas, scope, last use, expiry and state; making and rotating a key only with the
password again (ASVS 3.7.1), the secret shown once on a page that is not kept; revoking,
lifting a ban; the core's refusals in words, each action in the audit log without a
secret; a form that makes or rotates a key applied once, its last answer's secret the one
that works."""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import Any

import pytest

from app.console.blueprint import form_slot
from app.core import keys
from app.core.config import Settings
from app.core.storage import Store
from app.core.users import accounts
from tests.console.conftest import GOOD, Visitor, cell, form_key, row


def _secret(page: str) -> str:
    found = re.search(r'<code class="secret" id="secret">(psk_[A-Za-z0-9_-]+)</code>', page)
    assert found, "the page shows no secret"
    return found.group(1)


ANY_FORM = "console-" + "s" * 32  # a well-formed form key, taken by no sending yet


def _make(visitor: Visitor, **fields: str) -> Any:
    """The form that makes a key, on the page the visitor is on, sent with these fields."""
    return visitor.post("/console/keys", {"key": form_key(visitor.page, "/console/keys"),
                                          **fields})


def _row(page: str, number: int) -> str:
    return row(page, f"key-{number}")


def test_a_key_is_made_with_the_password_and_its_secret_shown_once(signed_in: Visitor,
                                                                   store: Store) -> None:
    signed_in.get("/console/keys")
    made = _make(signed_in, name="storefront", plan="pro", scope="read", expiresIn="90d",
                 password=GOOD)
    assert made.status_code == 200 and made.headers["cache-control"] == "no-store"
    secret = _secret(made.text)
    (key,) = store.list_keys()
    assert keys.digest(secret) == key.digest
    assert (key.name, key.plan, key.scope, key.expires_at is not None) == (
        "storefront", "pro", "read", True)
    assert "copy.js" in made.text and "shown only this once" in made.text
    listed = signed_in.get("/console/keys").text
    assert secret not in listed
    row = _row(listed, key.id)
    assert cell(row, "quotas") == "300/min, 10,000/day"
    assert (cell(row, "last-used"), cell(row, "state")) == ("never", "active")
    # A time, without script, is UTC a person reads, the moment in its datetime and on
    # hover (the browser's script writes it in the browser's zone).
    made_at = key.created_at.replace("+00:00", "Z")
    assert cell(row, "created") == (
        f'<time datetime="{made_at}" title="{made_at[:10]} {made_at[11:19]} UTC">'
        f'{made_at[:10]} {made_at[11:16]} UTC</time>')
    expires = re.fullmatch(r'<time datetime="(\S+)Z" title="[^"]+">([^<]+)</time>',
                           cell(row, "expires"))
    assert expires and expires.group(2) == f"{expires.group(1)[:10]} {expires.group(1)[11:16]} UTC"
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.address, entry.action, entry.detail) == (
        "owner", "testclient", "key created",
        f"key {key.id} ({key.prefix}...), plan pro, scope read: storefront")
    answer = signed_in.client.get("/v2/store/orders",
                                  headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code == 200


def test_no_key_is_made_without_the_password(signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/keys")
    refused = _make(signed_in, name="x", plan="free", scope="write", password="wrong")
    assert refused.status_code == 403
    assert "That is not your password; nothing was done." in refused.text
    assert 'value="x"' in refused.text and "psk_" not in refused.text
    assert store.list_keys() == []
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.action, entry.detail) == (
        "owner", "password confirmation failed", "create key")


def test_a_key_the_rules_refuse_is_not_made(signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/keys")
    refused = _make(signed_in, plan="enterprise", scope="write", password=GOOD)
    assert refused.status_code == 400
    assert "An enterprise key needs its requests a minute and a day." in refused.text
    numbers = _make(signed_in, plan="free", scope="write", perMinute="5", password=GOOD)
    assert numbers.status_code == 400 and "The free plan sets its own limits" in numbers.text
    expiry = _make(signed_in, plan="free", scope="write", expiresIn="soon", password=GOOD)
    assert expiry.status_code == 400 and "is not a duration" in expiry.text
    enterprise = _make(signed_in, plan="enterprise", scope="write", perMinute="1",
                       perDay="70", password=GOOD)  # 1, the least a field takes
    assert enterprise.status_code == 200
    assert cell(_row(signed_in.get("/console/keys").text, 1), "quotas") == "1/min, 70/day"
    named = _make(signed_in, name="\u202egnp.exe", plan="free", scope="write",
                  password=GOOD)  # a name people read (D37)
    assert named.status_code == 400
    # The core's sentence ends with its own full stop; the page adds none.
    assert "The name must not hold control characters" in named.text
    assert "it is text for a person to read.</" in named.text
    for typed in ("0", "abc", "1" * 13):  # the console's own reading of its number fields
        number = _make(signed_in, plan="enterprise", scope="write", perMinute=typed,
                       perDay="70", password=GOOD)
        assert number.status_code == 400, typed
        assert "Requests a minute must be a whole number, 1 or more.<" in number.text, typed
    assert len(store.list_keys()) == 1


def test_a_key_is_rotated_with_a_grace_and_the_password(signed_in: Visitor,
                                                        store: Store) -> None:
    old, key = keys.create(store, plan="free", name="warehouse", per_minute=None,
                           per_day=None)
    signed_in.get("/console/keys")
    rotate = f"/console/keys/{key.id}/rotate"
    wrong = signed_in.post(rotate, {"key": form_key(signed_in.page, rotate), "grace": "1h",
                                    "password": "nope"})
    assert wrong.status_code == 403 and store.get_key(key.id).digest == key.digest  # type: ignore[union-attr]
    rotated = signed_in.post(rotate, {"key": form_key(signed_in.page, rotate), "grace": "1h",
                                      "password": GOOD})
    assert rotated.status_code == 200 and rotated.headers["cache-control"] == "no-store"
    now = store.get_key(key.id)
    assert now is not None and now.digest == keys.digest(_secret(rotated.text))
    assert now.previous_digest == keys.digest(old) and now.previous_until is not None
    assert "old secret until" in cell(_row(signed_in.get("/console/keys").text, key.id),
                                       "state")
    assert store.audit_entries(1)[0].action == "key rotated"
    assert old not in "".join(e.detail for e in store.audit_entries(20))


@pytest.mark.parametrize(("console_settings", "within"), [
    ({}, "2 seconds"), ({"key_cache_seconds": 1}, "1 second"),
    ({"key_cache_seconds": 0.5}, "0.5 seconds"),
], indirect=["console_settings"])
def test_a_key_is_revoked_and_a_revoked_key_is_not_rotated(signed_in: Visitor, store: Store,
                                                           within: str) -> None:
    """The notice says how soon the API refuses it: the key cache's time to live."""
    _, key = keys.create(store, plan="free", name="", per_minute=None, per_day=None)
    signed_in.get("/console/keys")
    revoked = signed_in.post(f"/console/keys/{key.id}/revoke")
    page = signed_in.follow(revoked).text
    assert f"Key {key.id} is revoked: the API refuses its secret within {within}." in page
    assert cell(_row(page, key.id), "state").startswith("revoked ")
    assert "Rotate" not in _row(page, key.id)
    refused = signed_in.post(f"/console/keys/{key.id}/rotate",
                             {"key": ANY_FORM, "password": GOOD})
    assert refused.status_code == 409
    assert f"Key {key.id} is revoked; create a new one instead." in refused.text
    assert [e.action for e in store.audit_entries(2)] == ["rotate key refused",
                                                          "key revoked"]
    assert signed_in.post("/console/keys/99/revoke").status_code == 404


def test_a_ban_is_lifted(signed_in: Visitor, store: Store) -> None:
    _, key = keys.create(store, plan="free", name="", per_minute=None, per_day=None)
    _, served = keys.create(store, plan="free", name="", per_minute=None, per_day=None)
    store.ban_key(key.id, "2099-01-01T00:00:00Z")
    store.ban_key(served.id, "2020-01-01T00:00:00Z")  # a ban that has run out
    signed_in.get("/console/keys")
    assert ('banned until <time datetime="2099-01-01T00:00:00Z" title="2099-01-01 00:00:00 UTC">'
            "2099-01-01 00:00 UTC</time>") in cell(_row(signed_in.page, key.id), "state")
    assert "Lift the ban" in _row(signed_in.page, key.id)
    assert cell(_row(signed_in.page, served.id), "state") == "active"
    assert "Lift the ban" not in _row(signed_in.page, served.id)
    lifted = signed_in.post(f"/console/keys/{key.id}/unban")
    page = signed_in.follow(lifted).text
    assert f"Key {key.id} is not banned." in page
    assert store.get_key(key.id).banned_until is None  # type: ignore[union-attr]
    assert "Lift the ban" not in _row(page, key.id)


def test_a_key_s_row_says_when_it_was_last_used_to_the_minute(signed_in: Visitor,
                                                                store: Store) -> None:
    """D21: the key's row keeps its last use to the minute, and shows no more."""
    _, key = keys.create(store, plan="enterprise", name="", per_minute=7, per_day=70_000)
    store.touch_keys({key.id: "2026-11-29T12:34:56Z"})
    page = signed_in.get("/console/keys")
    assert page.status_code == 200
    found = _row(page.text, key.id)
    assert cell(found, "last-used") == (
        '<time datetime="2026-11-29T12:34:00Z" title="2026-11-29 12:34:00 UTC">'
        "2026-11-29 12:34 UTC</time>")
    assert cell(found, "quotas") == "7/min, 70,000/day"


def test_the_form_for_a_new_key_offers_every_plan_and_scope_free_and_write_first(
        signed_in: Visitor, store: Store) -> None:
    """And a key's rotation keeps the old secret a day, unless the owner says otherwise,
    also on a page shown again after a refused form."""
    _, key = keys.create(store, plan="free", name="", per_minute=None, per_day=None)
    page = signed_in.get("/console/keys").text
    form = page.split('id="create-key"', 1)[1].split("</form>", 1)[0]
    assert re.findall(r'<option value="(\w+)" (selected)?', form) == [
        ("free", "selected"), ("pro", ""), ("business", ""), ("enterprise", ""),
        ("read", ""), ("write", "selected")]
    assert 'name="grace" value="24h"' in _row(page, key.id)
    refused = _make(signed_in, name="x", plan="free", scope="write", password="wrong")
    assert 'name="grace" value="24h"' in _row(refused.text, key.id)


def test_a_keys_name_is_shown_as_text(signed_in: Visitor, store: Store) -> None:
    keys.create(store, plan="free", name="<img src=x onerror=alert(1)>", per_minute=None,
                per_day=None)
    page = signed_in.get("/console/keys").text
    assert "&lt;img src=x onerror=alert(1)&gt;" in page and "<img src=x" not in page


def _works(visitor: Visitor, secret: str) -> bool:
    """Whether the API takes the secret."""
    answer = visitor.client.get("/v2/store/orders",
                                headers={"Authorization": f"Bearer {secret}"})
    assert answer.status_code in (200, 401), answer.text
    return bool(answer.status_code == 200)


def test_the_form_that_makes_a_key_sent_twice_makes_one_and_its_last_answer_works(
        signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/keys")
    sent = {"key": form_key(signed_in.page, "/console/keys"), "name": "till", "plan": "free",
            "scope": "write", "password": GOOD}
    first = _secret(signed_in.post("/console/keys", sent).text)
    again = signed_in.post("/console/keys", sent)  # a double click, or a reload of the answer
    assert again.status_code == 200 and again.headers["cache-control"] == "no-store"
    (key,) = store.list_keys()
    assert (key.name, key.digest) == ("till", keys.digest(_secret(again.text)))
    assert (f"This form was sent again (a double click, or a reload of its answer): it made "
            f"key {key.id} the first time, and nothing more now. This secret is a new one in "
            "place of the one an earlier answer showed, which no longer works.") in again.text
    assert _works(signed_in, _secret(again.text)) and not _works(signed_in, first)
    entry = store.audit_entries(1)[0]
    assert (entry.action, entry.detail) == (
        "key secret renewed", f"key {key.id} ({key.prefix}...): its form was sent again")


def test_a_form_the_rules_refused_is_sent_again_corrected(signed_in: Visitor,
                                                          store: Store) -> None:
    signed_in.get("/console/keys")
    taken = form_key(signed_in.page, "/console/keys")
    refused = signed_in.post("/console/keys", {"key": taken, "plan": "free", "scope": "write",
                                               "expiresIn": "soon", "password": GOOD})
    assert refused.status_code == 400 and store.list_keys() == []
    made = signed_in.post("/console/keys", {"key": taken, "plan": "free", "scope": "write",
                                            "expiresIn": "90d", "password": GOOD})
    assert made.status_code == 200 and len(store.list_keys()) == 1


def test_a_form_without_its_key_makes_nothing(signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/keys")
    for key in ("", "console-short", "other-" + "a" * 30):
        refused = signed_in.post("/console/keys", {"key": key, "plan": "free",
                                                   "scope": "write", "password": GOOD})
        assert refused.status_code == 400
        assert "The form lacks its key; open the page again." in refused.text
    assert store.list_keys() == []


def test_the_rotation_sent_twice_rotates_once_and_the_clients_old_secret_still_works(
        signed_in: Visitor, store: Store) -> None:
    old, key = keys.create(store, plan="free", name="warehouse", per_minute=None,
                           per_day=None)
    signed_in.get("/console/keys")
    rotate = f"/console/keys/{key.id}/rotate"
    sent = {"key": form_key(signed_in.page, rotate), "grace": "1h", "password": GOOD}
    first = _secret(signed_in.post(rotate, sent).text)
    again = signed_in.post(rotate, sent)
    assert again.status_code == 200 and 'id="again"' in again.text
    assert f"it rotated key {key.id} the first time, and nothing more now." in again.text
    now = store.get_key(key.id)
    assert now is not None and now.digest == keys.digest(_secret(again.text))
    # A second rotation would have made the first's unseen secret the old one.
    assert now.previous_digest == keys.digest(old)
    assert f'the old one works until <time datetime="{now.previous_until}"' in again.text
    assert _works(signed_in, old) and _works(signed_in, _secret(again.text))
    assert not _works(signed_in, first)


def test_the_second_click_waits_for_the_first_and_shows_the_secret_that_works(
        signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/keys")
    sent = {"key": form_key(signed_in.page, "/console/keys"), "plan": "free",
            "scope": "write", "password": GOOD}
    slot = form_slot("/console/keys", sent["key"])
    assert store.take_console_form(slot, 0.0) == (True, None)  # the first click, at work
    _, key = keys.create(store, plan="free", name="", per_minute=None, per_day=None)
    first = threading.Timer(0.5, store.settle_console_form, (slot, key.id))
    first.start()
    again = signed_in.post("/console/keys", sent)
    first.join()
    assert again.status_code == 200 and 'id="again"' in again.text
    now = store.get_key(key.id)
    assert now is not None and now.digest == keys.digest(_secret(again.text))
    assert store.list_keys() == [now]


def test_a_form_whose_first_sending_failed_midway_makes_nothing_more(
        signed_in: Visitor, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    signed_in.get("/console/keys")
    sent = {"key": form_key(signed_in.page, "/console/keys"), "plan": "free",
            "scope": "write", "password": GOOD}

    def fails(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the store failed after writing, say")

    with monkeypatch.context() as patched:
        patched.setattr(keys, "create", fails)
        assert signed_in.post("/console/keys", sent).status_code == 500
    refused = signed_in.post("/console/keys", sent)  # it may have written: taken still
    assert refused.status_code == 409 and "Sent already" in refused.text
    assert ("This form was sent before, and that sending has made nothing yet: it is being "
            "applied, or it stopped midway.") in refused.text
    assert '<a id="back" href="/console/keys">' in refused.text
    assert store.list_keys() == []


def test_a_form_refused_by_an_error_page_is_let_go(signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/keys")
    taken = form_key(signed_in.page, "/console/keys")
    missing = signed_in.post("/console/keys/99/rotate", {"key": taken, "password": GOOD})
    assert missing.status_code == 404 and "No key has the id 99." in missing.text
    assert store.take_console_form(form_slot("/console/keys/99/rotate", taken), 0.0) == (
        True, None)


def test_a_forms_key_sent_to_another_page_is_another_form(signed_in: Visitor,
                                                          store: Store) -> None:
    signed_in.get("/console/keys")
    taken = form_key(signed_in.page, "/console/keys")
    made = signed_in.post("/console/keys", {"key": taken, "plan": "free", "scope": "write",
                                            "password": GOOD})
    (key,) = store.list_keys()
    rotated = signed_in.post(f"/console/keys/{key.id}/rotate",
                             {"key": taken, "grace": "1h", "password": GOOD})
    assert rotated.status_code == 200 and 'id="again"' not in rotated.text
    now = store.get_key(key.id)
    assert now is not None and now.previous_digest == keys.digest(_secret(made.text))


def test_a_key_revoked_since_its_form_made_it_gets_no_new_secret(signed_in: Visitor,
                                                                 store: Store) -> None:
    signed_in.get("/console/keys")
    sent = {"key": form_key(signed_in.page, "/console/keys"), "plan": "free",
            "scope": "write", "password": GOOD}
    signed_in.post("/console/keys", sent)
    (key,) = store.list_keys()
    store.revoke_key(key.id, "2026-11-27T10:00:00Z")
    again = signed_in.post("/console/keys", sent)
    assert again.status_code == 409
    assert f"Key {key.id} is revoked; create a new one instead." in again.text
    revoked = store.get_key(key.id)
    assert revoked is not None and revoked.digest == key.digest
    assert 'id="secret"' not in again.text
    entry = store.audit_entries(1)[0]
    assert (entry.action, entry.detail) == ("renew key secret refused",
                                            f"key {key.id}: revoked")


def test_a_key_gone_since_its_form_made_it_is_a_404_page(signed_in: Visitor, store: Store,
                                                         settings: Settings) -> None:
    """A key no longer in the database (a backup restored from before it was made) when
    its form is sent again: the console's 404 page names it, and no key is made."""
    signed_in.get("/console/keys")
    sent = {"key": form_key(signed_in.page, "/console/keys"), "plan": "free",
            "scope": "write", "password": GOOD}
    signed_in.post("/console/keys", sent)
    (key,) = store.list_keys()
    with sqlite3.connect(settings.database) as db:
        db.execute("DELETE FROM api_keys WHERE id = ?", (key.id,))
    db.close()
    again = signed_in.post("/console/keys", sent)
    assert again.status_code == 404
    assert f"No key has the id {key.id}." in again.text
    assert 'id="secret"' not in again.text and store.list_keys() == []


def test_the_password_asked_to_make_or_rotate_a_key_is_throttled(signed_in: Visitor,
                                                                store: Store) -> None:
    _, key = keys.create(store, plan="free", name="warehouse", per_minute=None,
                         per_day=None)
    signed_in.get("/console/keys")
    # A form without the password is a wrong password too.
    for password in ({}, {"password": "a guess"}, {"password": ""}, {"password": "x"},
                     {"password": GOOD.upper()}):
        wrong = _make(signed_in, name="x", plan="free", scope="write", **password)
        assert wrong.status_code == 403
        assert "That is not your password; nothing was done." in wrong.text
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.address, entry.action, entry.detail) == (
        "owner", "testclient", "password confirmation failed", "create key")
    # The sixth waits, even with the right password, and nothing is made.
    sixth = _make(signed_in, name="x", plan="free", scope="write", password=GOOD)
    assert sixth.status_code == 429 and 'id="secret"' not in sixth.text
    assert "Too many wrong passwords for this name from this address" in sixth.text
    assert 14 * 60 < int(sixth.headers["retry-after"]) <= 15 * 60
    assert [k.id for k in store.list_keys()] == [key.id]
    # Nor is a key rotated: one name, one address, one count.
    rotate = f"/console/keys/{key.id}/rotate"
    refused = signed_in.post(rotate, {"key": form_key(signed_in.page, rotate), "grace": "1h",
                                      "password": GOOD})
    assert refused.status_code == 429 and "Too many wrong passwords" in refused.text
    assert int(refused.headers["retry-after"]) > 14 * 60
    assert store.get_key(key.id).digest == key.digest  # type: ignore[union-attr]
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.address, entry.action, entry.detail) == (
        "owner", "testclient", "password confirmation refused", f"rotate key {key.id}: throttled")


def test_wrong_passwords_after_an_unlock_are_counted_under_the_new_epoch(signed_in: Visitor,
                                                                        store: Store) -> None:
    # `petstore users unlock` gives the user a new throttle epoch (D36): the wrong
    # passwords asked again here count under it, and the sixth waits.
    accounts.unlock(store, "owner")
    signed_in.get("/console/keys")
    for _ in range(5):
        wrong = _make(signed_in, name="x", plan="free", scope="write", password="a guess")
        assert wrong.status_code == 403
        assert re.findall(r'role="alert">([^<]+)<', wrong.text) == [
            "That is not your password; nothing was done."]
    sixth = _make(signed_in, name="x", plan="free", scope="write", password=GOOD)
    assert sixth.status_code == 429 and 'id="secret"' not in sixth.text
    assert "Too many wrong passwords for this name from this address" in sixth.text
    assert store.list_keys() == []
