"""API keys: generation, hashing, lookup (with a short cache) and their lifecycle.

A key is shown once, when created or rotated. The database keeps only its SHA-256 digest
and a short visible prefix, and a key is looked up by its full digest, never by prefix
(D12). A key may expire, may have been rotated (its old secret works until the grace
ends), has a scope (read or write), and records when it was last used (D21). The bearer
check that reads the Authorization header is app.web.security.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import math
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from app.core import names
from app.core.errors import InvalidParameter, PetstoreError
from app.core.orders import InvalidOrder, format_time, parse_time, utc_now
from app.core.storage import Store
from app.core.storage.records import KEY_FIELDS, PLANS, SCOPES, ApiKey

log = logging.getLogger("petstore.keys")

KEY_PREFIX = "psk_"
VISIBLE_CHARS = 12  # "psk_" and 8 random characters: enough to tell keys apart in a list
KEY_CACHE_SIZE = 10_000
# How old the worker's set of every key's digest may be when it says a token opens nothing:
# a token refused from memory, not by a database read per guess, so that guessing keys costs
# the store nothing. A miss on an older set reloads it, so a key made just now works at once
# unless another token missed within this time; the store sees at most one reload of the
# set this often per worker.
DIGESTS_FRESH = 0.05
_MISSING: Any = object()  # the cache's "not looked up yet", apart from None ("no such key")
# Share of PETSTORE_KEY_CACHE_SECONDS after which a key in use is read again, ahead of its
# expiry, by the keyring's own thread, so that no request waits for the read.
REFRESH_AFTER = 0.5
LAST_USED_EVERY = 60.0  # seconds: last use is kept to the minute (D21)
DURATION = re.compile(r"(\d+)([smhdw])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}
NAME_MAX = 200  # characters of a key's name


class InvalidKeyValue(PetstoreError):
    """A duration, a time or an exported key that cannot be used; the message says why."""


@dataclass(frozen=True)
class KeyCheck:
    """What a secret is worth now: the key it opens (None if it opens nothing), and whether
    it would open one but for the key's expiry (so that the edge can say it expired)."""

    key: ApiKey | None
    expired: bool = False


NO_KEY = KeyCheck(None)


def check_key(key: ApiKey | None, key_digest: str, now: float) -> KeyCheck:
    """Whether a key found by a secret's digest lets that secret in at the time now: not
    revoked, not expired, and the current secret or the one before it within its grace."""
    if key is None or not key.active:
        return NO_KEY
    if key.digest != key_digest and (key.previous_ends is None or key.previous_ends <= now):
        return NO_KEY  # the secret before a rotation, past its grace
    if key.expires is not None and key.expires <= now:
        return KeyCheck(None, expired=True)
    return KeyCheck(key)


@dataclass(frozen=True)
class NewKey:
    """A freshly generated key: the secret (shown once) and what is stored of it."""

    secret: str
    prefix: str
    digest: str


def digest(secret: str) -> str:
    """SHA-256 of the key, hex: what the database stores and looks up by.

    A plain hash is enough: the key carries 256 bits of randomness, so there is nothing
    for a slow password hash to protect against.
    """
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).hexdigest()


def generate_key() -> NewKey:
    """A new random key with 32 bytes (256 bits) of entropy."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    return NewKey(secret=secret, prefix=secret[:VISIBLE_CHARS], digest=digest(secret))


class Keyring:
    """Looks keys up by digest, trusting an answer for a few seconds.

    The cache keeps the database out of the path of every request; its time to live is
    how long a revocation takes to reach this worker (PETSTORE_KEY_CACHE_SECONDS). In front
    of it, the set of every key's digest answers a token that opens nothing from memory
    (DIGESTS_FRESH), so that guessing keys costs no database read per guess.

    A key in use is read again ahead of its expiry, once REFRESH_AFTER of its time to live
    has passed, by a thread of the keyring's own; its requests go on being answered from
    memory meanwhile. Waiting for the expiry instead sent every request in flight with that
    key, up to one per connection, to a thread of its own to read it at once, every
    PETSTORE_KEY_CACHE_SECONDS, and that burst was the tail of the latency. An answer is
    still never older than the time to live: if the read ahead fails, the entry expires as
    before.
    """

    def __init__(self, store: Store, ttl_seconds: float, last_used: LastUsed | None = None) -> None:
        self.store = store
        # digest -> (the key or None, time.monotonic() of the reading)
        self._cache: TTLCache[str, tuple[ApiKey | None, float]] | None = (
            TTLCache(maxsize=KEY_CACHE_SIZE, ttl=ttl_seconds) if ttl_seconds > 0 else None
        )
        self._lock = threading.Lock()
        self.last_used = last_used
        self._digests: frozenset[str] = frozenset()
        self._digests_at = -math.inf  # time.monotonic() when the set's reading began
        self._digests_fresh = min(DIGESTS_FRESH, ttl_seconds)
        self._digests_lock = threading.Lock()
        self._refresh_after = ttl_seconds * REFRESH_AFTER
        self._due: set[str] = set()  # digests to read again, under _lock
        self._wake = threading.Event()
        self._pid = 0

    def from_memory(self, secret: str) -> KeyCheck | None:
        """What check() would answer, when memory can tell without the store: a token no
        key has (by a fresh set of digests), or a cached key. None: call check(), which may
        read the store, from a thread (not the event loop)."""
        key_digest = digest(secret)
        if key_digest not in self._digests and (
                time.monotonic() - self._digests_at < self._digests_fresh):
            return NO_KEY
        cached = self._cached(key_digest)
        return None if cached is _MISSING else self._judge(cached, key_digest)

    def _cached(self, key_digest: str) -> Any:
        """The cached key (or None) for the digest, or _MISSING; asks for it to be read
        again when it is old enough."""
        if self._cache is None:
            return _MISSING
        with self._lock:
            entry = self._cache.get(key_digest)
            if entry is None:
                return _MISSING
            key, read_at = entry
            if (time.monotonic() - read_at < self._refresh_after
                    or key_digest in self._due):
                return key
            self._due.add(key_digest)
        if self._pid != os.getpid():
            self._pid = os.getpid()
            threading.Thread(target=self._refresh, name="petstore-key-refresh",
                             daemon=True).start()
        self._wake.set()
        return key

    def _refresh(self) -> None:
        """The keyring's thread: reads again the keys that are due."""
        while True:
            self._wake.wait()
            self._wake.clear()
            with self._lock:
                due = list(self._due)
            for key_digest in due:
                try:
                    self._read(key_digest)
                except PetstoreError as exc:  # the store is down: the entry expires
                    log.debug("could not read a key again: %s", exc.message)
                except Exception:  # a fault of ours: said, and the thread goes on
                    log.exception("could not read a key again")
                finally:
                    with self._lock:
                        self._due.discard(key_digest)

    def _read(self, key_digest: str) -> ApiKey | None:
        """The key with this digest, from the store, and cached."""
        read_at = time.monotonic()
        key = self.store.find_key(key_digest)
        if self._cache is not None:
            with self._lock:
                self._cache[key_digest] = (key, read_at)
        return key

    def _reload_digests(self) -> None:
        with self._digests_lock:  # concurrent misses share one reading
            if time.monotonic() - self._digests_at < self._digests_fresh:
                return
            started = time.monotonic()
            self._digests = frozenset(self.store.key_digests())
            self._digests_at = started

    def check(self, secret: str) -> KeyCheck:
        """What this secret opens now (see check_key); a key it opens is marked used."""
        key_digest = digest(secret)
        if key_digest not in self._digests:
            self._reload_digests()
            if key_digest not in self._digests:
                return NO_KEY
        key = self._cached(key_digest)
        if key is _MISSING:
            key = self._read(key_digest)
        return self._judge(key, key_digest)

    def _judge(self, key: ApiKey | None, key_digest: str) -> KeyCheck:
        now = time.time()
        result = check_key(key, key_digest, now)
        if result.key is not None and self.last_used is not None:
            self.last_used.seen(result.key.id, now)
        return result

    def forget(self, secret: str) -> None:
        """Drop what the cache holds for this key, so the next lookup reads the database."""
        if self._cache is not None:
            with self._lock:
                self._cache.pop(digest(secret), None)


class LastUsed:
    """When each key was last used, written at most once a minute per key by this process,
    from a thread of its own: a request only notes the time in memory (D21).

    A write that fails (the database is down) is logged and dropped; the next minute's
    use writes again. The thread starts on first use in each process (a forked worker
    has none of its parent's threads) and is a daemon: at most a minute of last uses is
    lost when a process ends.
    """

    def __init__(self, store: Store, every: float = LAST_USED_EVERY) -> None:
        self.store = store
        self.every = every
        self._due: dict[int, float] = {}  # key id -> when its next use is worth writing
        self._pending: dict[int, str] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._pid = 0

    def seen(self, key_id: int, now: float) -> None:
        """Note that the key was used at now; cheap when it was noted within the minute."""
        if now < self._due.get(key_id, 0.0):
            return
        with self._lock:
            self._due[key_id] = now + self.every
            self._pending[key_id] = unix_time_text(now)
        if self._pid != os.getpid():
            self._pid = os.getpid()
            threading.Thread(target=self._run, name="petstore-last-used", daemon=True).start()
        self._wake.set()

    def flush(self) -> None:
        """Write what has been noted and not yet written."""
        with self._lock:
            uses, self._pending = self._pending, {}
        if not uses:
            return
        try:
            self.store.touch_keys(uses)
        except PetstoreError as exc:
            log.warning("could not record when keys were last used: %s", exc.message)
        finally:
            self.store.close()  # this thread's connection, if the store keeps one

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            self.flush()


# durations and times ----------------------------------------------------------------------


def parse_duration(text: str) -> float:
    """Seconds in a duration such as 90d, 24h, 30m, 45s, 2w or 1d12h."""
    words = text.strip().lower()
    if not words or DURATION.sub("", words):
        raise InvalidKeyValue(
            f"{text!r} is not a duration: write a number and a unit, s, m, h, d or w "
            "(90d, 24h, 1d12h)")
    return float(sum(int(n) * UNIT_SECONDS[unit] for n, unit in DURATION.findall(words)))


def expiry(expires_in: str | None, expires_at: str | None, now: float) -> str | None:
    """The stored expiry for --expires-in (a duration from now) or --expires-at (a
    date-time with an offset), or None when neither is given."""
    if expires_in is not None and expires_at is not None:
        raise InvalidKeyValue("give --expires-in or --expires-at, not both")
    if expires_in is not None:
        return unix_time_text(now + parse_duration(expires_in))
    if expires_at is not None:
        return stored_time(expires_at, "--expires-at")
    return None


def stored_time(text: str, name: str) -> str:
    """A date-time with an offset, as times are stored (UTC, whole seconds, Z)."""
    try:
        return parse_time(text, name)
    except InvalidOrder as exc:
        raise InvalidKeyValue(str(exc)) from None


def unix_time_text(seconds: float) -> str:
    """A Unix time as times are stored (UTC, whole seconds, Z)."""
    return format_time(dt.datetime.fromtimestamp(seconds, dt.UTC))


def rotation(store: Store, key_id: int, grace_seconds: float,
             now: float) -> tuple[str, ApiKey | None]:
    """Give the key a new secret; the old one works for grace_seconds more. Returns the
    new secret (shown once) and the key as it is now (None: no such key)."""
    new = generate_key()
    return new.secret, store.rotate_key(key_id, new.digest, new.prefix,
                                        unix_time_text(now + grace_seconds))


# the lifecycle, as the CLI and the console both carry it out -------------------------------


class KeyNotFound(PetstoreError):
    def __init__(self, key_id: int) -> None:
        super().__init__(f"No key has the id {key_id}.")
        self.key_id = key_id


class KeyRevoked(PetstoreError):
    def __init__(self, key_id: int) -> None:
        super().__init__(f"Key {key_id} is revoked; create a new one instead.")
        self.key_id = key_id


def check_plan_numbers(plan: str, per_minute: int | None, per_day: int | None) -> None:
    """An enterprise key carries its own requests a minute and a day; every other plan
    takes its numbers from x-plans (D11). Raises InvalidKeyValue."""
    if plan not in PLANS:
        raise InvalidKeyValue(f"the plan must be one of {', '.join(PLANS)}")
    if plan == "enterprise" and (per_minute is None or per_day is None):
        raise InvalidKeyValue("an enterprise key needs its requests a minute and a day")
    if plan != "enterprise" and (per_minute is not None or per_day is not None):
        raise InvalidKeyValue(
            f"the {plan} plan sets its own limits (x-plans in the OpenAPI document); "
            "requests a minute and a day of a key's own are for enterprise keys")


def check_name(name: str) -> str:
    """A key's name as the CLI and the console take it: who or what the key is for, at most
    NAME_MAX characters, text a person can read (D37, names.readable). Raises
    InvalidKeyValue."""
    if len(name) > NAME_MAX:
        raise InvalidKeyValue(f"the name must be at most {NAME_MAX} characters")
    try:
        return names.readable(name, "name")
    except InvalidParameter as exc:
        raise InvalidKeyValue(f"the {exc.sentence}") from None


def create(store: Store, *, plan: str, name: str, per_minute: int | None,
           per_day: int | None, scope: str = "write",
           expires_at: str | None = None) -> tuple[str, ApiKey]:
    """A new key: its secret (shown once; the store keeps its digest, D12) and the key as
    stored. Raises InvalidKeyValue for a name check_name refuses, a plan and numbers that
    do not go together, or an unknown scope."""
    check_name(name)
    check_plan_numbers(plan, per_minute, per_day)
    if scope not in SCOPES:
        raise InvalidKeyValue(f"the scope must be one of {', '.join(SCOPES)}")
    new = generate_key()
    key = store.create_key(digest=new.digest, prefix=new.prefix, name=name, plan=plan,
                           per_minute=per_minute, per_day=per_day,
                           now=utc_now(), scope=scope,
                           expires_at=expires_at)
    return new.secret, key


def rotate(store: Store, key_id: int, grace_seconds: float, now: float) -> tuple[str, ApiKey]:
    """Give an active key a new secret (rotation); raises KeyNotFound, KeyRevoked."""
    existing = store.get_key(key_id)
    if existing is None:
        raise KeyNotFound(key_id)
    if not existing.active:
        raise KeyRevoked(key_id)
    secret, rotated = rotation(store, key_id, grace_seconds, now)
    if rotated is None:
        raise KeyNotFound(key_id)
    return secret, rotated


def renew(store: Store, key_id: int) -> tuple[str, ApiKey]:
    """Give an active key a new secret in place of its current one, leaving the old secret
    of a rotation and its grace as they are: what a form that made or rotated the key does
    when it is sent again (the console's forms applied once), so that the secret its last
    answer shows is the one that works, and the clients' old secret still works. Raises
    KeyNotFound, KeyRevoked."""
    existing = store.get_key(key_id)
    if existing is None:
        raise KeyNotFound(key_id)
    if not existing.active:
        raise KeyRevoked(key_id)
    new = generate_key()
    renewed = store.renew_key_secret(key_id, new.digest, new.prefix)
    if renewed is None:
        raise KeyNotFound(key_id)
    return new.secret, renewed


def banned(key: ApiKey, now: str) -> bool:
    """Whether the key's ban still runs at now (a stored time): it ends at banned_until."""
    return key.banned_until is not None and key.banned_until > now


def state_of(key: ApiKey, now: str) -> str:
    """What a person most needs to know of a key's state, one phrase (now: a stored
    time)."""
    if key.revoked_at:
        return f"revoked {key.revoked_at}"
    if key.expires_at and key.expires_at <= now:
        return f"expired {key.expires_at}"
    states = []
    if banned(key, now):
        states.append(f"banned until {key.banned_until}")
    if key.previous_until and key.previous_until > now:
        states.append(f"old secret until {key.previous_until}")
    return ", ".join(states) or "active"


# export and import ------------------------------------------------------------------------

EXPORTED = KEY_FIELDS
HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def exported(key: ApiKey) -> dict[str, Any]:
    """A key as `keys export` writes it: its digests and metadata, never a secret (which is
    never stored)."""
    return {field: getattr(key, field) for field in EXPORTED}


def key_from_export(row: dict[str, Any]) -> ApiKey:
    """An exported key, checked: what `keys import` stores. Empty values count as absent
    (a CSV cell)."""
    values: dict[str, Any] = {field: (None if row.get(field) in ("", None) else row.get(field))
                              for field in EXPORTED}
    unknown = sorted(set(row) - set(EXPORTED))
    if unknown:
        raise InvalidKeyValue(f"unknown field(s) {', '.join(unknown)}")
    for field in ("id", "prefix", "plan", "created_at", "digest"):
        if values[field] is None:
            raise InvalidKeyValue(f"{field} is missing")
    for field in ("id", "per_minute", "per_day"):
        if values[field] is not None:
            try:
                values[field] = int(values[field])
            except (TypeError, ValueError):
                raise InvalidKeyValue(f"{field} must be a whole number, got "
                                      f"{values[field]!r}") from None
            if values[field] < 1:
                raise InvalidKeyValue(f"{field} must be 1 or more, got {values[field]}")
    if values["plan"] not in PLANS:
        raise InvalidKeyValue(f"plan must be one of {', '.join(PLANS)}, got {values['plan']!r}")
    if (values["plan"] == "enterprise") != (values["per_minute"] is not None
                                            and values["per_day"] is not None):
        raise InvalidKeyValue("per_minute and per_day are set for enterprise keys, and only "
                              "for them")
    values["scope"] = values["scope"] or "write"
    if values["scope"] not in SCOPES:
        raise InvalidKeyValue(f"scope must be read or write, got {values['scope']!r}")
    for field in ("digest", "previous_digest"):
        if values[field] is not None and not HEX_DIGEST.fullmatch(str(values[field])):
            raise InvalidKeyValue(f"{field} must be 64 lowercase hexadecimal digits (a "
                                  "SHA-256 digest, never a key)")
    if (values["previous_digest"] is None) != (values["previous_until"] is None):
        raise InvalidKeyValue("previous_digest and previous_until go together")
    for field in ("created_at", "revoked_at", "banned_until", "expires_at", "last_used_at",
                  "previous_until"):
        if values[field] is not None:
            values[field] = stored_time(str(values[field]), field)
    values["name"] = check_name("" if values["name"] is None else str(values["name"]))
    values["prefix"] = str(values["prefix"])
    return ApiKey(**values)
