"""A session's stage and its timeouts, held by the guard (D35, app/console/guard.py) for
every page and form, as a visitor sees them: a session that still owes a new password
opens no other page and its forms change nothing; a session idle past
PETSTORE_CONSOLE_IDLE_TIMEOUT, or older than PETSTORE_CONSOLE_ABSOLUTE_TIMEOUT, is sent to
the sign-in page and its forms change nothing. Time is reached through the session as the
store keeps it: opened (sessions.open_session takes its moment) or last seen
(touch_console_session) that many seconds ago, as if the visitor had waited."""

from __future__ import annotations

import time

import pytest

from app.core.config import Settings
from app.core.storage import Store
from app.core.users import accounts, sessions
from app.web import PetstoreApp
from tests.console.conftest import GOOD, Visitor

REFUSED = "or it has expired. Open the page again and send it from there."  # CrossSite


def _cancel_refused(visitor: Visitor, store: Store, token: str) -> None:
    """The form that cancels order 1, sent with the session's token, is refused and the
    order stays pending."""
    version = str(store.order_version(1))
    refused = visitor.post("/console/orders/1/cancel", {"version": version}, token=token)
    assert refused.status_code == 403, (refused.status_code, refused.text[:300])
    assert REFUSED in refused.text
    assert store.get_order(1)["status"] == "pending"  # type: ignore[index]
    assert "cancel" not in [e.action for e in store.audit_entries(5)]


def test_a_session_that_owes_a_new_password_changes_nothing(visitor: Visitor,
                                                            store: Store) -> None:
    _, one_time = accounts.add(store, "ann")
    visitor.follow(visitor.sign_in("ann", one_time))
    assert "Choose your password" in visitor.page
    # The password page's form carries the session's own token: a form of the board sent
    # with it is still refused, for the stage.
    _cancel_refused(visitor, store, visitor.token())
    held = visitor.get("/console/orders")
    assert held.status_code == 303 and held.headers["location"] == "/console/account/password"


def _session(visitor: Visitor, store: Store, opened_ago: float,
             seen_ago: float) -> sessions.Opened:
    """An open session of the owner, opened and last seen that many seconds ago, as the
    visitor's cookie."""
    user = store.console_user("owner")
    assert user is not None
    now = time.time()
    opened = sessions.open_session(store, user, sessions.OPEN, now - opened_ago)
    store.touch_console_session(opened.session.digest, now - seen_ago)
    visitor.client.cookies.set("petstore-console", opened.session_id)
    return opened


@pytest.mark.parametrize(("opened_ago", "seen_ago"), [
    pytest.param(lambda s: s.console_idle_timeout + 5, lambda s: s.console_idle_timeout + 5,
                 id="idle"),
    pytest.param(lambda s: s.console_absolute_timeout + 5, lambda s: 0, id="absolute"),
])
def test_a_session_past_its_timeout_is_sent_to_sign_in_and_changes_nothing(
        visitor: Visitor, store: Store, owner: str, console_settings: Settings,
        opened_ago: object, seen_ago: object) -> None:
    opened = _session(visitor, store, opened_ago(console_settings),  # type: ignore[operator]
                      seen_ago(console_settings))  # type: ignore[operator]
    _cancel_refused(visitor, store, opened.session.token)
    assert store.console_session(opened.session.digest) is None  # it ended
    opened = _session(visitor, store, opened_ago(console_settings),  # type: ignore[operator]
                      seen_ago(console_settings))  # type: ignore[operator]
    page = visitor.get("/console/orders")
    assert page.status_code == 303
    assert page.headers["location"] == "/console/sign-in?next=/console/orders"
    assert "Sign in" in visitor.follow(page).text


def test_a_session_just_within_its_timeouts_opens_the_console(
        visitor: Visitor, store: Store, owner: str, console_settings: Settings) -> None:
    opened = _session(visitor, store, console_settings.console_absolute_timeout - 30,
                      console_settings.console_idle_timeout - 30)
    assert "Pending orders" in visitor.get("/console/").text
    version = str(store.order_version(1))
    cancelled = visitor.post("/console/orders/1/cancel", {"version": version},
                             token=opened.session.token)
    assert "Order 1 is cancelled." in visitor.follow(cancelled).text
    assert store.get_order(1)["status"] == "cancelled"  # type: ignore[index]


def test_the_consoles_own_files_are_served_before_any_session(visitor: Visitor) -> None:
    # The sign-in page needs its stylesheet and script before there is a session.
    for path, kind in (("/console/static/console.css", "text/css"),
                       ("/console/static/forms.js", "text/javascript")):
        served = visitor.get(path)
        assert served.status_code == 200, (path, served.status_code)
        assert served.headers["content-type"].startswith(kind)


@pytest.mark.parametrize("base", ["http://testserver", "https://testserver"])
def test_signing_out_clears_the_cookie_as_it_was_set(app: PetstoreApp, owner: str,
                                                     base: str) -> None:
    """The browser drops a cookie only when told with its own name and path: over HTTPS
    the __Host- one, Secure; HttpOnly and SameSite=Strict as when it was set (D35)."""
    secure = base.startswith("https")
    name = ("__Host-" if secure else "") + "petstore-console"
    with app.test_client(base_url=base) as client:
        visitor = Visitor(client)
        visitor.get("/console/sign-in")
        signed = visitor.post("/console/sign-in", {"name": owner, "password": GOOD},
                              headers={"Origin": base})
        visitor.follow(signed)
        out = visitor.post("/console/sign-out", headers={"Origin": base})
        assert out.headers["location"] == "/console/sign-in?out=1"
        cleared = [c for c in out.headers.get_list("set-cookie")
                   if c.startswith(f"{name}=")]
        assert len(cleared) == 1, out.headers.get_list("set-cookie")
        parts = {part.strip() for part in cleared[0].split(";")}
        assert f"{name}=" in parts and "Max-Age=0" in parts
        assert {"HttpOnly", "Path=/", "SameSite=Strict"} <= parts
        assert ("Secure" in parts) is secure and not any(p.startswith("Domain") for p in parts)


def test_a_sign_in_forgets_the_timed_out_sessions_and_no_other(
        app: PetstoreApp, visitor: Visitor, store: Store, owner: str,
        console_settings: Settings) -> None:
    user = store.console_user(owner)
    assert user is not None
    now = time.time()
    idle = sessions.open_session(store, user, sessions.OPEN,
                                 now - console_settings.console_idle_timeout - 100)
    old = sessions.open_session(store, user, sessions.OPEN,
                                now - console_settings.console_absolute_timeout - 100)
    store.touch_console_session(old.session.digest, now)
    live = _session(visitor, store, 600, 30)  # the owner, in the console in one browser
    # ...signs in in another.
    other = Visitor(app.test_client())
    other.follow(other.sign_in(owner, GOOD))
    assert "Pending orders" in other.page
    assert store.console_session(idle.session.digest) is None
    assert store.console_session(old.session.digest) is None
    assert store.console_session(live.session.digest) is not None
    assert "Pending orders" in visitor.get("/console/").text
