"""Signing in to the console and its refusals (D35, D36), as a visitor sees them: the first
sign-in changes the one-time password, each step a new session, sign-out ends the session
wherever its cookie is copied, a form from another site or without its token changes
nothing, the sixth failure waits from its address only, the password page's current
password is throttled alike, a Host outside PETSTORE_CONSOLE_HOSTS and an address outside
PETSTORE_CONSOLE_ALLOW are refused, no API key opens the console and no quota meters it,
and every answer is a page with the security headers. After signing in, the page asked
for opens: a path of the console only, never another site."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest

from app.core.config import Settings
from app.core.storage import Store
from app.core.users import accounts
from app.web import PetstoreApp, create_app
from tests.console.conftest import GOOD, HOST, ORIGIN, Visitor
from tests.support import make_key

SECURITY = {
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self'; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


def _assert_page(response: object, status: int, words: str) -> None:
    assert response.status_code == status, (response.status_code, response.text[:400])  # type: ignore[attr-defined]
    headers = response.headers  # type: ignore[attr-defined]
    assert headers["content-type"].startswith("text/html")
    assert words in response.text, response.text[:600]  # type: ignore[attr-defined]
    for name, value in SECURITY.items():
        assert headers[name] == value, name
    assert headers["x-request-id"]


def test_the_first_sign_in_changes_the_one_time_password(visitor: Visitor,
                                                         store: Store) -> None:
    _, one_time = accounts.add(store, "ann")
    first = visitor.get("/console/")
    assert first.status_code == 303 and first.headers["location"] == "/console/sign-in"
    _assert_page(visitor.follow(first), 200, "Sign in")
    signed = visitor.post("/console/sign-in", {"name": "ann", "password": one_time})
    assert signed.headers["location"] == "/console/account/password"
    cookie = signed.headers["set-cookie"]
    assert cookie.startswith("petstore-console=") and "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie and "Path=/" in cookie
    _assert_page(visitor.follow(signed), 200, "Choose your password")
    # Nothing else opens until it is changed.
    assert visitor.get("/console/orders").headers["location"] == "/console/account/password"
    refused = visitor.post("/console/account/password", {
        "current": one_time, "new": "password1234", "repeat": "password1234"})
    _assert_page(refused, 200, "list of common passwords")
    changed = visitor.post("/console/account/password", {
        "current": one_time, "new": GOOD, "repeat": GOOD})
    # Then a second factor is offered (test_first_second_factor.py), here skipped.
    assert changed.headers["location"] == "/console/account/second-factor"
    _assert_page(visitor.follow(changed), 200, "You may skip this")
    skipped = visitor.post("/console/account/second-factor/skip")
    assert skipped.headers["location"] == "/console/"
    _assert_page(visitor.follow(skipped), 200, "Pending orders")
    assert [e.action for e in store.audit_entries(5)] == [
        "second factor skipped", "password changed", "new password refused",
        "signed in (password)", "user added"]


NEXT = re.compile(r'name="next" value="([^"]*)"')


def _carried(visitor: Visitor) -> dict[str, str]:
    """The page asked for, as the page's form carries it (none: {})."""
    found = NEXT.search(visitor.page)
    return {"next": found.group(1).replace("&amp;", "&")} if found else {}


def test_after_the_first_sign_in_the_page_asked_for_opens(visitor: Visitor,
                                                          store: Store) -> None:
    _, one_time = accounts.add(store, "ann")
    asked = visitor.get("/console/orders?status=pending")
    assert asked.headers["location"] == "/console/sign-in?next=/console/orders%3Fstatus%3Dpending"
    visitor.follow(asked)
    assert _carried(visitor) == {"next": "/console/orders?status=pending"}
    signed = visitor.post("/console/sign-in",
                          {"name": "ann", "password": one_time, **_carried(visitor)})
    assert signed.headers["location"] == (
        "/console/account/password?next=/console/orders%3Fstatus%3Dpending")
    visitor.follow(signed)
    changed = visitor.post("/console/account/password", {
        "current": one_time, "new": GOOD, "repeat": GOOD, **_carried(visitor)})
    assert changed.headers["location"] == (
        "/console/account/second-factor?next=/console/orders%3Fstatus%3Dpending")
    visitor.follow(changed)  # the second factor offered, with the page asked for
    skipped = visitor.post("/console/account/second-factor/skip", _carried(visitor))
    assert skipped.headers["location"] == "/console/orders?status=pending"
    _assert_page(visitor.follow(skipped), 200, 'value="pending" checked')
    # Home asks for nothing more than Home.
    visitor.follow(visitor.post("/console/sign-out"))
    assert visitor.get("/console/").headers["location"] == "/console/sign-in"


def test_the_page_asked_for_is_carried_to_its_last_character(visitor: Visitor,
                                                             owner: str) -> None:
    """Only the bare "?" of an empty query is dropped from the page asked for: a query
    that ends in a capital X (a filter for a tag "BOX") is carried whole."""
    bare = visitor.get("/console/orders?")
    assert bare.headers["location"] == "/console/sign-in?next=/console/orders"
    asked = visitor.get("/console/pets?tag=BOX")
    assert asked.headers["location"] == "/console/sign-in?next=/console/pets%3Ftag%3DBOX"
    visitor.follow(asked)
    signed = visitor.post("/console/sign-in",
                          {"name": owner, "password": GOOD, **_carried(visitor)})
    assert signed.headers["location"] == "/console/pets?tag=BOX"


@pytest.mark.parametrize("elsewhere", [
    "//evil.example", "/\\evil.example", "/\\/evil.example", "https://evil.example",
    "http:/console/x", "javascript:alert(1)", "evil.example", "/console/../x",
    "/console/./x", "/console/pets/..", "/console//evil.example", "/console/%2e%2e/x",
    "/console/x?a=//evil", "/console/x\r\nSet-Cookie: a=1", "/console/x%0d%0aSet-Cookie",
    "/console/x\tx", "/other", "/console", " /console/", "/console/x#frag\u2028",
])
def test_no_page_but_the_consoles_is_followed_after_signing_in(visitor: Visitor, owner: str,
                                                               elsewhere: str) -> None:
    shown = visitor.get(f"/console/sign-in?next={quote(elsewhere, safe='')}")
    assert shown.status_code == 200 and 'name="next"' not in shown.text
    signed = visitor.post("/console/sign-in",
                          {"name": owner, "password": GOOD, "next": elsewhere})
    assert signed.status_code == 303 and signed.headers["location"] == "/console/"


def test_a_wrong_password_and_an_unknown_name_read_alike(visitor: Visitor, owner: str) -> None:
    wrong = visitor.sign_in(owner, "not the password")
    unknown = visitor.sign_in("nobody", GOOD)
    assert wrong.status_code == unknown.status_code == 200
    said = [re.search(r'role="alert">([^<]+)<', r.text).group(1) for r in (wrong, unknown)]  # type: ignore[union-attr]
    assert said[0] == said[1]
    assert "set-cookie" not in wrong.headers or "petstore-console=" not in wrong.headers[
        "set-cookie"]


def test_signing_out_ends_the_session_for_a_copy_of_its_cookie(signed_in: Visitor,
                                                               store: Store) -> None:
    cookie = signed_in.client.cookies["petstore-console"]
    token = signed_in.token()
    out = signed_in.post("/console/sign-out")
    assert out.headers["location"] == "/console/sign-in?out=1"
    assert out.headers["set-cookie"].startswith("petstore-console=")
    assert "Max-Age=0" in out.headers["set-cookie"]
    # Another browser, or the same one after a copy of its cookie was put back.
    signed_in.client.cookies.clear()
    with_cookie = {"Cookie": f"petstore-console={cookie}"}
    again = signed_in.get("/console/orders", headers=with_cookie)
    assert again.status_code == 303
    assert again.headers["location"] == "/console/sign-in?next=/console/orders"
    acted = signed_in.post("/console/orders/1/cancel", {"version": "1"}, token=token,
                           headers=with_cookie)
    _assert_page(acted, 403, "did not come from this console")
    assert store.get_order(1)["status"] == "pending"  # type: ignore[index]


def test_a_form_from_another_site_changes_nothing(signed_in: Visitor, store: Store) -> None:
    for headers in ({"Origin": "https://shop.example", "Sec-Fetch-Site": "cross-site"},
                    {"Origin": "https://shop.example"},
                    {"Origin": "null", "Sec-Fetch-Site": "cross-site"},
                    {"Sec-Fetch-Site": "same-site", "Origin": "http://sub.testserver"},
                    # Where the browser says where the page came from, that decides,
                    # whatever the Origin says.
                    {"Sec-Fetch-Site": "cross-site", "Origin": ORIGIN},
                    {"Sec-Fetch-Site": "same-site", "Origin": ORIGIN}):
        refused = signed_in.client.post(
            "/console/orders/1/cancel", data={"token": signed_in.token(), "version": "1"},
            headers=headers, follow_redirects=False)
        _assert_page(refused, 403, "did not come from this console")
    no_origin = signed_in.client.post("/console/orders/1/cancel",
                                      data={"token": signed_in.token(), "version": "1"},
                                      follow_redirects=False)
    assert no_origin.status_code == 403
    without_token = signed_in.post("/console/orders/1/cancel", {"version": "1"}, token="")
    _assert_page(without_token, 403, "did not come from this console")
    assert store.get_order(1)["status"] == "pending"  # type: ignore[index]


def test_the_sign_in_form_is_given_its_cookie_once_and_never_beside_a_session(
        app: PetstoreApp, visitor: Visitor, owner: str) -> None:
    """The sign-in form's cookie is set on the first page without a session, and not set
    again while the browser holds it, nor on any page of a session (D35)."""
    first = visitor.get("/console/sign-in")
    assert first.headers["set-cookie"].startswith("petstore-console-form=")
    again = visitor.get("/console/sign-in")
    assert "set-cookie" not in again.headers
    signed = visitor.post("/console/sign-in", {"name": owner, "password": GOOD})
    assert [c.split("=", 1)[0] for c in signed.headers.get_list("set-cookie")] == [
        "petstore-console"]
    # Another browser given only the session's cookie (no form's cookie) is given none.
    other = app.test_client()
    other.cookies.set("petstore-console", visitor.client.cookies["petstore-console"])
    home = other.get("/console/", follow_redirects=False)
    assert home.status_code == 200 and "Pending orders" in home.text
    assert "set-cookie" not in home.headers


@pytest.mark.parametrize("console_settings", [{"console_allow": "10.20.30.0/24, ::1"}],
                         indirect=True)
def test_the_console_answers_the_addresses_its_operator_allows_and_no_other(
        app: PetstoreApp) -> None:
    for address in ("10.20.30.40", "::1"):
        with app.test_client(client=(address, 50000)) as client:
            assert client.get("/console/sign-in").status_code == 200, address
    for address in ("10.20.31.1", "127.0.0.1", "testclient"):
        with app.test_client(client=(address, 50000)) as client:
            _assert_page(client.get("/console/sign-in"), 403, "PETSTORE_CONSOLE_ALLOW")


def test_a_form_sent_without_a_session_is_refused_not_sent_on_to_sign_in(
        visitor: Visitor, store: Store) -> None:
    """A POST needs a session: one with only the sign-in form's token (a session that ran
    out, a page kept open) is refused, and not carried to the sign-in as a page to open."""
    visitor.get("/console/sign-in")
    refused = visitor.post("/console/orders/1/cancel", {"version": "1"})
    _assert_page(refused, 403, "did not come from this console")
    assert store.get_order(1)["status"] == "pending"  # type: ignore[index]


def test_a_browser_that_sends_no_fetch_metadata_is_judged_by_its_origin(
        signed_in: Visitor, store: Store) -> None:
    """A browser older than Sec-Fetch-Site (Safari before 16.4) sends only Origin: a form
    of the console's own origin acts, and one of another origin does not."""
    form = {"token": signed_in.token(), "version": "1"}
    elsewhere = signed_in.client.post("/console/orders/1/cancel", data=form,
                                      headers={"Origin": "http://elsewhere.example"},
                                      follow_redirects=False)
    _assert_page(elsewhere, 403, "did not come from this console")
    assert store.get_order(1)["status"] == "pending"  # type: ignore[index]
    ours = signed_in.client.post("/console/orders/1/cancel", data=form,
                                 headers={"Origin": ORIGIN}, follow_redirects=False)
    assert ours.status_code == 303
    assert store.get_order(1)["status"] == "cancelled"  # type: ignore[index]


def test_the_sign_in_form_needs_its_own_token_and_origin(visitor: Visitor, owner: str) -> None:
    visitor.get("/console/sign-in")
    token = visitor.token()
    forged = visitor.post("/console/sign-in", {"name": owner, "password": GOOD},
                          token="made-up")
    _assert_page(forged, 403, "did not come from this console")
    cross = visitor.post("/console/sign-in", {"name": owner, "password": GOOD}, token=token,
                         headers={"Origin": "https://elsewhere.example",
                                  "Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403
    assert visitor.post("/console/sign-in", {"name": owner, "password": GOOD},
                        token=token).status_code == 303


def test_the_sixth_wrong_password_waits_from_its_address_only(app: PetstoreApp, visitor: Visitor,
                                                              owner: str, store: Store) -> None:
    for _ in range(5):
        assert visitor.sign_in(owner, "wrong password!").status_code == 200
    sixth = visitor.sign_in(owner, GOOD)  # even the right one, now, from here
    _assert_page(sixth, 429, "Too many failed sign-ins")
    assert 14 * 60 < int(sixth.headers["retry-after"]) <= 15 * 60
    assert "petstore-console=" not in sixth.headers.get("set-cookie", "")
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.action, entry.detail) == ("owner", "sign-in refused",
                                                             "throttled")
    # D36: the owner, from another address, signs in with the right password. (A client
    # of the same app, whose lifespan the visitor's client runs.)
    owner_elsewhere = Visitor(app.test_client(client=("203.0.113.9", 50000)))
    signed = owner_elsewhere.sign_in(owner, GOOD)
    assert signed.status_code == 303 and signed.headers["location"] == "/console/"
    # The failures are in the audit log under the name they were aimed at.
    page = owner_elsewhere.get("/console/audit?user=owner&action=sign-in+failed").text
    assert page.count("<td>wrong password</td>") == 5


def test_an_unlock_lets_the_name_sign_in_again_from_the_address_that_waits(
        visitor: Visitor, owner: str, store: Store) -> None:
    """`petstore users unlock` (D36) lifts the wait at once: the user's new throttle epoch
    is the one the sign-in asks the throttle about, so the counts before it no longer
    count. The page that refused kept the name typed."""
    for _ in range(5):
        visitor.sign_in(owner, "wrong password!")
    refused = visitor.sign_in(owner, GOOD)
    _assert_page(refused, 429, "Too many failed sign-ins")
    assert 'name="name" value="owner"' in refused.text
    accounts.unlock(store, owner)
    signed = visitor.sign_in(owner, GOOD)
    assert signed.status_code == 303 and signed.headers["location"] == "/console/"


def test_a_name_no_user_has_is_throttled_and_audited_under_no_user(visitor: Visitor,
                                                                    store: Store) -> None:
    name = "no-such-user-" + "x" * 60  # past the 64 characters the audit line keeps
    for _ in range(5):
        _assert_page(visitor.sign_in(name, "wrong password!"), 200, "Sign in")
    sixth = visitor.sign_in(name, "wrong password!")
    _assert_page(sixth, 429, "Too many failed sign-ins")
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.address, entry.action, entry.detail) == (
        None, "testclient", "sign-in refused", f"throttled: {name[:64]}")

def test_the_current_password_on_the_password_page_is_throttled(signed_in: Visitor,
                                                               store: Store) -> None:
    signed_in.get("/console/account/password")
    new = "a new phrase for the shop 9"
    for _ in range(5):
        wrong = signed_in.post("/console/account/password", {
            "current": "not the password", "new": new, "repeat": new})
        _assert_page(wrong, 200, "The current password is not right.")
    sixth = signed_in.post("/console/account/password", {"current": GOOD, "new": new,
                                                         "repeat": new})
    _assert_page(sixth, 429, "Too many wrong passwords for this name from this address")
    assert int(sixth.headers["retry-after"]) > 14 * 60
    refusal = store.audit_entries(1)[0]
    assert (refusal.action, refusal.detail) == ("password change refused", "throttled")
    assert accounts.sign_in(store, "owner", GOOD, None).name == "owner"  # unchanged


def test_a_new_password_the_rules_refuse_says_why_and_is_audited(signed_in: Visitor,
                                                                 store: Store) -> None:
    signed_in.get("/console/account/password")
    for weak, why in (("qwertyuiopas", "too easy to guess"),
                      ("owner owner owner", "your name or the shop&#39;s"),
                      ("Pet Store Orders", "your name or the shop&#39;s")):
        refused = signed_in.post("/console/account/password", {
            "current": GOOD, "new": weak, "repeat": weak})
        _assert_page(refused, 200, why)
        entry = store.audit_entries(1)[0]
        assert (entry.user_name, entry.action) == ("owner", "new password refused")


@pytest.mark.parametrize("host", ["attacker.rebind.example", "attacker.rebind.example:8080",
                                  "127.0.0.2", "localhost.evil.example", "[::2]:8080",
                                  "testserver@evil.example", ""])
def test_a_host_outside_the_console_hosts_is_refused_before_anything(
        visitor: Visitor, owner: str, store: Store, host: str) -> None:
    """DNS rebinding (D36): a page of another site whose name now points at the machine
    is, to the browser, of the same origin as the console; its Host tells it apart."""
    before = store.audit_entries(1)
    foreign = {"Host": host, "Origin": f"http://{host}", "Sec-Fetch-Site": "same-origin"}
    for path in ("/console/", "/console/sign-in", "/console/static/console.css",
                 "/console/nowhere"):
        refused = visitor.client.get(path, headers=foreign, follow_redirects=False)
        _assert_page(refused, 400, "does not answer at this name")
        assert "set-cookie" not in refused.headers
    visitor.get("/console/sign-in")  # a form and its cookie, from the right host
    posted = visitor.post("/console/sign-in", {"name": owner, "password": GOOD},
                          headers=foreign)
    _assert_page(posted, 400, "PETSTORE_CONSOLE_HOSTS")
    assert "set-cookie" not in posted.headers
    assert store.audit_entries(1) == before  # nothing tried, nothing counted


def test_the_console_hosts_match_any_port_and_any_case(visitor: Visitor) -> None:
    for host in (HOST, f"{HOST}:8443", "TESTSERVER", "localhost:1", "localhost."):
        answer = visitor.client.get("/console/sign-in", headers={"Host": host})
        assert answer.status_code == 200, host


def test_an_address_outside_the_allow_list_is_refused(settings: Settings, store: Store,
                                                      owner: str) -> None:
    # Loopback by default; the test client's address is "testclient".
    with create_app(settings.replace(console_hosts=HOST)).test_client() as client:
        for path in ("/console/", "/console/sign-in", "/console/static/console.css",
                     "/console/nowhere"):
            _assert_page(client.get(path, follow_redirects=False), 403,
                         "does not answer this address")
        posted = client.post("/console/sign-in", data={"name": owner, "password": GOOD},
                             headers={"Origin": ORIGIN}, follow_redirects=False)
        assert posted.status_code == 403
    assert store.audit_entries(1)[0].action != "signed in (password)"



def test_an_api_key_opens_nothing_and_no_quota_counts(visitor: Visitor, store: Store) -> None:
    key = make_key(store, per_minute=None)
    for _ in range(3):
        answer = visitor.get("/console/", headers={"Authorization": f"Bearer {key}"})
        assert answer.status_code == 303 and answer.headers["location"] == "/console/sign-in"
        assert "x-ratelimit-limit" not in answer.headers
    api = visitor.client.get("/v2/store/orders/1", headers={"Authorization": f"Bearer {key}"})
    assert int(api.headers["x-ratelimit-remaining"]) == int(api.headers["x-ratelimit-limit"]) - 1


def test_errors_are_pages_not_error_objects(signed_in: Visitor) -> None:
    _assert_page(signed_in.get("/console/nowhere"), 404, "No such page")
    _assert_page(signed_in.get("/console/orders/1/ship"), 404, "No such page")
    _assert_page(signed_in.get("/console/orders?cursor=forged"), 400, "first page")
    _assert_page(signed_in.client.put("/console/orders", headers={"Origin": ORIGIN}), 404,
                 "No such page")
    bare = signed_in.get("/console")
    assert bare.status_code == 308 and bare.headers["location"] == "/console/"


def test_a_required_second_factor_is_enrolled_before_the_console_opens(
        console_settings: Settings, store: Store, owner: str) -> None:
    with create_app(console_settings.replace(console_require_totp=True)).test_client() as c:
        visitor = Visitor(c)
        signed = visitor.sign_in(owner, GOOD)
        assert signed.headers["location"] == "/console/account/second-factor"
        assert visitor.get("/console/orders").headers["location"] == (
            "/console/account/second-factor")
        _assert_page(visitor.follow(signed), 200, "asks every user")


def test_over_https_the_cookies_are_secure_and_host_only(app: object, owner: str) -> None:
    """Over HTTPS (directly, or through a proxy PETSTORE_FORWARDED_ALLOW_IPS trusts, which
    is how the request's scheme is taken), the cookies are Secure with the __Host- prefix,
    and the browser is told to keep to HTTPS."""
    with app.test_client(base_url="https://testserver") as client:  # type: ignore[attr-defined]
        visitor = Visitor(client)
        form = visitor.get("/console/sign-in")
        assert form.headers["strict-transport-security"] == "max-age=31536000"
        assert form.headers["set-cookie"].startswith("__Host-petstore-console-form=")
        signed = visitor.post("/console/sign-in", {"name": owner, "password": GOOD},
                              headers={"Origin": "https://testserver"})
        cookie = signed.headers["set-cookie"]
        assert cookie.startswith("__Host-petstore-console=")
        for part in ("Secure", "HttpOnly", "Path=/", "SameSite=Strict"):
            assert part in cookie
        assert "Domain" not in cookie
        # The plain-HTTP origin is another origin: its form is refused.
        for headers in ({"Origin": ORIGIN, "Sec-Fetch-Site": "same-site"},
                        {"Origin": ORIGIN, "Sec-Fetch-Site": ""}):
            refused = visitor.post("/console/sign-out", headers=headers)
            assert refused.status_code == 403
        client.headers.pop("Sec-Fetch-Site", None)
        plain = client.post("/console/sign-out", data={"token": visitor.token()},
                            headers={"Origin": ORIGIN}, follow_redirects=False)
        assert plain.status_code == 403


def test_the_audit_log_shows_who_did_what_from_where(signed_in: Visitor, store: Store) -> None:
    signed_in.get("/console/orders")
    signed_in.post("/console/orders/1/cancel", {"version": str(store.order_version(1))})
    accounts.record(store, None, "10.0.0.7", "sign-in failed", "<script>x</script>")
    page = signed_in.get("/console/audit").text
    rows = re.findall(r"<tr><td><time [^>]+>[^<]+</time></td><td>([^<]+)</td><td>([^<]+)</td>"
                      r"<td>([^<]+)</td><td>([^<]*)</td></tr>", page)
    assert rows[:3] == [("-", "10.0.0.7", "sign-in failed", "&lt;script&gt;x&lt;/script&gt;"),
                        ("owner", "testclient", "cancel", "order 1"),
                        ("owner", "testclient", "signed in (password)", "")]
