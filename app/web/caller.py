"""The caller layer (app/web/chain.py): who calls, and how much they may (D8-D12).

It looks the request's bearer token up once, for every layer after it: the kept answers
are replayed only to a valid key, and the bearer check (security.py) reads what it found.
The key is looked up through the core's Keyring (app.core.keys), from its short cache when
it can tell, else from the store in a thread, never on the event loop: a guessed secret
costs no database read (D12). Then, where quotas are on, it counts every API request
against its caller's quota (app.core.quotas), refuses it over quota (429), bans keys that
keep hammering, and decides the rate-limit headers of every response.

Why a layer before routing and not Flask-Limiter: requests that Connexion refuses (401,
400, 405) never reach a handler, yet the specification wants the rate-limit headers on
every response.

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
from app.core.errors import StoreUnavailable
from app.core.keys import KeyCheck, Keyring, unix_time_text
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
keys_log = logging.getLogger("petstore.keys")


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


class Caller:
    """Looks up what the request's bearer token opens, once (a request without one token
    reads as no key); then, with quotas (None: PETSTORE_RATELIMIT_ENABLED off), counts
    the request against its caller, refuses it over quota, and decides the rate-limit
    headers of every answer.

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
        quotas: Quotas | None,
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
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        found = exchange(scope)
        token = bearer_token(scope)
        if token is not None:
            try:
                found.caller = await self.check(token)
            except StoreUnavailable as exc:
                keys_log.warning("store unavailable: %s", exc.message)
                found.caller_error = exc
        if self.quotas is not None and not self._exempt(scope):
            await self._count(self.quotas, scope, found, token)
        await self.app(scope, receive, send)

    async def check(self, token: str) -> KeyCheck:
        """What the token opens: from memory when the keyring can tell, else read from
        the store in a thread."""
        check = self.keyring.from_memory(token)
        if check is None:
            check = await run_in_threadpool(self.keyring.check, token)
        return check

    async def _count(self, quotas: Quotas, scope: Scope, found: Exchange,
                     token: str | None) -> None:
        """The request counted against its caller; raises its refusal over quota."""
        if found.caller_error is not None:  # the key could not be read
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
                verdict = await quotas.run(lambda c: c.peek(subject, plan))
                refusal = _banned(ban_ends, now)
            else:
                verdict = await quotas.run(lambda c: c.consume(subject, plan))
                if not verdict.allowed:
                    refusal = await self._refusal(quotas, verdict, key, token, subject,
                                                  now)
        except QuotaStorageDown:
            _unknown(found, plan, "The service cannot check quotas right now; retry shortly.")

        # The errors layer writes them on the response, whoever makes it: the Error of a
        # refusal too, which it answers.
        found.decide(rate_limit_headers(verdict, now))
        if refusal is not None:
            raise refusal

    async def _refusal(
        self, quotas: Quotas, verdict: Verdict, key: ApiKey | None, token: str | None, subject: str,
        now: float,
    ) -> KeyBanned | QuotaSpent:
        """The refusal of a request over quota: 429, or a ban after repeated ones."""
        retry_after = verdict.retry_after(now)
        if key is not None and token is not None and self.settings.ban_seconds > 0:
            bans = await quotas.run(
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
