"""API keys: generation, hashing, lookup, and the bearer-info function the YAML names.

A key is shown once, when created. The database keeps only its SHA-256 digest and a short
visible prefix, and a key is looked up by its full digest, never by prefix (D12).
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cachetools import TTLCache
from connexion.security import AbstractSecurityHandler, BearerSecurityHandler

from app.storage import ApiKey, Store

KEY_PREFIX = "psk_"
VISIBLE_CHARS = 12  # "psk_" and 8 random characters: enough to tell keys apart in a list
KEY_CACHE_SIZE = 10_000


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


_MISSING: Any = object()

SCOPE_KEY = "petstore.keyring"
LOOKED_UP = "petstore.api_key"


def bearer_info(token: str, request: Any) -> dict[str, Any] | None:
    """Connexion's x-bearerInfoFunc: the token info for a valid key, None otherwise.

    Runs on the event loop thread (Connexion 3), so the lookup is cached in Keyring.
    """
    scope = request.scope
    # The rate-limit middleware, when on, has looked this very token up already.
    key = scope[LOOKED_UP] if LOOKED_UP in scope else scope[SCOPE_KEY].lookup(token)
    if key is None:
        return None
    return {"sub": key.id, "key_id": key.id, "plan": key.plan}


class BearerSecurity(BearerSecurityHandler):
    """Connexion's bearer check, unchanged but for one thing: it asks whether the info
    function takes `required_scopes` and `request` by reading its signature, twice per
    request; the answer is read once here."""

    @staticmethod
    @functools.cache
    def _accepts_kwarg(func: Callable[..., Any], keyword: str) -> bool:
        return AbstractSecurityHandler._accepts_kwarg(func, keyword)


SECURITY_MAP = {"bearer": BearerSecurity}
