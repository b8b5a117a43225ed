"""The console's throttle of password checks (D36 over D35): every failed check of a
password or of an authenticator's code (signing in, the password page's current password,
the password asked again before a key is made or rotated or a second factor changed)
counted in the quotas' storage (PETSTORE_RATELIMIT_STORAGE, through the `limits` library,
as app.core.quotas counts requests), so that with Redis every worker and host counts
together; in memory:// each worker counts its own, as for the quotas.

Two counters, each a moving window of WINDOW_MINUTES (exact):

- the name from the address (PAIR_FAILURES): the guesser's own, strict, so that a stranger
  who guesses from one address is refused there and nowhere else: the owner's right
  password from another address still goes in;
- the name alone (NAME_FAILURES), much higher: a guard against guessing spread over many
  addresses (credential stuffing) that no single address comes near.

Once either is full the next check is refused before its password is looked at, with the
seconds until the oldest failure leaves the window. The address is counted as
counted_address writes it: an IPv4 address as itself (an IPv4-mapped IPv6 address is its
IPv4 address), an IPv6 one by its /64, which one household or one server is given whole,
so that the 2**64 addresses of one attacker are one counter, not as many. The name is
counted by a digest, with its user's throttle epoch: `petstore users unlock` gives the
user a new epoch in the database, so every counter of the one before counts no longer,
on every worker and host, whatever the storage. When the storage fails, failures are
counted in this process's memory until it answers again, as the quotas fall back.
"""

from __future__ import annotations

import hashlib
import ipaddress
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

PAIR_FAILURES = 5
NAME_FAILURES = 100
WINDOW_MINUTES = 15
IPV6_PREFIX = 64


def counted_address(address: str | None) -> str:
    """The address as the throttle counts it (D36): ::1, 0::1 and 0:0:0:0:0:0:0:1 alike;
    ::ffff:192.0.2.1 as 192.0.2.1; an IPv6 address as its /64; anything that is no address
    as written (a test client's "testclient")."""
    try:
        parsed = ipaddress.ip_address((address or "").strip())
    except ValueError:
        return address or "unknown"
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.IPv6Network((parsed, IPV6_PREFIX), strict=False))
    return str(parsed)


def account(name: str, epoch: str | None) -> str:
    """What the counters know of a name: a digest of it as typed, lower case (so that no
    text of a stranger's goes into the storage's keys), with its user's throttle epoch."""
    return hashlib.sha256(f"{epoch or ''}\n{name.strip().lower()}".encode()).hexdigest()[:32]


class SignInThrottle:
    """Counts failed password checks and says how long the next must wait."""

    def __init__(self, settings: Settings, pair_failures: int = PAIR_FAILURES,
                 name_failures: int = NAME_FAILURES, minutes: int = WINDOW_MINUTES) -> None:
        self.pair = RateLimitItemPerMinute(pair_failures, minutes,
                                           namespace="console-sign-in")
        self.name = RateLimitItemPerMinute(name_failures, minutes,
                                           namespace="console-sign-in-name")
        self.primary = MovingWindowRateLimiter(sync_storage(settings))
        self.fallback = MovingWindowRateLimiter(MemoryStorage())
        self.down = False

    def _counters(self, name: str, address: str | None,
                  epoch: str | None) -> list[tuple[Any, tuple[str, ...]]]:
        who = account(name, epoch)
        return [(self.pair, (who, counted_address(address))), (self.name, (who,))]

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

    def wait(self, name: str, address: str | None, epoch: str | None = None) -> int:
        """Seconds the next check of this name's password from this address must wait: 0
        when it may go ahead. epoch: the user's throttle epoch (None for a name that is
        no user's, or a user never unlocked)."""
        def seconds(limiter: MovingWindowRateLimiter) -> int:
            longest = 0
            for item, keys in self._counters(name, address, epoch):
                if not limiter.test(item, *keys):
                    reset = limiter.get_window_stats(item, *keys).reset_time
                    longest = max(longest, math.ceil(reset - time.time()), 1)
            return longest

        return int(self._run(seconds))

    def failed(self, name: str, address: str | None, epoch: str | None = None) -> None:
        """Count a failed check against the name from the address, and the name alone."""
        def count(limiter: MovingWindowRateLimiter) -> None:
            for item, keys in self._counters(name, address, epoch):
                limiter.hit(item, *keys)

        self._run(count)
