"""The rate-limit middleware (D8-D10): counts every API request against its
caller's quota (app.core.quotas), answers 429 over quota, bans keys that keep hammering,
and puts the rate-limit headers on every response.

Why an ASGI middleware and not Flask-Limiter: requests that Connexion rejects (401, 400,
405) never reach Flask, yet the specification wants the rate-limit headers on every
response, and a 429 raised inside Flask loses its headers.

Counting (D9): a request with a valid key counts against the key's windows; one without
(no key, unknown, revoked) against its client address, with the Free plan's numbers.
Over quota, the request is answered 429 here, neither passed on nor counted.

Bans (D10): BAN_AFTER violations within BAN_WINDOW seconds ban the key for BAN_SECONDS.
The ban is written on the key in the database, so every worker and the CLI see it.
"""

from __future__ import annotations

import logging
import math
import time
from functools import lru_cache

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from app.core import metrics
from app.core.config import Settings
from app.core.keys import Keyring, unix_time_text
from app.core.quotas.counters import LimitsCounter, Quotas, QuotaStorageDown, Verdict, Window
from app.core.quotas.plans import Plan, anonymous_plan, plan_of
from app.core.storage import Store
from app.core.storage.records import ApiKey
from app.web.errors import RETRY_AFTER_UNAVAILABLE, UNAVAILABLE_MESSAGE, send_error
from app.web.exchange import exchange
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
    answers 429 over quota, and decides the rate-limit headers of every answer.

    It sits before Connexion's exception middleware (app/web/chain.py), so it sees every
    request, those Connexion refuses included, and sends its own 429 and 503: an exception
    raised here would not reach Connexion's error handlers.
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
            await self._unavailable(send, self.anonymous, UNAVAILABLE_MESSAGE)
            return
        key = found.key
        if key is not None:
            subject, plan = f"key/{key.id}", plan_of(key, self.plans)
        else:
            client = scope.get("client") or ("unknown", 0)
            subject, plan = f"addr/{client[0]}", self.anonymous

        now = time.time()
        try:
            ban_ends = key.ban_ends if key is not None else None
            if ban_ends is not None and ban_ends > now:
                verdict = await self.quotas.run(lambda c: c.peek(subject, plan))
                await self._banned(send, verdict, ban_ends, now)
                return
            verdict = await self.quotas.run(lambda c: c.consume(subject, plan))
            if not verdict.allowed:
                await self._refuse(send, verdict, key, bearer_token(scope), subject, now)
                return
        except QuotaStorageDown:
            await self._unavailable(
                send, plan, "The service cannot check quotas right now; retry shortly."
            )
            return

        # The answer layer writes them on the response, whoever makes it.
        found.decide(rate_limit_headers(verdict, now))
        await self.app(scope, receive, send)

    async def _refuse(
        self, send: Send, verdict: Verdict, key: ApiKey | None, token: str | None,
        subject: str, now: float,
    ) -> None:
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
                await self._banned(send, verdict, until, now)
                return
        await _refuse_with(
            send, 429, "rate_limit_exceeded",
            f"Too many requests: the {verdict.tightest.name} quota is spent. "
            f"Retry after {retry_after} s.",
            verdict, retry_after, now,
        )

    async def _violation_bans(self, counter: LimitsCounter, subject: str, retry_after: int) -> bool:
        if not await counter.refusal_is_violation(subject, retry_after):
            return False
        return await counter.violation_bans(
            subject, self.settings.ban_after, self.settings.ban_window
        )

    async def _banned(self, send: Send, verdict: Verdict, ban_ends: float, now: float) -> None:
        retry_after = max(1, math.ceil(ban_ends - now))
        await _refuse_with(
            send, 429, "api_key_banned",
            f"This API key is banned for repeated requests after 429 answers. "
            f"Retry after {retry_after} s.",
            verdict, retry_after, now,
        )

    async def _unavailable(self, send: Send, plan: Plan, message: str) -> None:
        """503 when the caller's windows cannot be known: they are reported closed until
        Retry-After, which is honest about what the client may do."""
        now = time.time()
        retry = RETRY_AFTER_UNAVAILABLE
        windows = (Window("minute", plan.per_minute, 60, 0, now + retry),
                   Window("day", plan.per_day, 86_400, 0, now + retry))
        await _refuse_with(send, 503, "service_unavailable", message,
                           Verdict(False, windows), retry, now)


async def _refuse_with(send: Send, status: int, code: str, message: str, verdict: Verdict,
                       retry_after: int, now: float) -> None:
    """An Error answer from the middleware, with the rate-limit headers and Retry-After."""
    if status == 429:
        metrics.REFUSED.labels(code).inc()
    await send_error(
        send, status, code, message,
        [*rate_limit_headers(verdict, now), (b"retry-after", str(retry_after).encode())],
    )
