"""What a running service holds for its handlers and middleware: the settings, the store,
the keyring, the list cache and the readiness checks, opened in one place."""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field

from app.core.config import Settings
from app.core.errors import StoreUnavailable
from app.core.health import Readiness
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
    # /readyz's checks, run off the requests' path (D41).
    readiness: Readiness
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
    # The quota storage is checked when it is shared (counters in process memory cannot
    # fail); its failure makes the instance unready only when quotas fail closed (D16).
    shared = (settings.ratelimit_enabled
              and not settings.ratelimit_storage.removeprefix("async+").startswith("memory://"))
    readiness = Readiness(store, storage_probe(settings) if shared else None,
                          settings.ratelimit_on_error == "closed")
    last_used = LastUsed(store) if settings.key_last_used else None
    return Services(settings, store, Keyring(store, settings.key_cache_seconds, last_used),
                    ListCache(settings.list_cache_bytes), readiness)
