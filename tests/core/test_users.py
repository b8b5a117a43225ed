"""The console's users and signing in, as rules of the core (D35, D36): the password rules
(zxcvbn's score, the user's and the shop's names), argon2id, one-time passwords, signing in
alike for every failure and audited under a known name, sessions and their timeouts, the
synchronizer token, TOTP codes used once, the second factor changed only with the current
code, recovery codes (D38) kept as digests and spent once, the sign-in throttle by name and
address with addresses as counted, and unlocking."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import time
from typing import Any

import pyotp
import pytest
from argon2 import PasswordHasher

from app.core.config import Settings
from app.core.errors import (
    DuplicateUser,
    InvalidRole,
    InvalidUserName,
    PasswordRefused,
    SignInFailed,
    UserNotFound,
    UserRefused,
    WrongCode,
    WrongRecoveryCode,
)
from app.core.orders import format_unix_time
from app.core.storage import Store
from app.core.users import accounts, passwords, recovery, sessions
from app.core.users.throttle import SignInThrottle, counted_address
from tests.support import wait_until

GOOD = "correct horse battery staple 42"


@pytest.mark.parametrize(("password", "rule"), [
    ("short pass", "at least 12"),
    ("x" * 129, "at most 128"),
    ("annabel.example", "name"),
    ("ANNABEL.EXAMPLE ", "name"),
    ("password1234", "common"),
    ("  Password1234 ", "common"),
    # D36: the guessable passwords, each with a sentence that says why.
    ("aaaaaaaaaaaa", 'too easy to guess. Repeats like "aaa"'),
    ("123456789012", "too easy to guess. This is similar to a commonly used password."),
    ("qwertyuiopas", "too easy to guess"),
    ("passwordpassword", "too easy to guess. Repeats like"),
    ("annabel annabel annabel", "your name or the shop's"),
    ("Annabel.Example.Annabel", "your name or the shop's"),
    ("Pet Store Orders", "your name or the shop's"),
    ("petstore-orders!", "your name or the shop's"),
    ("pet store orders 1", "too easy to guess"),
    ("x" * 128, "too easy to guess"),  # zxcvbn rates its first 72 characters
])
def test_a_new_password_is_refused_by_the_rule_it_breaks(password: str, rule: str) -> None:
    with pytest.raises(PasswordRefused, match=rule) as refusal:
        passwords.check_new(password, "annabel.example")
    # Sentences, each ended once (zxcvbn's warnings end with a full stop of their own).
    assert refusal.value.message.endswith(".") and ".." not in refusal.value.message


@pytest.mark.parametrize("password", [GOOD, "a lantern on the harbour wall 7",
                                      "annabel-petstore-2026x", "Orders of tortoises arrive"])
def test_a_password_hard_to_guess_is_taken(password: str) -> None:
    assert passwords.check_new(password, "annabel") == password


def test_any_unicode_is_a_password_and_is_counted_after_nfkc() -> None:
    assert passwords.check_new("ünïcødé 🐈 pässwörd", "ann") == "ünïcødé 🐈 pässwörd"
    # Twelve full-width letters are twelve letters, and the same password as the ASCII ones.
    wide = "".join(chr(ord(letter) + 0xFEE0) for letter in "passphrasexyz")  # full width
    assert passwords.check_new(wide, "ann") == "passphrasexyz"
    assert passwords.verify(passwords.hash_password("passphrasexyz"), wide)


def test_a_hash_is_argon2id_and_verifies_only_its_password() -> None:
    hashed = passwords.hash_password(GOOD)
    assert hashed.startswith("$argon2id$") and GOOD not in hashed
    assert passwords.verify(hashed, GOOD)
    assert not passwords.verify(hashed, GOOD + "!")
    assert not passwords.verify("not a hash", GOOD)
    assert not passwords.needs_rehash(hashed)


def test_one_time_passwords_pass_the_rules_and_differ() -> None:
    made = {passwords.one_time_password() for _ in range(20)}
    assert len(made) == 20
    for one in made:
        assert passwords.check_new(one, "ann") == one


def test_a_user_is_added_with_a_one_time_password_that_signs_in(store: Store) -> None:
    user, one_time = accounts.add(store, "ann")
    assert user.must_change_password
    assert accounts.sign_in(store, "ann", one_time, "127.0.0.1").name == "ann"
    with pytest.raises(DuplicateUser):
        accounts.add(store, "ann")
    with pytest.raises(InvalidUserName):
        accounts.add(store, "<b>ann</b>")


def test_every_failed_sign_in_reads_alike_and_is_audited(store: Store) -> None:
    _, one_time = accounts.add(store, "ann")
    accounts.add(store, "bob")
    accounts.disable(store, "bob")
    messages = set()
    for name, password in (("ann", "wrong password!"), ("nobody", one_time),
                           ("bob", one_time), ("<script>", "x")):
        with pytest.raises(SignInFailed) as failed:
            accounts.sign_in(store, name, password, "10.0.0.9")
        messages.add(failed.value.message)
    assert len(messages) == 1
    # A known name's failures are under its name (D36), so that filtering the log by user
    # finds the guesses at it; a name that is no user's is only the detail.
    actions = [(e.user_name, e.action, e.detail, e.address) for e in store.audit_entries(4)]
    assert actions == [(None, "sign-in failed", "<script>", "10.0.0.9"),
                       ("bob", "sign-in failed", "disabled user", "10.0.0.9"),
                       (None, "sign-in failed", "nobody", "10.0.0.9"),
                       ("ann", "sign-in failed", "wrong password", "10.0.0.9")]


def test_changing_the_password_checks_both_and_ends_every_session(store: Store) -> None:
    user, one_time = accounts.add(store, "ann")
    first = sessions.open_session(store, user, sessions.CHANGE, 1000.0)
    second = sessions.open_session(store, user, sessions.OPEN, 1000.0)
    with pytest.raises(SignInFailed):
        accounts.change_password(store, user, "not the one", GOOD, "192.0.2.1")
    with pytest.raises(PasswordRefused, match="common"):
        accounts.change_password(store, user, one_time, "password1234", "192.0.2.2")
    with pytest.raises(PasswordRefused, match="other than the current"):
        accounts.change_password(store, user, one_time, one_time, "192.0.2.3")
    # Every refusal is in the audit log (D36), the rule's sentence with it.
    assert [(e.user_name, e.address, e.action, e.detail.split(";")[0])
            for e in store.audit_entries(3)] == [
        ("ann", "192.0.2.3", "new password refused",
         "Choose a password other than the current one."),
        ("ann", "192.0.2.2", "new password refused",
         "That password is on the list of common passwords, which are the first that "
         "attackers try"),
        ("ann", "192.0.2.1", "password change refused", "wrong current password")]
    changed = accounts.change_password(store, user, one_time, GOOD, "192.0.2.4")
    assert not changed.must_change_password
    assert _audit(store, 1) == [("ann", "192.0.2.4", "password changed", "")]
    assert store.console_session(first.session.digest) is None
    assert store.console_session(second.session.digest) is None
    assert accounts.sign_in(store, "ann", GOOD, None).name == "ann"
    with pytest.raises(SignInFailed):
        accounts.sign_in(store, "ann", one_time, None)


def test_reset_and_disable_end_the_users_sessions(store: Store) -> None:
    user, _ = accounts.add(store, "ann", accounts.STAFF)  # an owner would be the last
    opened = sessions.open_session(store, user, sessions.OPEN, 1000.0)
    one_time = accounts.reset_password(store, "ann")
    assert store.console_session(opened.session.digest) is None
    assert accounts.sign_in(store, "ann", one_time, None).must_change_password
    opened = sessions.open_session(store, user, sessions.OPEN, 1000.0)
    accounts.disable(store, "ann")
    assert sessions.find(store, opened.session_id, 1001.0, 1800, 43200) is None
    with pytest.raises(UserNotFound):
        accounts.disable(store, "nobody")


def test_the_first_user_is_an_owner_and_no_rule_leaves_the_shop_without_one(
        store: Store) -> None:
    ann, _ = accounts.add(store, "ann")
    bob, _ = accounts.add(store, "bob")
    kim, _ = accounts.add(store, "kim", accounts.OWNER)
    assert (ann.role, bob.role, kim.role) == ("owner", "staff", "owner")
    with pytest.raises(InvalidRole):
        accounts.add(store, "eve", "admin")
    assert store.console_user("eve") is None
    with pytest.raises(UserRefused, match="your own account"):
        accounts.disable(store, "ann", by="ann")
    assert accounts.disable(store, "kim", by="ann").disabled_at is not None
    with pytest.raises(UserRefused, match="ann is the last enabled owner"):
        accounts.disable(store, "ann")  # the CLI's: no one acting, the rule holds
    assert store.console_user("ann").active  # type: ignore[union-attr]
    refusals = [(e.user_name, e.action, e.detail)
                for e in store.audit_entries(10, action="disable user refused")]
    assert refusals == [(None, "disable user refused", "ann: the last enabled owner"),
                        ("ann", "disable user refused", "ann: oneself")]


def test_an_owner_resets_another_users_second_factor_not_their_own(store: Store) -> None:
    accounts.add(store, "ann")
    bob, _ = accounts.add(store, "bob")
    store.update_console_user(bob.id, {"totp_secret": "B" * 32, "totp_last_step": 7})
    opened = sessions.open_session(store, bob, sessions.OPEN, 1000.0)
    with pytest.raises(UserRefused, match="Second factor page"):
        accounts.reset_second_factor(store, "ann", "ann", None)
    reset = accounts.reset_second_factor(store, "bob", "ann", "203.0.113.9")
    assert (reset.totp_secret, reset.totp_last_step) == (None, None)
    assert store.console_session(opened.session.digest) is None
    entry = store.audit_entries(1)[0]
    assert (entry.user_name, entry.address, entry.action, entry.detail) == (
        "ann", "203.0.113.9", "second factor reset", "bob")
    with pytest.raises(UserRefused, match="bob has no second factor"):
        accounts.reset_second_factor(store, "bob", "ann", None)


def test_a_session_is_kept_as_a_digest_and_ends_idle_or_old(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    opened = sessions.open_session(store, user, sessions.OPEN, 1000.0)
    assert opened.session.digest == sessions.digest(opened.session_id) != opened.session_id
    assert len(opened.session_id) >= 43  # 256 bits, base64
    found = sessions.find(store, opened.session_id, 1000.0 + 1799, 1800, 43200)
    assert found is not None and found[1].name == "ann"
    # Seen at 2799, then at 4500: 1,900 s later it has been idle too long.
    assert sessions.find(store, opened.session_id, 4500.0, 1800, 43200) is not None
    assert sessions.find(store, opened.session_id, 6400.0, 1800, 43200) is None
    assert store.console_session(opened.session.digest) is None  # ended, not only refused
    old = sessions.open_session(store, user, sessions.OPEN, 1000.0)
    for now in range(2000, 44000, 1500):
        assert sessions.find(store, old.session_id, float(now), 1800, 43200) is not None
    assert sessions.find(store, old.session_id, 44300.0, 1800, 43200) is None
    assert sessions.find(store, "no such session", 1000.0, 1800, 43200) is None



def test_a_sessions_last_sight_is_written_once_a_minute_and_it_ends_only_past_a_timeout(
        store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    opened = sessions.open_session(store, user, sessions.OPEN, 1000.0)

    def seen_at() -> float:
        found = store.console_session(opened.session.digest)
        assert found is not None
        return found[0].seen_at

    # Within a minute of the last write, the page is served and nothing is written...
    assert sessions.find(store, opened.session_id, 1000.0 + 59.5, 1800, 43200) is not None
    assert seen_at() == 1000.0
    # ...a minute on, the sight is written, and the idle timeout counts from it.
    assert sessions.find(store, opened.session_id, 1000.0 + 60, 1800, 43200) is not None
    assert seen_at() == 1060.0
    assert sessions.find(store, opened.session_id, 1060.0 + 1800, 1800, 43200) is not None
    # Idle exactly the timeout is still within it; a moment past it, the session ends.
    assert sessions.find(store, opened.session_id, 2860.0 + 1800, 1800, 43200) is not None
    assert sessions.find(store, opened.session_id, 4660.0 + 1800.5, 1800, 43200) is None
    # So with the absolute timeout, counted from the sign-in.
    old = sessions.open_session(store, user, sessions.OPEN, 1000.0)
    store.touch_console_session(old.session.digest, 44000.0)
    assert sessions.find(store, old.session_id, 1000.0 + 43200, 1800, 43200) is not None
    assert sessions.find(store, old.session_id, 1000.0 + 43200.5, 1800, 43200) is None

def test_the_synchronizer_token_matches_only_itself(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    session = sessions.open_session(store, user, sessions.OPEN, 1000.0).session
    assert sessions.token_matches(session, session.token)
    assert not sessions.token_matches(session, session.token[:-1])
    assert not sessions.token_matches(session, None)
    other = sessions.open_session(store, user, sessions.OPEN, 1000.0).session
    assert not sessions.token_matches(session, other.token)


def test_each_step_of_signing_in_gives_a_new_session(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    first = sessions.open_session(store, user, sessions.CODE, 1000.0)
    second = sessions.open_session(store, user, sessions.OPEN, 1100.0, first.session)
    assert store.console_session(first.session.digest) is None
    assert second.session.created_at == 1000.0  # the absolute timeout counts from the first
    assert second.session.token != first.session.token


def test_what_a_user_still_owes_after_the_password(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    assert sessions.stage_for(user, require_totp=False) == sessions.CHANGE
    done = store.update_console_user(user.id, {"must_change_password": False})
    assert done is not None
    assert sessions.stage_for(done, require_totp=False) == sessions.OPEN
    assert sessions.stage_for(done, require_totp=True) == sessions.ENROL
    # Once the one-time password is changed, a second factor is offered; required, it is
    # owed, and offered or not, a user who has one owes nothing more.
    assert sessions.stage_for(done, require_totp=False, offer_totp=True) == sessions.OFFER
    assert sessions.stage_for(done, require_totp=True, offer_totp=True) == sessions.ENROL
    with_code = store.update_console_user(user.id, {"totp_secret": pyotp.random_base32(32)})
    assert with_code is not None
    assert sessions.stage_for(with_code, require_totp=True) == sessions.CODE
    assert sessions.stage_for(with_code, require_totp=True, code_given=True) == sessions.OPEN
    assert sessions.stage_for(with_code, require_totp=False, code_given=True,
                              offer_totp=True) == sessions.OPEN


def test_a_totp_code_is_accepted_once_and_only_near_its_time(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    secret = accounts.new_totp_secret()
    now = 1_800_000_000.0
    totp = pyotp.TOTP(secret)
    with pytest.raises(WrongCode):
        accounts.enrol_totp(store, user, secret, "000000" if totp.at(now) != "000000"
                            else "111111", None, now)
    enrolled = accounts.enrol_totp(store, user, secret, totp.at(now), None, now)
    assert enrolled.totp_secret == secret
    assert accounts.totp_uri(secret, "ann").startswith("otpauth://totp/")
    with pytest.raises(WrongCode):  # the code that enrolled it, again
        accounts.check_code(store, enrolled, totp.at(now), None, now)
    accounts.check_code(store, enrolled, totp.at(now + 30), None, now + 30)
    with pytest.raises(WrongCode):  # a code of two steps ago
        accounts.check_code(store, enrolled, totp.at(now - 30), None, now + 90)
    accounts.check_code(store, enrolled, " " + totp.at(now + 90)[:3] + " "
                        + totp.at(now + 90)[3:], None, now + 90)


def test_the_sixth_failure_of_a_name_from_an_address_waits_there_only(
        settings: Settings) -> None:
    throttle = SignInThrottle(settings)
    for _ in range(5):
        assert throttle.wait("ann", "10.0.0.1") == 0
        throttle.failed("ann", "10.0.0.1")
    wait = throttle.wait("ann", "10.0.0.1")
    assert 14 * 60 < wait <= 15 * 60
    assert throttle.wait("ANN ", "10.0.0.1") == wait  # the name as typed, in lower case
    # D36: a stranger's failures lock the name from the stranger's address, not the
    # owner's elsewhere, and not another name from the same address.
    assert throttle.wait("ann", "10.0.0.2") == 0
    assert throttle.wait("bob", "10.0.0.1") == 0


def test_the_name_alone_waits_after_many_failures_from_anywhere(settings: Settings) -> None:
    throttle = SignInThrottle(settings, pair_failures=5, name_failures=12)
    for n in range(12):  # credential stuffing: a few guesses from each of many addresses
        address = f"10.0.{n // 3}.{n % 3}"
        assert throttle.wait("ann", address) == 0
        throttle.failed("ann", address)
    assert 14 * 60 < throttle.wait("ann", "192.0.2.77") <= 15 * 60
    assert throttle.wait("bob", "192.0.2.77") == 0


def test_workers_over_redis_count_together_and_an_unlock_lifts_every_count(
        settings: Settings, store: Store, redis_url: str, redis_prefix: str) -> None:
    """Two workers' throttles over the shared Redis (D36): one name's failures from one
    address count together, the right password from elsewhere goes through, and the epoch
    an unlock gives starts every count of the name again."""
    shared = settings.replace(ratelimit_storage=redis_url, ratelimit_key_prefix=redis_prefix)
    one, two = SignInThrottle(shared), SignInThrottle(shared)
    user, _ = accounts.add(store, "ann")
    for worker in (one, two, one, two, one):
        worker.failed("ann", "2001:db8:7::1", user.throttle_epoch)
    assert 14 * 60 < two.wait("ann", "2001:db8:7::2", user.throttle_epoch) <= 15 * 60
    assert two.wait("ann", "203.0.113.1", user.throttle_epoch) == 0
    assert not two.down
    lifted = accounts.unlock(store, "ann")
    assert one.wait("ann", "2001:db8:7::2", lifted.user.throttle_epoch) == 0


@pytest.mark.parametrize(("written", "counted"), [
    ("::1", "::/64"), ("0::1", "::/64"), ("0:0:0:0:0:0:0:1", "::/64"),
    ("::ffff:192.0.2.1", "192.0.2.1"), ("192.0.2.1", "192.0.2.1"),
    ("2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"), ("2001:DB8:1:2:bbbb::9", "2001:db8:1:2::/64"),
    ("testclient", "testclient"), (None, "unknown"),
])
def test_an_address_is_counted_normalised(written: str | None, counted: str) -> None:
    assert counted_address(written) == counted


def test_one_address_written_three_ways_is_one_counter(settings: Settings) -> None:
    throttle = SignInThrottle(settings)
    for written in ("::1", "0::1", "0:0:0:0:0:0:0:1", "::1", "0::1"):
        throttle.failed("ann", written)
    assert throttle.wait("ann", "::1") > 0
    assert throttle.wait("ann", "2001:db8::1") == 0


def test_unlocking_lifts_every_counter_of_the_name_and_says_what_it_lifted(
        settings: Settings, store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    throttle = SignInThrottle(settings, pair_failures=5, name_failures=8)
    for address in ["203.0.113.9"] * 5 + ["2001:db8::1", "2001:db8::2", "198.51.100.4"]:
        with pytest.raises(SignInFailed):
            accounts.sign_in(store, "ann", "not the password", address)
        throttle.failed("ann", address, user.throttle_epoch)
    assert throttle.wait("ann", "192.0.2.1", user.throttle_epoch) > 0  # the name alone
    # A failure older than the throttle's window (15 minutes, by the clock) counts no more.
    store.add_audit_entry(format_unix_time(time.time() - 16 * 60), "ann", "192.0.2.7",
                          "sign-in failed", "wrong password")
    lifted = accounts.unlock(store, "ann")
    assert lifted.failures == {"203.0.113.9": 5, "2001:db8::/64": 2, "198.51.100.4": 1}
    since = dt.datetime.fromisoformat(lifted.since).timestamp()
    assert time.time() - 15 * 60 - 60 < since <= time.time() - 15 * 60
    epoch = lifted.user.throttle_epoch
    assert epoch is not None and epoch != user.throttle_epoch
    assert accounts.throttle_epoch(store, "ann") == epoch
    assert throttle.wait("ann", "203.0.113.9", epoch) == 0
    assert throttle.wait("ann", "192.0.2.1", epoch) == 0
    entry = store.audit_entries(1)[0]
    assert (entry.action, entry.detail) == ("user unlocked",
                                            "ann: 8 failed checks no longer counted")
    # Unlocked again at once: nothing more to lift (the last unlock bounds the count).
    assert accounts.unlock(store, "ann").failures == {}
    with pytest.raises(UserNotFound):
        accounts.unlock(store, "nobody")


def test_a_second_factor_changes_only_with_the_current_code_and_is_audited(
        store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    now = 1_800_000_000.0
    first, second = accounts.new_totp_secret(), accounts.new_totp_secret()
    with pytest.raises(WrongCode):
        accounts.enrol_totp(store, user, first, _not(pyotp.TOTP(first).at(now)), None, now)
    enrolled = accounts.enrol_totp(store, user, first, pyotp.TOTP(first).at(now), None, now)
    with pytest.raises(WrongCode):  # a code of the new one is not the current one's
        accounts.confirm_code(store, enrolled, pyotp.TOTP(second).at(now + 30), None,
                              "second factor", now + 30)
    accounts.confirm_code(store, enrolled, pyotp.TOTP(first).at(now + 30), None,
                          "second factor", now + 30)
    replaced = accounts.enrol_totp(store, enrolled, second, pyotp.TOTP(second).at(now + 30),
                                   None, now + 30)
    assert replaced.totp_secret == second
    assert accounts.remove_totp(store, replaced, None).totp_secret is None
    assert [(e.action, e.detail) for e in store.audit_entries(5)] == [
        ("second factor removed", ""), ("second factor replaced", ""),
        ("code confirmation failed", "second factor"), ("second factor enrolled", ""),
        ("second factor refused", "wrong code of the new authenticator")]


def test_recovery_codes_are_random_kept_as_digests_and_read_however_typed() -> None:
    made = [recovery._new_code() for _ in range(50)]
    assert len(set(made)) == 50
    for code in made:
        groups = code.split("-")
        assert [len(group) for group in groups] == [4] * 6 and code == code.lower()
        plain = "".join(groups)
        assert recovery.digest(code) == hashlib.sha256(plain.encode()).hexdigest()
        # Typed in capitals, spaced, or run together: the same code.
        assert recovery.digest(code.upper().replace("-", " ")) == recovery.digest(plain)
        assert recovery.is_recovery_code(code)
    for other in ("", "123456", "123 456", "abc", made[0][:-1], made[0] + "a", "0" * 24,
                  "é" * 24):
        assert recovery.digest(other) is None, other
    assert not recovery.is_recovery_code("123 456") and not recovery.is_recovery_code(" ")


def test_a_recovery_code_stands_in_for_the_authenticator_once(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    now = 1_800_000_000.0
    secret = accounts.new_totp_secret()
    enrolled = accounts.enrol_totp(store, user, secret, pyotp.TOTP(secret).at(now), None, now)
    codes = recovery.replace(store, enrolled, "192.0.2.1", "second factor enrolled")
    assert len(codes) == recovery.COUNT == recovery.left(store, enrolled) == 10
    assert recovery.check(store, enrolled, codes[3].upper(), "192.0.2.1") == 9
    with pytest.raises(WrongRecoveryCode):  # spent
        recovery.check(store, enrolled, codes[3], "192.0.2.1")
    with pytest.raises(WrongRecoveryCode):  # never one
        recovery.check(store, enrolled, recovery._new_code(), "192.0.2.1")
    with pytest.raises(WrongCode):  # digits are the authenticator's code, not a recovery one
        recovery.check(store, enrolled, "123456", "192.0.2.1")
    # Asked again before a change, one stands in for the current code too.
    assert recovery.check(store, enrolled, codes[4], None, "second factor") == 8
    assert [(e.address, e.action, e.detail) for e in store.audit_entries(6)] == [
        (None, "recovery code used", "second factor: 8 left"),
        ("192.0.2.1", "sign-in failed", "wrong code"),
        ("192.0.2.1", "sign-in failed", "wrong recovery code"),
        ("192.0.2.1", "sign-in failed", "spent recovery code"),
        ("192.0.2.1", "signed in (recovery code)", "9 left"),
        ("192.0.2.1", "recovery codes made", "second factor enrolled")]
    # A new set replaces the old whole; removing the second factor forgets it.
    fresh = recovery.replace(store, enrolled, None, "asked for")
    with pytest.raises(WrongRecoveryCode):
        recovery.check(store, enrolled, codes[0], None)
    assert recovery.check(store, enrolled, fresh[0], None) == 9
    removed = accounts.remove_totp(store, enrolled, None)
    assert recovery.left(store, removed) == 0
    with pytest.raises(WrongRecoveryCode):  # and no code opens a user without one
        recovery.check(store, removed, fresh[1], None)


def test_the_server_s_reset_of_a_second_factor_forgets_its_recovery_codes(
        store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    enrolled = store.update_console_user(user.id, {"totp_secret": accounts.new_totp_secret()})
    assert enrolled is not None
    recovery.replace(store, enrolled, None, "second factor enrolled")
    accounts.reset_password(store, "ann")
    assert recovery.left(store, enrolled) == 10  # a password reset alone keeps them
    accounts.reset_password(store, "ann", second_factor=True)
    assert recovery.left(store, enrolled) == 0


def test_an_owner_s_reset_of_a_second_factor_forgets_its_recovery_codes(
        store: Store) -> None:
    """Else a code kept from before would open the account again once it has a second
    factor anew."""
    accounts.add(store, "ann")
    bob, _ = accounts.add(store, "bob")
    now = time.time() - 60
    secret = accounts.new_totp_secret()
    enrolled = accounts.enrol_totp(store, bob, secret, pyotp.TOTP(secret).at(now), None, now)
    codes = recovery.replace(store, enrolled, None, "second factor enrolled")
    reset = accounts.reset_second_factor(store, "bob", "ann", None)
    assert recovery.left(store, reset) == 0
    again = accounts.new_totp_secret()
    anew = accounts.enrol_totp(store, reset, again, pyotp.TOTP(again).now(), None)
    with pytest.raises(WrongRecoveryCode):
        recovery.check(store, anew, codes[0], None)


def _not(code: str) -> str:
    """A six-digit code other than this one."""
    return "000000" if code != "000000" else "111111"


def test_each_worker_forgets_the_audit_lines_past_their_days_by_itself(
        store: Store, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="petstore.orders")
    store.add_audit_entry("2020-01-01T00:00:00Z", "ann", None, "ship", "old")
    accounts.record(store, "ann", None, "ship", "new")
    stop = threading.Event()
    worker = threading.Thread(target=accounts.keep_audit_days, args=(store, 90, stop, 0.01))
    worker.start()
    try:
        wait_until(lambda: len(store.audit_entries(10)) == 1, 10, "the first round")
        # A line past its days written later goes at a later round, by itself.
        store.add_audit_entry("2020-01-02T00:00:00Z", "ann", None, "ship", "old too")
        wait_until(lambda: len(store.audit_entries(10)) == 1, 10, "a later round")
    finally:
        stop.set()
        worker.join(5)
    assert not worker.is_alive()
    assert [e.detail for e in store.audit_entries(10)] == ["new"]
    assert [r.getMessage() for r in caplog.records] == ["forgot 1 old audit lines"] * 2



def _audit(store: Store, lines: int) -> list[tuple[str | None, str | None, str, str]]:
    return [(e.user_name, e.address, e.action, e.detail) for e in store.audit_entries(lines)]


def test_the_password_asked_again_passes_only_when_right_and_a_miss_is_audited(
        store: Store) -> None:
    user, password = accounts.add(store, "ann")
    accounts.confirm_password(store, user, password, "192.0.2.1", "making a key")
    with pytest.raises(SignInFailed):
        accounts.confirm_password(store, user, password + "x", "192.0.2.1", "making a key")
    assert _audit(store, 1) == [
        ("ann", "192.0.2.1", "password confirmation failed", "making a key")]


def test_the_code_asked_again_passes_once_only_when_right_and_a_miss_is_audited(
        store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    with pytest.raises(WrongCode):  # no second factor: no code is right
        accounts.confirm_code(store, user, "123456", "192.0.2.1", "second factor")
    secret = accounts.new_totp_secret()
    totp = pyotp.TOTP(secret)
    enrolled = accounts.enrol_totp(store, user, secret, totp.at(time.time() - 60), None,
                                   time.time() - 60)
    code = totp.now()
    accounts.confirm_code(store, enrolled, code, "192.0.2.1", "second factor")  # its clock
    with pytest.raises(WrongCode):  # the same code again
        accounts.confirm_code(store, enrolled, code, "192.0.2.1", "second factor")
    with pytest.raises(WrongCode):
        accounts.confirm_code(store, enrolled, _not(code), "192.0.2.2", "a new key")
    assert _audit(store, 4) == [
        ("ann", "192.0.2.2", "code confirmation failed", "a new key"),
        ("ann", "192.0.2.1", "code confirmation failed", "second factor"),
        ("ann", None, "second factor enrolled", ""),
        ("ann", "192.0.2.1", "code confirmation failed", "second factor")]


def test_a_code_at_the_sign_in_is_audited_under_the_user_and_the_address(
        store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    with pytest.raises(WrongCode):  # no second factor: no code is right
        accounts.check_code(store, user, "123456", "192.0.2.1")
    secret = accounts.new_totp_secret()
    totp = pyotp.TOTP(secret)
    now = 1_800_000_000.0
    enrolled = accounts.enrol_totp(store, user, secret, totp.at(now), None, now)
    accounts.check_code(store, enrolled, totp.at(now + 30), "192.0.2.1", now + 30)
    with pytest.raises(WrongCode):
        accounts.check_code(store, enrolled, _not(totp.at(now + 60)), "192.0.2.2", now + 60)
    assert _audit(store, 4) == [
        ("ann", "192.0.2.2", "sign-in failed", "wrong code"),
        ("ann", "192.0.2.1", "signed in (code)", ""),
        ("ann", None, "second factor enrolled", ""),
        ("ann", "192.0.2.1", "sign-in failed", "wrong code")]  # with no second factor


def test_a_recovery_code_asked_again_is_audited_with_what_it_was_for(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    now = time.time() - 60  # enrolled a minute ago: the code of now is taken later
    secret = accounts.new_totp_secret()
    totp = pyotp.TOTP(secret)
    enrolled = accounts.enrol_totp(store, user, secret, totp.at(now), None, now)
    codes = recovery.replace(store, enrolled, None, "second factor enrolled")
    with pytest.raises(WrongRecoveryCode):
        recovery.check(store, enrolled, recovery._new_code(), "192.0.2.1", "a new key")
    assert recovery.check(store, enrolled, codes[0], "192.0.2.1", "a new key") == 9
    with pytest.raises(WrongRecoveryCode):
        recovery.check(store, enrolled, codes[0], "192.0.2.2", "a new key")
    with pytest.raises(WrongRecoveryCode):
        recovery.check(store, enrolled, codes[0], "192.0.2.2")
    # The authenticator's code, asked again, is the code asked again (once only).
    code = totp.now()
    assert recovery.check(store, enrolled, code, "192.0.2.1", "second factor") is None
    with pytest.raises(WrongCode):
        recovery.check(store, enrolled, code, "192.0.2.3", "second factor")
    assert _audit(store, 6) == [
        ("ann", "192.0.2.3", "code confirmation failed", "second factor"),
        ("ann", "192.0.2.2", "sign-in failed", "spent recovery code"),
        ("ann", "192.0.2.2", "code confirmation failed", "a new key: spent recovery code"),
        ("ann", "192.0.2.1", "recovery code used", "a new key: 9 left"),
        ("ann", "192.0.2.1", "code confirmation failed", "a new key: wrong recovery code"),
        ("ann", None, "recovery codes made", "second factor enrolled")]
    assert recovery.check(store, enrolled, codes[1], "192.0.2.4") == 8  # at the sign-in
    assert _audit(store, 1) == [("ann", "192.0.2.4", "signed in (recovery code)", "8 left")]


def test_an_authenticator_reads_the_shop_and_the_user_from_the_uri() -> None:
    secret = accounts.new_totp_secret()
    assert accounts.totp_uri(secret, "ann") == (
        f"otpauth://totp/Pet%20Store%20Orders:ann?secret={secret}"
        "&issuer=Pet%20Store%20Orders")


def test_a_reset_of_a_second_factor_refused_says_why_and_is_audited(store: Store) -> None:
    accounts.add(store, "ann")
    accounts.add(store, "bob")
    with pytest.raises(UserRefused) as oneself:
        accounts.reset_second_factor(store, "ann", "ann", "203.0.113.9")
    assert oneself.value.message == ("Your own second factor is changed on your Second "
                                     "factor page, which asks for its current code too.")
    with pytest.raises(UserRefused) as none:
        accounts.reset_second_factor(store, "bob", "ann", "203.0.113.8")
    assert none.value.message == "bob has no second factor to reset."
    assert _audit(store, 2) == [
        ("ann", "203.0.113.8", "reset second factor refused", "bob: none set up"),
        ("ann", "203.0.113.9", "reset second factor refused", "ann: oneself")]


def test_enabling_a_user_is_audited_under_who_did_it(store: Store) -> None:
    accounts.add(store, "ann")
    accounts.add(store, "bob")
    accounts.disable(store, "bob", "ann", "203.0.113.9")
    assert accounts.enable(store, "bob", "ann", "203.0.113.9").disabled_at is None
    assert _audit(store, 1) == [("ann", "203.0.113.9", "user enabled", "bob")]


def test_a_code_is_taken_in_ascii_digits_within_one_step_of_now(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    secret = accounts.new_totp_secret()
    totp = pyotp.TOTP(secret)
    now = 1_800_000_000.0
    enrolled = accounts.enrol_totp(store, user, secret, totp.at(now), None, now)
    # The code in fullwidth digits, which NFKC (pyotp's comparison) reads as ASCII ones.
    fullwidth = "".join(chr(ord(digit) + 0xFEE0) for digit in totp.at(now + 30))
    for refused in (fullwidth, totp.at(now + 90), totp.at(now - 30)):
        with pytest.raises(WrongCode):
            accounts.check_code(store, enrolled, refused, None, now + 30)
    accounts.check_code(store, enrolled, totp.at(now + 60), None, now + 30)  # a step ahead


def test_enrolling_reads_the_clock_and_is_audited_under_the_user(store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    secret = accounts.new_totp_secret()
    with pytest.raises(WrongCode):
        accounts.enrol_totp(store, user, secret, _not(pyotp.TOTP(secret).now()),
                            "192.0.2.1")
    enrolled = accounts.enrol_totp(store, user, secret, pyotp.TOTP(secret).now(),
                                   "192.0.2.1")
    another = accounts.new_totp_secret()
    accounts.enrol_totp(store, enrolled, another, pyotp.TOTP(another).now(), "192.0.2.2")
    removed = accounts.remove_totp(store, enrolled, "192.0.2.3")
    assert removed.totp_secret is None
    assert _audit(store, 4) == [
        ("ann", "192.0.2.3", "second factor removed", ""),
        ("ann", "192.0.2.2", "second factor replaced", ""),
        ("ann", "192.0.2.1", "second factor enrolled", ""),
        ("ann", "192.0.2.1", "second factor refused", "wrong code of the new authenticator")]


@pytest.mark.parametrize(("password", "name", "built"), [
    ("j j j j j j j j j j j j", "j.smith", True),  # a word of one letter, again and again
    ("Smith-J smithj", "j.smith", True),
    ("STRASSE strasse", "straße", True),  # without case, as Unicode compares it
    ("zzzzzzzzz ann", "ann", False),  # ends with the name, and is not made of it
    ("ann zzzzzzzzz", "ann", False),
    ("!!!! !!!! !!!!", "ann", False),  # no letters: nothing for the names to build
])
def test_a_password_is_built_of_names_only_when_every_letter_is_theirs(
        password: str, name: str, built: bool) -> None:
    assert passwords.built_of_names(password, name) is built


def test_a_reset_password_is_audited_under_who_did_it_with_the_second_factor(
        store: Store) -> None:
    accounts.add(store, "ann")
    accounts.add(store, "bob")
    accounts.reset_password(store, "bob", by="ann", address="203.0.113.9")
    accounts.reset_password(store, "bob", True, "ann", "203.0.113.8")
    assert _audit(store, 2) == [
        ("ann", "203.0.113.8", "password reset and second factor removed", "bob"),
        ("ann", "203.0.113.9", "password reset", "bob")]


def test_unlocking_counts_the_name_s_failures_of_the_window_page_by_page(store: Store) -> None:
    """More than a page of the audit log (100 lines): the failures of the throttle's window
    (its first second included) under the name, not those before it nor another user's."""
    ann = store.create_console_user("ann", passwords.hash_password(GOOD),
                                    "2026-11-01T00:00:00Z", "owner")
    store.create_console_user("bob", passwords.hash_password(GOOD), "2026-11-01T00:00:00Z",
                              "staff")
    since = "2026-11-29T11:45:00Z"  # now - 15 minutes
    store.add_audit_entry(since, "ann", "192.0.2.9", "sign-in failed", "wrong password")
    assert store.audit_entries(1)[0].id == 1  # the log's first line, as after a purge
    for _ in range(5):
        store.add_audit_entry("2026-11-29T11:44:59Z", "ann", "192.0.2.1", "sign-in failed",
                              "wrong password")  # before the window
    for n in range(150):
        store.add_audit_entry(since, "ann", f"192.0.2.{n % 3 + 1}", "sign-in failed",
                              "wrong password")
        store.add_audit_entry(since, "bob", "192.0.2.1", "sign-in failed", "wrong password")
    store.add_audit_entry("2026-11-29T11:50:00Z", "ann", "192.0.2.1", "signed in (code)", "")
    lifted = accounts.unlock(store, "ann", dt.datetime(2026, 11, 29, 12, 0, tzinfo=dt.UTC))
    assert lifted.since == since
    assert lifted.failures == {"192.0.2.1": 50, "192.0.2.2": 50, "192.0.2.3": 50,
                               "192.0.2.9": 1}
    assert lifted.user.id == ann.id
    assert store.audit_entries(1)[0].detail == "ann: 151 failed checks no longer counted"


def test_the_throttle_epoch_of_a_name_that_is_no_user_s_is_none(store: Store) -> None:
    assert accounts.throttle_epoch(store, "nobody") is None
    assert accounts.throttle_epoch(store, "not a name!") is None


@pytest.mark.parametrize(("password", "sentence"), [
    ("short pass", "A password needs at least 12 characters; a phrase of a few words is easy "
                   "to remember."),
    ("x" * 129, "A password has at most 128 characters."),
    ("annabel.example", "A password must not be built of your name or the shop's alone: they "
                        "are the first words an attacker tries."),
    ("password1234", "That password is on the list of common passwords, which are the first "
                     "that attackers try; choose another."),
    ("aaaaaaaaaaaa", 'That password is too easy to guess. Repeats like "aaa" are easy to '
                     "guess. A phrase of a few uncommon words is strong and easy to "
                     "remember."),
    # zxcvbn rates it low with no warning of its own: ours stands in.
    ("qpwoeirutyal", "That password is too easy to guess. It is made of parts attackers try "
                     "early. A phrase of a few uncommon words is strong and easy to "
                     "remember."),
])
def test_a_refused_password_is_told_why_in_whole_sentences(password: str,
                                                           sentence: str) -> None:
    with pytest.raises(PasswordRefused) as refusal:
        passwords.check_new(password, "annabel.example")
    assert refusal.value.message == sentence


def test_each_unlock_lifts_the_locks_made_since_the_last(settings: Settings,
                                                         store: Store) -> None:
    user, _ = accounts.add(store, "ann")
    throttle = SignInThrottle(settings, pair_failures=2)
    epoch = user.throttle_epoch
    for _ in range(3):  # locked, unlocked, and again
        for _ in range(2):
            throttle.failed("ann", "192.0.2.1", epoch)
        assert throttle.wait("ann", "192.0.2.1", epoch) > 0
        epoch = accounts.unlock(store, "ann").user.throttle_epoch
        assert throttle.wait("ann", "192.0.2.1", epoch) == 0


def test_the_throttle_counts_in_the_process_while_its_storage_is_down_then_goes_back(
        settings: Settings, private_redis: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The throttle's Redis killed: the failures count in this process meanwhile (one
    warning), and once a Redis answers there again, the throttle counts there."""
    caplog.set_level("WARNING", logger="petstore.console")
    throttle = SignInThrottle(settings.replace(ratelimit_storage=private_redis.url),
                              pair_failures=2)
    throttle.failed("ann", "192.0.2.1")
    assert private_redis.dbsize() > 0 and not throttle.down and not caplog.records
    private_redis.kill()
    throttle.failed("ann", "192.0.2.1")
    throttle.failed("ann", "192.0.2.1")
    assert throttle.down and throttle.wait("ann", "192.0.2.1") > 0  # counted here
    assert [r.getMessage() for r in caplog.records] == [
        "the sign-in throttle's storage failed (StorageError); counting failed sign-ins in "
        "this process until it answers"]  # limits' error, named by its type alone
    private_redis.start()  # empty, on the same port
    wait_until(lambda: throttle.wait("bob", "192.0.2.1") == 0 and not throttle.down)
    throttle.failed("bob", "192.0.2.1")
    assert private_redis.dbsize() > 0 and len(caplog.records) == 1


def test_disabling_is_refused_for_oneself_and_the_last_owner_and_audited(store: Store) -> None:
    accounts.add(store, "ann")
    accounts.add(store, "bob")
    with pytest.raises(UserRefused) as oneself:
        accounts.disable(store, "ann", "ann", "203.0.113.9")
    assert oneself.value.message == "You cannot disable your own account: another owner can."
    with pytest.raises(UserRefused):
        accounts.disable(store, "ann", "bob", "203.0.113.8")  # the last enabled owner
    accounts.disable(store, "bob", "ann", "203.0.113.7")
    assert _audit(store, 3) == [
        ("ann", "203.0.113.7", "user disabled", "bob"),
        ("bob", "203.0.113.8", "disable user refused", "ann: the last enabled owner"),
        ("ann", "203.0.113.9", "disable user refused", "ann: oneself")]


def test_a_name_that_is_no_user_s_is_audited_cut_to_64_characters(store: Store) -> None:
    with pytest.raises(SignInFailed):
        accounts.sign_in(store, "n" * 70, GOOD, "192.0.2.1")
    assert _audit(store, 1) == [(None, "192.0.2.1", "sign-in failed", "n" * 64)]


def test_a_hash_of_older_costs_is_replaced_at_the_sign_in_and_still_signs_in(
        store: Store) -> None:
    user, password = accounts.add(store, "ann")
    older = PasswordHasher(time_cost=1, memory_cost=8192, parallelism=1).hash(password)
    store.update_console_user(user.id, {"password_hash": older})
    assert passwords.needs_rehash(older)
    signed = accounts.sign_in(store, "ann", password, None)
    assert signed.password_hash != older and not passwords.needs_rehash(signed.password_hash)
    assert accounts.sign_in(store, "ann", password, None).name == "ann"


def test_adding_a_user_is_audited_under_who_added_it(store: Store) -> None:
    accounts.add(store, "ann")
    accounts.add(store, "bob", by="ann", address="203.0.113.9")
    assert _audit(store, 2) == [("ann", "203.0.113.9", "user added", "bob (staff)"),
                                (None, None, "user added", "ann (owner)")]


def test_a_sign_in_by_password_is_audited_under_the_user_and_the_address(
        store: Store) -> None:
    accounts.add(store, "ann")
    password = accounts.reset_password(store, "ann")
    accounts.sign_in(store, "ann", password, "192.0.2.1")
    assert _audit(store, 1) == [("ann", "192.0.2.1", "signed in (password)", "")]


class Clock:
    """time.time for the throttle and limits' memory storage, moved by the test: the waits'
    rules over minutes, without waiting them."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_the_wait_is_the_longest_left_of_the_counters_that_are_full(
        settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(time, "time", clock)
    throttle = SignInThrottle(settings, pair_failures=2, name_failures=3)
    throttle.failed("ann", "192.0.2.1")  # the name's first failure, from elsewhere
    clock.now += 100
    throttle.failed("ann", "192.0.2.2")
    throttle.failed("ann", "192.0.2.2")  # the pair's two, and the name's three
    # The name's counter frees 800 s from now, the pair's 900 s: the longer is the wait.
    assert throttle.wait("ann", "192.0.2.2") == 900
    assert throttle.wait("ann", "192.0.2.3") == 800  # from another address, the name's
    clock.now += 600
    assert throttle.wait("ann", "192.0.2.2") == 300
    clock.now += 299.5  # the last half second of the pair's window: still a second
    assert throttle.wait("ann", "192.0.2.2") == 1
    clock.now += 0.5
    assert throttle.wait("ann", "192.0.2.2") == 0
