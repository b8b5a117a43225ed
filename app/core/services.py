"""What a running service holds for its handlers and middleware: the settings, the store,
the keyring, the list cache and the quota storage's probe, opened in one place."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from app.core.config import Settings
from app.core.errors import StoreUnavailable
from app.core.keys import Keyring, LastUsed
from app.core.listing import ListCache
from app.core.orders import Placing
from app.core.quotas.counters import storage_probe
from app.core.storage import Store, open_store

log = logging.getLogger("petstore.store")


@dataclass(frozen=True)
class Services:
    """What the handlers and middleware share: settings, the store and the keyring."""

    settings: Settings
    store: Store
    keyring: Keyring
    lists: ListCache
    # Checks the quota storage for /readyz; None where its failure cannot make the
    # service unready (quotas off, or falling back to process memory: D16).
    quota_probe: Callable[[], bool] | None = None
    # The idempotency keys this process is placing orders under (D23).
    placing: Placing = field(default_factory=Placing)


def open_services(settings: Settings) -> Services:
    """Open the store the settings name, bring its schema up to date if the database
    answers, and build what the service shares around it."""
    store = open_store(settings, migrate=False)
    try:
        store.migrate()
        # Each start begins an era of the feed's positions (D26): a cursor from after the
        # point a backup restored the database to is then told apart from one of now.
        store.begin_era(secrets.token_hex(8))
    except StoreUnavailable as exc:
        # A worker that starts while its database is down (restarted by gunicorn during an
        # outage, say) serves 503s until it answers; the PostgreSQL store migrates then.
        log.warning("the database does not answer at start (%s); requests get 503 until "
                    "it does", exc.message)
    fails_closed = settings.ratelimit_enabled and settings.ratelimit_on_error == "closed"
    last_used = LastUsed(store) if settings.key_last_used else None
    return Services(settings, store, Keyring(store, settings.key_cache_seconds, last_used),
                    ListCache(settings.list_cache_bytes),
                    storage_probe(settings) if fails_closed else None)
