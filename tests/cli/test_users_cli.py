"""`petstore users` (D35, D36, D38): a user is added with a role (the first an owner, later
ones staff, unless --role says) and a one-time password printed alone on standard output,
listed, disabled (its sessions end; never the last enabled owner), enabled, given a new
one-time password, and unlocked after failed sign-ins, saying what it lifted; the database
keeps only an argon2id hash."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.core.config import Settings
from app.core.errors import SignInFailed
from app.core.storage import open_store
from app.core.users import accounts, recovery, sessions
from app.core.users.throttle import SignInThrottle
from tests.cli.test_cli import run


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def listed(db: Path) -> list[dict]:
    return json.loads(run(db, "users", "list", "--json").stdout)


def test_a_user_is_added_with_a_one_time_password_shown_once(db: Path) -> None:
    added = run(db, "users", "add", "ann")
    assert added.exit_code == 0, added.output
    one_time = added.stdout.strip()
    assert len(one_time) == 20 and "\n" not in one_time
    assert "shown only this once" in added.stderr
    with sqlite3.connect(db) as conn:
        stored = conn.execute("SELECT password_hash FROM console_users").fetchone()[0]
    assert stored.startswith("$argon2id$") and one_time not in stored
    store = open_store(Settings(database=str(db)))
    assert accounts.sign_in(store, "ann", one_time, None).must_change_password
    again = run(db, "users", "add", "ann")
    assert again.exit_code == 1 and "exists already" in again.output
    bad = run(db, "users", "add", "<ann>")
    assert bad.exit_code == 1 and "letters, digits" in bad.output


def test_users_are_listed_and_disabled_and_their_sessions_end(db: Path) -> None:
    assert "No console users yet" in run(db, "users", "list").output
    run(db, "users", "add", "ann")
    run(db, "users", "add", "bob")
    store = open_store(Settings(database=str(db)))
    bob = store.console_user("bob")
    assert bob is not None
    opened = sessions.open_session(store, bob, sessions.OPEN, 1000.0)
    disabled = run(db, "users", "disable", "bob")
    assert disabled.exit_code == 0 and "disabled since" in disabled.output
    assert store.console_session(opened.session.digest) is None
    rows = {row["name"]: row for row in listed(db)}
    assert rows["bob"]["disabled_at"] and not rows["ann"]["disabled_at"]
    assert rows["ann"]["must_change_password"] and not rows["ann"]["second_factor"]
    table = run(db, "users", "list").stdout.splitlines()
    assert table[0].split() == ["NAME", "ROLE", "ADDED", "LAST", "SIGN-IN", "TOTP", "STATUS"]
    assert "disabled" in table[2] and table[2].split()[:2] == ["bob", "staff"]
    assert run(db, "users", "enable", "bob").exit_code == 0
    assert not {row["name"]: row for row in listed(db)}["bob"]["disabled_at"]
    missing = run(db, "users", "disable", "carol")
    assert missing.exit_code == 1 and "No console user is named carol" in missing.output


def test_the_first_user_is_an_owner_and_later_ones_staff_unless_told(db: Path) -> None:
    first = run(db, "users", "add", "ann")
    assert first.exit_code == 0 and "Added the console user ann (owner)." in first.stderr
    assert "(staff)" in run(db, "users", "add", "bob").stderr
    assert "(owner)" in run(db, "users", "add", "kim", "--role", "owner").stderr
    assert "(staff)" in run(db, "users", "add", "sam", "--role", "staff").stderr
    bad = run(db, "users", "add", "eve", "--role", "admin")
    assert bad.exit_code == 2 and "'admin' is not one of 'owner', 'staff'" in bad.output
    assert {row["name"]: row["role"] for row in listed(db)} == {
        "ann": "owner", "bob": "staff", "kim": "owner", "sam": "staff"}
    helped = " ".join(run(db, "users", "add", "--help").output.split())
    assert "--role [owner|staff]" in helped
    assert "Default: owner for the first user of the store, staff for every later one" in (
        helped)
    assert "the first one added is an owner" in " ".join(run(db, "users", "--help").output.split())


def test_a_first_user_may_be_made_staff(tmp_path: Path) -> None:
    db = tmp_path / "staff-first.db"
    assert "(staff)" in run(db, "users", "add", "sam", "--role", "staff").stderr
    assert "(owner)" in run(db, "users", "add", "ann", "--role", "owner").stderr


def test_the_last_enabled_owner_is_not_disabled(db: Path) -> None:
    run(db, "users", "add", "ann")
    run(db, "users", "add", "kim", "--role", "owner")
    assert run(db, "users", "disable", "kim").exit_code == 0
    refused = run(db, "users", "disable", "ann")
    assert refused.exit_code == 1
    assert "ann is the last enabled owner: enable or add another owner first" in (
        refused.output)
    assert not {row["name"]: row for row in listed(db)}["ann"]["disabled_at"]
    assert run(db, "users", "enable", "kim").exit_code == 0
    assert run(db, "users", "disable", "ann").exit_code == 0


def test_a_reset_gives_a_new_one_time_password_and_ends_sessions(db: Path) -> None:
    first = run(db, "users", "add", "ann").stdout.strip()
    store = open_store(Settings(database=str(db)))
    ann = store.console_user("ann")
    assert ann is not None
    opened = sessions.open_session(store, ann, sessions.OPEN, 1000.0)
    reset = run(db, "users", "reset-password", "ann")
    assert reset.exit_code == 0
    second = reset.stdout.strip()
    assert second != first and store.console_session(opened.session.digest) is None
    assert accounts.sign_in(store, "ann", second, None).must_change_password
    store.update_console_user(ann.id, {"totp_secret": "A" * 32})
    run(db, "users", "reset-password", "ann")
    assert store.console_user("ann").totp_secret == "A" * 32  # type: ignore[union-attr]
    recovery.replace(store, ann, None, "second factor enrolled")
    lost = run(db, "users", "reset-password", "ann", "--second-factor")
    assert lost.exit_code == 0 and store.console_user("ann").totp_secret is None  # type: ignore[union-attr]
    assert store.recovery_codes_left(ann.id) == 0  # its recovery codes go with it (D38)


def test_unlock_lifts_the_locks_of_a_name_and_says_what_they_were(db: Path) -> None:
    run(db, "users", "add", "ann")
    settings = Settings(database=str(db))
    store = open_store(settings)
    throttle = SignInThrottle(settings)  # a worker's, with the counters it keeps
    epoch = accounts.throttle_epoch(store, "ann")
    for address in ["203.0.113.9"] * 5 + ["::1", "0:0:0:0:0:0:0:1"]:
        with pytest.raises(SignInFailed):
            accounts.sign_in(store, "ann", "a guess at it", address)
        throttle.failed("ann", address, epoch)
    assert throttle.wait("ann", "203.0.113.9", epoch) > 0
    unlocked = run(db, "users", "unlock", "ann")
    assert unlocked.exit_code == 0, unlocked.output
    assert "Unlocked the console user ann: 7 failed sign-ins since" in unlocked.stderr
    assert [line.split() for line in unlocked.stdout.splitlines()] == [
        ["FROM", "FAILED", "LOCKED"], ["203.0.113.9", "5", "yes"], ["::/64", "2", "no"]]
    # The worker reads the new epoch from the database, and counts from zero.
    epoch = accounts.throttle_epoch(store, "ann")
    assert throttle.wait("ann", "203.0.113.9", epoch) == 0
    again = run(db, "users", "unlock", "ann")
    assert again.exit_code == 0 and "nothing was locked" in again.stderr
    missing = run(db, "users", "unlock", "carol")
    assert missing.exit_code == 1 and "No console user is named carol" in missing.output
