"""The rate-limit middleware (D8-D10): counts every API request against its
caller's quota (app.core.quotas), refuses it over quota (429), bans keys that keep
hammering, and decides the rate-limit headers of every response.

Why an ASGI middleware and not Flask-Limiter: requests that Connexion rejects (401, 400,
405) never reach Flask, yet the specification wants the rate-limit headers on every
response, and a 429 raised inside Flask loses its headers.

Counting (D9): a request with a valid key counts against the key's windows; one without
(no key, unknown, revoked) against its client address, with the Free plan's numbers.
Over quota, the request is refused here (QuotaSpent, which the errors layer answers 429),
neither passed on nor counted.

Bans (D10): BAN_AFTER violations within BAN_WINDOW seconds ban the key for BAN_SECONDS.
The ban is written on the key in the database, so every worker and the CLI see it.
"""

from __future__ import annotations

import logging
import math
import time
from functools import lru_cache
from typing import NoReturn

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core import metrics
from app.core.config import Settings
from app.core.keys import Keyring, unix_time_text
from app.core.quotas.counters import LimitsCounter, Quotas, QuotaStorageDown, Verdict, Window
from app.core.quotas.plans import Plan, anonymous_plan, plan_of
from app.core.storage import Store
from app.core.storage.records import ApiKey
from app.web.errors import (
    RETRY_AFTER_UNAVAILABLE,
    UNAVAILABLE_MESSAGE,
    KeyBanned,
    QuotaSpent,
    QuotasUnknown,
)
from app.web.exchange import Exchange, exchange
from app.web.security import bearer_token

log = logging.getLogger("petstore.quotas")


@lru_cache(maxsize=1024)
def _policy(windows: tuple[tuple[str, int, int], ...]) -> bytes:
    return ", ".join(f'"{name}";q={limit};w={seconds}'
                     for name, limit, seconds in windows).encode()


@lru_cache(maxsize=16)
def _quoted(name: str) -> bytes:
    return f'"{name}"'.encode()


def rate_limit_headers(verdict: Verdict, now: float) -> list[tuple[bytes, bytes]]:
    """X-RateLimit-* for the tightest window (D8), and the IETF draft's RateLimit-Policy
    and RateLimit fields for both (draft-ietf-httpapi-ratelimit-headers). Every answer
    carries them, so they are built in one pass over the windows."""
    tightest = verdict.tightest
    policy = []
    state = []
    for w in verdict.windows:
        policy.append((w.name, w.limit, w.seconds))
        state.append(b"%b;r=%d;t=%d" % (_quoted(w.name), w.remaining,
                                       max(0, math.ceil(w.reset - now))))
    return [
        (b"x-ratelimit-limit", b"%d" % tightest.limit),
        (b"x-ratelimit-remaining", b"%d" % tightest.remaining),
        (b"x-ratelimit-reset", b"%d" % math.ceil(tightest.reset)),
        (b"ratelimit-policy", _policy(tuple(policy))),
        (b"ratelimit", b", ".join(state)),
    ]


# middleware -----------------------------------------------------------------------------


class RateLimitMiddleware:
    """Counts every API request against its caller (the caller layer found the key),
    refuses it over quota, and decides the rate-limit headers of every answer.

    It sits before Connexion's routing (app/web/chain.py), so it sees every request, those
    Connexion refuses included, and inside the errors layer: its refusals are raised
    (QuotaSpent, KeyBanned, QuotasUnknown), after it decided their rate-limit headers on
    the Exchange, and app/web/errors.py answers them as it answers every other error.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        settings: Settings,
        store: Store,
        keyring: Keyring,
        plans: dict[str, Plan],
        quotas: Quotas,
        exempt_prefixes: tuple[str, ...],
    ) -> None:
        self.app = app
        self.settings = settings
        self.store = store
        self.keyring = keyring
        self.plans = plans
        self.quotas = quotas
        self.exempt_prefixes = exempt_prefixes
        # D9: requests without a valid key count per address, by default with Free's numbers.
        self.anonymous = anonymous_plan(settings, plans)

    def _exempt(self, scope: Scope) -> bool:
        if scope["path"].startswith(self.exempt_prefixes):
            return True
        # A CORS preflight carries no credentials and must not spend a quota.
        return scope["method"] == "OPTIONS" and any(
            k.lower() == b"access-control-request-method" for k, _ in scope["headers"]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._exempt(scope):
            await self.app(scope, receive, send)
            return
        found = exchange(scope)
        if found.caller_error is not None:  # the caller layer could not read the key
            _unknown(found, self.anonymous, UNAVAILABLE_MESSAGE)
        key = found.key
        if key is not None:
            subject, plan = f"key/{key.id}", plan_of(key, self.plans)
        else:
            client = scope.get("client") or ("unknown", 0)
            subject, plan = f"addr/{client[0]}", self.anonymous

        now = time.time()
        refusal: KeyBanned | QuotaSpent | None = None
        try:
            ban_ends = key.ban_ends if key is not None else None
            if ban_ends is not None and ban_ends > now:
                verdict = await self.quotas.run(lambda c: c.peek(subject, plan))
                refusal = _banned(ban_ends, now)
            else:
                verdict = await self.quotas.run(lambda c: c.consume(subject, plan))
                if not verdict.allowed:
                    refusal = await self._refusal(verdict, key, bearer_token(scope), subject,
                                                  now)
        except QuotaStorageDown:
            _unknown(found, plan, "The service cannot check quotas right now; retry shortly.")

        # The answer layer writes them on the response, whoever makes it: the Error of a
        # refusal too, which the errors layer answers.
        found.decide(rate_limit_headers(verdict, now))
        if refusal is not None:
            raise refusal
        await self.app(scope, receive, send)

    async def _refusal(
        self, verdict: Verdict, key: ApiKey | None, token: str | None, subject: str,
        now: float,
    ) -> KeyBanned | QuotaSpent:
        """The refusal of a request over quota: 429, or a ban after repeated ones."""
        retry_after = verdict.retry_after(now)
        if key is not None and token is not None and self.settings.ban_seconds > 0:
            bans = await self.quotas.run(
                lambda c: self._violation_bans(c, subject, retry_after)
            )
            if bans:
                until = now + self.settings.ban_seconds
                banned = unix_time_text(until)
                await run_in_threadpool(self.store.ban_key, key.id, banned)
                self.keyring.forget(token)
                metrics.BANS.inc()
                log.warning("key %d banned until %s after repeated 429s", key.id, banned)
                return _banned(until, now)
        metrics.REFUSED.labels("rate_limit_exceeded").inc()
        return QuotaSpent(verdict.tightest.name, retry_after)

    async def _violation_bans(self, counter: LimitsCounter, subject: str, retry_after: int) -> bool:
        if not await counter.refusal_is_violation(subject, retry_after):
            return False
        return await counter.violation_bans(
            subject, self.settings.ban_after, self.settings.ban_window
        )


def _banned(ban_ends: float, now: float) -> KeyBanned:
    """The refusal of a banned key's request, until its ban ends."""
    metrics.REFUSED.labels("api_key_banned").inc()
    return KeyBanned(max(1, math.ceil(ban_ends - now)))


def _unknown(found: Exchange, plan: Plan, message: str) -> NoReturn:
    """503 when the caller's windows cannot be known: they are reported closed until
    Retry-After, which is honest about what the client may do."""
    now = time.time()
    retry = RETRY_AFTER_UNAVAILABLE
    windows = (Window("minute", plan.per_minute, 60, 0, now + retry),
               Window("day", plan.per_day, 86_400, 0, now + retry))
    found.decide(rate_limit_headers(Verdict(False, windows), now))
    raise QuotasUnknown(message)
