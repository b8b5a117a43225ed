"""API keys: generation, hashing and lookup (with a short cache).

A key is shown once, when created. The database keeps only its SHA-256 digest and a short
visible prefix, and a key is looked up by its full digest, never by prefix (D12). The
bearer check that reads the Authorization header is app.web.security.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache

from app.core.storage import Store
from app.core.storage.records import ApiKey

KEY_PREFIX = "psk_"
VISIBLE_CHARS = 12  # "psk_" and 8 random characters: enough to tell keys apart in a list
KEY_CACHE_SIZE = 10_000
_MISSING: Any = object()  # the cache's "not looked up yet", apart from None ("no such key")


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
    how long a revocation takes to reach this worker (PETSTORE_KEY_CACHE_SECONDS).
    """

    def __init__(self, store: Store, ttl_seconds: float) -> None:
        self.store = store
        self._cache: TTLCache[str, ApiKey | None] | None = (
            TTLCache(maxsize=KEY_CACHE_SIZE, ttl=ttl_seconds) if ttl_seconds > 0 else None
        )
        self._lock = threading.Lock()

    def lookup(self, secret: str) -> ApiKey | None:
        """The active key this secret belongs to, or None (unknown or revoked)."""
        key_digest = digest(secret)
        if self._cache is None:
            key = self.store.find_key(key_digest)
        else:
            with self._lock:
                cached = self._cache.get(key_digest, _MISSING)
            if cached is _MISSING:
                key = self.store.find_key(key_digest)
                with self._lock:
                    self._cache[key_digest] = key
            else:
                key = cached
        return key if key is not None and key.active else None

    def forget(self, secret: str) -> None:
        """Drop what the cache holds for this key, so the next lookup reads the database."""
        if self._cache is not None:
            with self._lock:
                self._cache.pop(digest(secret), None)

