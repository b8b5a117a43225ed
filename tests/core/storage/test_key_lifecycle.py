"""Keys that live like credentials (D21), on every store: expiry, scope,
rotation with a grace, last use, and moving keys between stores by their digests."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.core import keys
from app.core.config import Settings
from app.core.errors import DuplicateKey
from app.core.keys import Keyring, LastUsed
from app.core.storage import Store, open_store
from tests.core.storage.conftest import Place
from tests.support import ISSUED_SECRETS

NOW = "2026-11-23T12:00:00Z"


def new_key(store: Store, **fields: object) -> tuple[str, int]:
    made = keys.generate_key()
    ISSUED_SECRETS.add(made.secret)
    values = {"name": "t", "plan": "free", "per_minute": None, "per_day": None, "now": NOW,
              **fields}
    key = store.create_key(digest=made.digest, prefix=made.prefix, **values)  # type: ignore[arg-type]
    return made.secret, key.id


def test_keys_made_before_the_lifecycle_keep_working_with_write_scope(place: Place) -> None:
    """A database at schema 5 (before D21), with a key, migrated to today's schema."""
    made = keys.generate_key()
    ISSUED_SECRETS.add(made.secret)
    insert = ("INSERT INTO api_keys (prefix, digest, name, plan, created_at) VALUES "
              f"('{made.prefix}', '{made.digest}', 'old', 'free', '{NOW}')")
    place.at_schema(5, insert)
    store = place.open()
    try:
        found = Keyring(store, ttl_seconds=0).check(made.secret).key
        assert found is not None
        assert (found.name, found.scope, found.expires_at) == ("old", "write", None)
    finally:
        store.dispose()


def test_a_new_key_has_write_scope_no_expiry_and_no_last_use(store: Store) -> None:
    secret, key_id = new_key(store)
    key = store.get_key(key_id)
    assert key is not None
    assert (key.scope, key.expires_at, key.last_used_at, key.previous_digest) == (
        "write", None, None, None)
    assert key.digest == keys.digest(secret)


def test_scope_and_expiry_are_stored_and_changed(store: Store) -> None:
    _, key_id = new_key(store, scope="read", expires_at="2027-01-01T00:00:00Z")
    key = store.get_key(key_id)
    assert key is not None and (key.scope, key.expires_at) == ("read", "2027-01-01T00:00:00Z")
    changed = store.set_scope(key_id, "write")
    assert changed is not None and changed.scope == "write"
    changed = store.set_expiry(key_id, None)
    assert changed is not None and changed.expires_at is None
    assert store.set_scope(999, "read") is None


def test_a_scope_other_than_read_or_write_is_refused_by_the_database(store: Store) -> None:
    _, key_id = new_key(store)
    with pytest.raises(Exception, match=r"(?i)check"):
        store.set_scope(key_id, "admin")
    key = store.get_key(key_id)
    assert key is not None and key.scope == "write"


def test_a_keyring_refuses_an_expired_key_as_expired(store: Store) -> None:
    past, _ = new_key(store, expires_at="2020-01-01T00:00:00Z")
    future, future_id = new_key(store, expires_at="2099-01-01T00:00:00Z")
    ring = Keyring(store, ttl_seconds=0)
    assert ring.check(past) == keys.KeyCheck(None, expired=True)
    found = ring.check(future).key
    assert found is not None and found.id == future_id
    assert ring.check("psk_unknown") == keys.NO_KEY


def test_rotation_keeps_the_key_and_the_old_secret_until_the_grace_ends(store: Store) -> None:
    old, key_id = new_key(store, plan="pro", scope="read")
    store.ban_key(key_id, "2099-01-01T00:00:00Z")
    ring = Keyring(store, ttl_seconds=0)
    new, rotated = keys.rotation(store, key_id, grace_seconds=60, now=time.time())
    ISSUED_SECRETS.add(new)
    assert rotated is not None
    assert (rotated.id, rotated.plan, rotated.scope, rotated.banned_until) == (
        key_id, "pro", "read", "2099-01-01T00:00:00Z")
    assert rotated.prefix == new[:keys.VISIBLE_CHARS]
    for secret in (old, new):
        found = ring.check(secret).key
        assert found is not None and found.id == key_id
    # Past the grace, only the new secret opens the key.
    keys.rotation(store, key_id, grace_seconds=0, now=time.time() - 1)
    assert ring.check(new).key is None  # rotated again, with no grace: gone at once
    assert ring.check(old).key is None


def test_a_second_rotation_within_the_grace_ends_the_first_old_secret(store: Store) -> None:
    first, key_id = new_key(store)
    second, _ = keys.rotation(store, key_id, grace_seconds=3600, now=time.time())
    third, _ = keys.rotation(store, key_id, grace_seconds=3600, now=time.time())
    ISSUED_SECRETS.update((second, third))
    ring = Keyring(store, ttl_seconds=0)
    assert ring.check(first).key is None
    assert ring.check(second).key is not None
    assert ring.check(third).key is not None
    assert store.find_key(keys.digest(first)) is None


def test_a_renewed_secret_replaces_the_new_one_and_keeps_the_old_one(store: Store) -> None:
    old, key_id = new_key(store)
    rotated, _ = keys.rotation(store, key_id, grace_seconds=3600, now=time.time())
    renewed, key = keys.renew(store, key_id)
    ISSUED_SECRETS.update((rotated, renewed))
    assert key.prefix == renewed[:keys.VISIBLE_CHARS]
    ring = Keyring(store, ttl_seconds=0)
    assert ring.check(old).key is not None and ring.check(renewed).key is not None
    assert ring.check(rotated).key is None
    store.revoke_key(key_id, NOW)
    with pytest.raises(keys.KeyRevoked):
        keys.renew(store, key_id)
    with pytest.raises(keys.KeyNotFound):
        keys.renew(store, key_id + 1)


def test_last_use_is_written_once_a_minute_and_never_moves_back(store: Store) -> None:
    _, key_id = new_key(store)
    store.touch_keys({key_id: "2026-11-23T12:05:00Z"})
    store.touch_keys({key_id: "2026-11-23T12:01:00Z"})  # a late writer from another worker
    key = store.get_key(key_id)
    assert key is not None and key.last_used_at == "2026-11-23T12:05:00Z"

    writes: list[dict[int, str]] = []

    class Counting:
        def touch_keys(self, uses: dict[int, str]) -> None:
            writes.append(dict(uses))
            store.touch_keys(uses)

        def close(self) -> None:
            store.close()

    recorder = LastUsed(Counting(), every=60)  # type: ignore[arg-type]
    start = 1_795_000_000.0  # 2026-11-18
    for second in range(0, 120, 5):  # a use every five seconds for two minutes
        recorder.seen(key_id, start + second)
        recorder.flush()
    assert len(writes) == 2, writes


def test_keys_move_between_stores_and_keep_working(
    store: Store, place: Place, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """From SQLite to PostgreSQL, and back: the same secrets open the same keys."""
    secret, key_id = new_key(store, plan="enterprise", per_minute=5, per_day=50,
                             scope="read", expires_at="2099-01-01T00:00:00Z")
    rotated, _ = keys.rotation(store, key_id, grace_seconds=3600, now=time.time())
    ISSUED_SECRETS.add(rotated)
    store.revoke_key(new_key(store)[1], NOW)
    exported = [keys.exported(key) for key in store.list_keys()]
    assert not any(s in str(exported) for s in (secret, rotated))

    target = (request.getfixturevalue("postgres_database") if place.kind == "sqlite"
              else str(tmp_path / "other.db"))
    other = open_store(Settings(database=target))
    try:
        assert other.import_keys([keys.key_from_export(row) for row in exported]) == 2
        assert [keys.exported(k) for k in other.list_keys()] == exported
        ring = Keyring(other, ttl_seconds=0)
        for s in (secret, rotated):
            found = ring.check(s).key
            assert found is not None and found.id == key_id and found.scope == "read"
        # Ids the store gives later follow the imported ones.
        _, later = new_key(other)
        assert later == max(row["id"] for row in exported) + 1
    finally:
        other.dispose()


def test_an_import_is_all_or_nothing_and_refuses_ids_and_digests_held(
    store: Store, place: Place
) -> None:
    secret, key_id = new_key(store)
    held = store.get_key(key_id)
    assert held is not None
    fresh = keys.generate_key()
    row = {**keys.exported(held), "id": 50, "digest": fresh.digest}
    clash_id = {**keys.exported(held), "digest": keys.generate_key().digest}
    clash_digest = {**keys.exported(held), "id": 51}
    for bad, words in ((clash_id, f"id {key_id}"), (clash_digest, "digest")):
        with pytest.raises(DuplicateKey, match=words):
            store.import_keys([keys.key_from_export(row), keys.key_from_export(bad)])
        assert [k.id for k in store.list_keys()] == [key_id]
    with pytest.raises(DuplicateKey, match="twice"):
        store.import_keys([keys.key_from_export(row), keys.key_from_export({**row, "id": 52})])
    assert store.import_keys([keys.key_from_export(row)]) == 1
    assert [k.id for k in store.list_keys()] == [key_id, 50]
    assert store.find_key(keys.digest(secret)) is not None


def test_a_key_in_use_is_read_again_ahead_of_its_expiry_and_a_revocation_still_arrives(
    store: Store,
) -> None:
    """Issue 27: memory answers every request with a key in use, however long it is used
    (the keyring's thread reads it again before it expires), and a revocation still
    reaches the keyring within its time to live."""
    secret, key_id = new_key(store)
    ttl = 1.0
    ring = Keyring(store, ttl_seconds=ttl)
    assert ring.check(secret).key is not None
    started = time.monotonic()
    while time.monotonic() - started < 2.5 * ttl:
        check = ring.from_memory(secret)
        assert check is not None, "a key in use expired: the request would wait for a read"
        assert check.key is not None
        time.sleep(0.02)

    store.revoke_key(key_id, NOW)
    revoked = time.monotonic()
    while (ring.from_memory(secret) or ring.check(secret)).key is not None:
        # Within its time to live, with room for a loaded machine's thread scheduling.
        assert time.monotonic() - revoked < ttl + 0.5, "the revocation never arrived"
        time.sleep(0.02)
