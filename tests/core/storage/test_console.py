"""The console's users, sessions and audit log over each store (D35): names are unique,
a user has a role and the last enabled owner is not disabled (D38),
sessions are found by digest with their user and end one by one or all of a user's, a TOTP
step is used once, recovery codes are replaced whole and each spent once, a form that shows
a secret is taken once, a cancel from the console records its user, the home page's
figures."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from app.core import orders
from app.core.errors import DuplicateUser
from app.core.storage import Store
from app.core.storage.console_statements import ConsoleSession, RecoveryUse
from tests.core.storage.conftest import Place

NOW = "2026-11-24T10:00:00Z"


def _session(user_id: int, digest: str, at: float = 1000.0) -> ConsoleSession:
    return ConsoleSession(digest, user_id, f"token-{digest}", "open", at, at)


def test_a_user_name_is_taken_once(store: Store) -> None:
    made = store.create_console_user("ann", "hash", NOW)
    assert (made.name, made.must_change_password, made.totp_secret, made.active) == (
        "ann", True, None, True)
    try:
        store.create_console_user("ann", "other", NOW)
    except DuplicateUser as exc:
        assert "ann" in exc.message
    else:
        raise AssertionError("a second ann was stored")
    assert [u.name for u in store.list_console_users()] == ["ann"]
    assert store.console_user("ann") == store.console_user_by_id(made.id) == made
    assert store.console_user("bob") is None


def test_a_user_has_a_role_and_the_users_before_roles_are_owners(place: Place) -> None:
    place.at_schema(13, "INSERT INTO console_users (name, password_hash, created_at) "
                        "VALUES ('ann', 'hash', '2026-11-01T00:00:00Z')")
    store = place.open()
    try:
        assert [(u.name, u.role) for u in store.list_console_users()] == [("ann", "owner")]
        assert store.create_console_user("bob", "hash", NOW).role == "staff"
        assert store.create_console_user("cat", "hash", NOW, "owner").role == "owner"
    finally:
        store.dispose()


def test_the_last_enabled_owner_is_not_disabled(store: Store) -> None:
    ann = store.create_console_user("ann", "hash", NOW, "owner")
    bob = store.create_console_user("bob", "hash", NOW, "owner")
    staff = store.create_console_user("sam", "hash", NOW)
    disabled = store.disable_console_user(bob.id, NOW)
    assert disabled is not None and disabled.disabled_at == NOW and not disabled.active
    assert store.disable_console_user(ann.id, NOW) is None  # the last enabled owner
    assert store.console_user("ann").active  # type: ignore[union-attr]
    again = store.disable_console_user(bob.id, "2026-11-25T00:00:00Z")
    assert again is not None and again.disabled_at == NOW  # the first time is kept
    assert store.disable_console_user(staff.id, NOW) is not None  # staff: no such rule
    assert store.disable_console_user(999, NOW) is None
    store.update_console_user(bob.id, {"disabled_at": None})
    assert store.disable_console_user(ann.id, NOW) is not None  # bob is enabled again


def test_a_users_fields_change_and_only_those_that_may(store: Store) -> None:
    made = store.create_console_user("ann", "hash", NOW)
    changed = store.update_console_user(made.id, {"must_change_password": False,
                                                  "totp_secret": "S" * 32,
                                                  "disabled_at": NOW})
    assert changed is not None
    assert (changed.must_change_password, changed.totp_secret, changed.active) == (
        False, "S" * 32, False)
    try:
        store.update_console_user(made.id, {"name": "eve"})
    except ValueError:
        pass
    else:
        raise AssertionError("a name was changed")
    assert store.update_console_user(999, {"disabled_at": NOW}) is None


def test_a_totp_step_is_used_once_and_only_forward(store: Store) -> None:
    made = store.create_console_user("ann", "hash", NOW)
    assert store.use_totp_step(made.id, 100)
    assert not store.use_totp_step(made.id, 100)  # the same code again
    assert not store.use_totp_step(made.id, 99)  # an older one
    assert store.use_totp_step(made.id, 101)


def test_recovery_codes_are_replaced_whole_and_each_spent_once(store: Store,
                                                                place: Place) -> None:
    ann = store.create_console_user("ann", "hash", NOW)
    bob = store.create_console_user("bob", "hash", NOW)
    store.replace_recovery_codes(ann.id, [f"a{n}" for n in range(10)], NOW)
    store.replace_recovery_codes(bob.id, ["b0"], NOW)
    assert store.recovery_codes_left(ann.id) == 10
    assert store.use_recovery_code(ann.id, "a3", NOW) == RecoveryUse(True, False, 9)
    assert store.use_recovery_code(ann.id, "a3", NOW) == RecoveryUse(False, True, 9)
    assert store.use_recovery_code(ann.id, "b0", NOW) == RecoveryUse(False, False, 9)  # bob's
    assert place.sql("SELECT digest, used_at FROM console_recovery_codes "
                     "WHERE used_at IS NOT NULL") == [("a3", NOW)]
    store.replace_recovery_codes(ann.id, ["c0", "c1"], NOW)  # the old set goes whole
    assert store.use_recovery_code(ann.id, "a4", NOW) == RecoveryUse(False, False, 2)
    assert store.recovery_codes_left(ann.id) == 2 and store.recovery_codes_left(bob.id) == 1
    store.replace_recovery_codes(ann.id, [], NOW)
    assert store.recovery_codes_left(ann.id) == 0 and store.recovery_codes_left(bob.id) == 1


def test_of_two_uses_of_one_recovery_code_at_once_one_passes(store: Store,
                                                             place: Place) -> None:
    ann = store.create_console_user("ann", "hash", NOW)
    store.replace_recovery_codes(ann.id, ["a0", "a1"], NOW)
    other = place.open()
    try:
        with ThreadPoolExecutor(2) as pool:
            uses = list(pool.map(lambda s: s.use_recovery_code(ann.id, "a0", NOW),
                                 [store, other]))
    finally:
        other.dispose()
    assert sorted(use.spent for use in uses) == [False, True]
    assert store.recovery_codes_left(ann.id) == 1


def test_sessions_are_found_by_digest_and_end_one_or_all(store: Store) -> None:
    ann = store.create_console_user("ann", "hash", NOW)
    bob = store.create_console_user("bob", "hash", NOW)
    for digest, user in (("a1", ann), ("a2", ann), ("b1", bob)):
        store.create_console_session(_session(user.id, digest))
    found = store.console_session("a1")
    assert found is not None and found[0] == _session(ann.id, "a1") and found[1] == ann
    store.touch_console_session("a1", 1500.0)
    touched = store.console_session("a1")
    assert touched is not None and touched[0].seen_at == 1500.0
    assert store.end_console_sessions(digest="a1") == 1
    assert store.console_session("a1") is None
    assert store.end_console_sessions(user_id=ann.id) == 1
    assert store.console_session("a2") is None and store.console_session("b1") is not None


def test_a_session_keeps_the_totp_secret_its_page_offers(store: Store) -> None:
    """D36: the second factor page's secret is the server's, kept with the session; a new
    session (the next step) starts without one, and a user's throttle epoch is kept."""
    ann = store.create_console_user("ann", "hash", NOW)
    store.create_console_session(_session(ann.id, "a1"))
    assert store.offer_totp_secret("a1", "S" * 32) == "S" * 32
    assert store.offer_totp_secret("a1", "T" * 32) == "S" * 32  # the first is kept
    found = store.console_session("a1")
    assert found is not None and found[0].pending_totp_secret == "S" * 32
    assert store.offer_totp_secret("gone", "S" * 32) is None
    store.create_console_session(_session(ann.id, "a2"), replacing="a1")
    again = store.console_session("a2")
    assert again is not None and again[0].pending_totp_secret is None
    unlocked = store.update_console_user(ann.id, {"throttle_epoch": "e1"})
    assert unlocked is not None and unlocked.throttle_epoch == "e1"
    assert store.console_user("ann") == unlocked


def test_a_new_session_replaces_the_one_before_in_one_step(store: Store) -> None:
    ann = store.create_console_user("ann", "hash", NOW)
    store.create_console_session(_session(ann.id, "old"))
    store.create_console_session(_session(ann.id, "new"), replacing="old")
    assert store.console_session("old") is None and store.console_session("new") is not None


def test_sessions_past_their_times_are_purged(store: Store) -> None:
    ann = store.create_console_user("ann", "hash", NOW)
    store.create_console_session(_session(ann.id, "idle", at=100.0))
    store.create_console_session(ConsoleSession("old", ann.id, "t", "open", 100.0, 5000.0))
    store.create_console_session(_session(ann.id, "fresh", at=5000.0))
    assert store.purge_console_sessions(idle_before=1000.0, begun_before=200.0) == 2
    assert store.console_session("fresh") is not None


def test_a_form_is_taken_once_and_says_what_it_made(store: Store) -> None:
    assert store.take_console_form("console-a", 1000.0) == (True, None)
    assert store.take_console_form("console-a", 1001.0) == (False, None)  # being applied
    store.settle_console_form("console-a", 7)
    assert store.take_console_form("console-a", 1002.0) == (False, 7)
    store.release_console_form("console-a")  # made something: never let go
    assert store.take_console_form("console-a", 1003.0) == (False, 7)
    assert store.take_console_form("console-b", 1004.0) == (True, None)


def test_a_refused_form_is_let_go_to_be_sent_again(store: Store) -> None:
    assert store.take_console_form("console-a", 1000.0) == (True, None)
    store.release_console_form("console-a")
    assert store.take_console_form("console-a", 1001.0) == (True, None)


def test_forms_are_forgotten_with_the_sessions_that_could_send_them(store: Store) -> None:
    store.take_console_form("console-old", 100.0)
    store.take_console_form("console-new", 300.0)
    store.purge_console_sessions(idle_before=0.0, begun_before=200.0)
    assert store.take_console_form("console-old", 400.0) == (True, None)
    assert store.take_console_form("console-new", 400.0) == (False, None)


def test_the_audit_log_pages_newest_first_and_forgets_by_age(store: Store) -> None:
    for day in range(1, 6):
        store.add_audit_entry(f"2026-11-0{day}T10:00:00Z", "ann", "127.0.0.1", "ship",
                              f"order {day}")
    first = store.audit_entries(2)
    assert [e.detail for e in first] == ["order 5", "order 4"]
    assert [e.detail for e in store.audit_entries(2, before=first[-1].id)] == [
        "order 3", "order 2"]
    assert store.purge_audit_entries("2026-11-03T00:00:00Z") == 2
    assert [e.detail for e in store.audit_entries(10)] == [
        "order 5", "order 4", "order 3"]


def test_the_audit_log_is_filtered_by_user_and_action(store: Store) -> None:
    for n, (user, action) in enumerate([("ann", "ship"), ("bob", "ship"), (None, "sign-in failed"),
                                        ("ann", "key created"), ("ann", "ship")]):
        store.add_audit_entry(f"2026-11-01T10:00:0{n}Z", user, None, action, f"line {n}")
    assert [e.detail for e in store.audit_entries(10, user_name="ann")] == [
        "line 4", "line 3", "line 0"]
    assert [e.detail for e in store.audit_entries(10, action="ship")] == [
        "line 4", "line 1", "line 0"]
    ann_ships = store.audit_entries(1, user_name="ann", action="ship")
    assert [e.detail for e in ann_ships] == ["line 4"]
    assert [e.detail for e in store.audit_entries(5, before=ann_ships[0].id,
                                                  user_name="ann", action="ship")] == ["line 0"]
    assert store.audit_names() == (["ann", "bob"], ["key created", "ship", "sign-in failed"])


def test_a_cancel_from_the_console_records_its_user(store: Store, place: Place) -> None:
    ann = store.create_console_user("ann", "hash", NOW)
    store.import_orders([{"id": 1, "petId": 1, "quantity": 1},
                         {"id": 2, "petId": 1, "quantity": 1}])
    orders.cancel(store, 1, None, user_id=ann.id)
    orders.cancel(store, 2, None)
    assert place.sql("SELECT id, cancelled_by, cancelled_by_user FROM orders ORDER BY id") == [
        (1, None, ann.id), (2, None, None)]


def test_the_home_pages_figures(store: Store) -> None:
    store.import_orders([
        {"id": 1, "petId": 1, "quantity": 3},
        {"id": 2, "petId": 1, "quantity": 4},
        {"id": 3, "petId": 1, "quantity": 5, "status": "cancelled"},
        {"id": 4, "petId": 1, "quantity": 1, "status": "shipped",
         "shipDate": "2026-11-24T09:00:00Z"},
        {"id": 5, "petId": 1, "quantity": 1, "status": "shipped",
         "shipDate": "2026-11-23T09:00:00Z"},
    ])
    assert store.order_summary("2026-11-24T00:00:00Z", "2026-11-25T00:00:00Z") == {
        "pending": 2, "units": 7, "shipped_today": 1}


def test_a_pages_pet_names_are_read_at_once(store: Store) -> None:
    store.import_pets([{"id": n, "name": f"pet {n}"} for n in range(1, 1201)])
    wanted = [*range(1, 1201, 2), 5000]
    assert store.pet_names(wanted) == {n: f"pet {n}" for n in range(1, 1201, 2)}
    assert store.pet_names([]) == {}


def test_an_orders_record_tells_its_placing_and_its_cancelling(store: Store) -> None:
    placed = store.place_order({"petId": 5, "quantity": 2}, 7, "key-1", "fp", NOW).order
    user = store.create_console_user("ann", "hash", NOW)
    orders.cancel(store, placed["id"], None, user_id=user.id)
    record = store.order_record(placed["id"])
    assert record is not None
    assert record.order == {"id": placed["id"], "petId": 5, "quantity": 2, "complete": False,
                            "status": "cancelled"}
    assert (record.version, record.placed_at, record.placed_by_key) == (2, NOW, 7)
    assert (record.cancelled_by_key, record.cancelled_by_user) == (None, user.id)
    assert record.cancelled_at is not None and record.cancelled_at >= NOW
    assert store.order_record(placed["id"] + 1) is None
    # An imported order has no placing: no idempotency key holds it.
    store.import_orders([{"id": 90, "petId": 5, "quantity": 1}])
    imported = store.order_record(90)
    assert imported is not None and (imported.placed_at, imported.placed_by_key) == (None, None)


def test_an_orders_acts_are_the_console_acts_that_changed_it(store: Store) -> None:
    for action, detail in (("ship", "order 1"), ("ship refused", "order 1: cancelled"),
                           ("ship", "order 10"), ("complete", "order 1"),
                           ("orders exported", "order 1"), ("cancel", "order 2")):
        store.add_audit_entry(NOW, "ann", "192.0.2.1", action, detail)
    assert [(e.action, e.detail) for e in store.order_acts(1)] == [
        ("ship", "order 1"), ("complete", "order 1")]
    assert [e.action for e in store.order_acts(2)] == ["cancel"]
    assert store.order_acts(3) == []
