"""The console's sign-in throttle (D35): failed sign-ins counted per account and per
address in the quotas' storage (PETSTORE_RATELIMIT_STORAGE, through the `limits` library,
as app.core.quotas counts requests), so that with Redis every worker and host counts
together; in memory:// each worker counts its own, as for the quotas.

After FAILURES failures of one account, or from one address, within WINDOW_MINUTES (a
moving window: exact), the next attempt is refused before its password is looked at, with
the seconds until the oldest failure leaves the window. When the storage fails, failures
are counted in this process's memory until it answers again, as the quotas fall back.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import Any

from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from app.core.config import Settings
from app.core.quotas.counters import sync_storage

log = logging.getLogger("petstore.console")

FAILURES = 5
WINDOW_MINUTES = 15


def _subjects(name: str, address: str | None) -> list[tuple[str, str]]:
    """The counters a sign-in counts in: its account's (by a digest of the name as typed,
    lower case, so that no text of a stranger's goes into the storage's keys) and its
    address's."""
    account = hashlib.sha256(name.strip().lower().encode()).hexdigest()[:32]
    return [("account", account), ("address", address or "unknown")]


class SignInThrottle:
    """Counts failed sign-ins and says how long the next must wait."""

    def __init__(self, settings: Settings, failures: int = FAILURES,
                 minutes: int = WINDOW_MINUTES) -> None:
        self.item = RateLimitItemPerMinute(failures, minutes, namespace="console-sign-in")
        self.primary = MovingWindowRateLimiter(sync_storage(settings))
        self.fallback = MovingWindowRateLimiter(MemoryStorage())
        self.down = False

    def _run(self, action: Any) -> Any:
        if not self.down:
            try:
                return action(self.primary)
            except Exception as exc:  # any failure of the storage: count here meanwhile
                log.warning("the sign-in throttle's storage failed (%s); counting failed "
                            "sign-ins in this process until it answers", type(exc).__name__)
                self.down = True
        result = action(self.fallback)
        try:  # back to the storage as soon as it answers
            self.down = not self.primary.storage.check()
        except Exception:
            self.down = True
        return result

    def wait(self, name: str, address: str | None) -> int:
        """Seconds the next sign-in of this name from this address must wait: 0 when it
        may go ahead."""
        def seconds(limiter: MovingWindowRateLimiter) -> int:
            longest = 0
            for subject in _subjects(name, address):
                if not limiter.test(self.item, *subject):
                    reset = limiter.get_window_stats(self.item, *subject).reset_time
                    longest = max(longest, math.ceil(reset - time.time()), 1)
            return longest

        return int(self._run(seconds))

    def failed(self, name: str, address: str | None) -> None:
        """Count a failed sign-in against the name and the address."""
        def count(limiter: MovingWindowRateLimiter) -> None:
            for subject in _subjects(name, address):
                limiter.hit(self.item, *subject)

        self._run(count)
