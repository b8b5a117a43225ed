"""Plans, the rate-limit middleware and bans (DESIGN.md D8-D11), over the `limits` library.

Why an ASGI middleware and not Flask-Limiter: requests that Connexion rejects (401, 400,
405) never reach Flask, yet the specification wants the rate-limit headers on every
response, and a 429 raised inside Flask loses its headers (DESIGN.md).

Counting (D9): a request with a valid key counts against the key's windows; one without
(no key, unknown, revoked) against its client address, with the Free plan's numbers.
Over quota, the request is answered 429 here, neither passed on nor counted.

Windows: the minute window is a moving window (exact: never more than its number in any
60 seconds). The day window is a sliding-window counter, one pair of counters instead of a
timestamp per request: at most its number in each day window, and so at most twice its
number in the worst 24-hour span (requests bunched at a window's end).

Bans (D10): a violation is a request refused while an earlier 429 to the same key is still
in force, more than a second after that 429 (requests already in flight in parallel are not
violations). BAN_AFTER violations within BAN_WINDOW seconds ban the key for BAN_SECONDS.
The ban is written on the key in the database, so every worker and the CLI see it.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, TypeVar

import yaml
from limits import RateLimitItem, RateLimitItemPerDay, RateLimitItemPerMinute
from limits.aio.storage import MemoryStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter, SlidingWindowCounterRateLimiter
from limits.errors import StorageError
from limits.storage import storage_from_string
from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import errors
from app.auth import Keyring
from app.config import Settings
from app.orders import format_time
from app.storage import ApiKey, Store

log = logging.getLogger("petstore.quotas")

ANONYMOUS_PLAN = "free"  # D9: requests without a valid key count with Free's numbers
VIOLATION_GRACE = 1.0  # seconds after a 429 during which more refusals are not violations
RETRY_PRIMARY_AFTER = 1.0  # seconds between attempts to reach a failed quota storage
REDIS_TIMEOUT = 0.5  # seconds; a quota check never waits longer on the network
HEADERS_SCOPE_KEY = "petstore.ratelimit_headers"
T = TypeVar("T")


# plans ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A plan's numbers: requests a minute and a day."""

    name: str
    per_minute: int
    per_day: int


def load_plans(spec_path: str | Any) -> dict[str, Plan]:
    """The plans declared under `x-plans` at the root of the OpenAPI document (D11)."""
    with open(spec_path, encoding="utf-8") as stream:
        spec = yaml.safe_load(stream)
    return {
        name: Plan(name, int(numbers["perMinute"]), int(numbers["perDay"]))
        for name, numbers in spec["x-plans"].items()
        if "perMinute" in numbers
    }


def plan_of(key: ApiKey, plans: dict[str, Plan]) -> Plan:
    """The numbers that apply to a key: its plan's, or its own for enterprise keys."""
    if key.per_minute is not None and key.per_day is not None:
        return Plan(key.plan, key.per_minute, key.per_day)
    return plans[key.plan]


# counting -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """One window's state for one caller, after counting (or not) this request."""

    name: str
    limit: int
    seconds: int
    remaining: int
    reset: float  # Unix time at which the window frees a request


@dataclass(frozen=True)
class Verdict:
    """Whether a request may pass, and the state of the caller's windows."""

    allowed: bool
    windows: tuple[Window, ...]

    @property
    def tightest(self) -> Window:
        """The most restrictive window (D8): fewest remaining; of equals, the later reset."""
        return min(self.windows, key=lambda w: (w.remaining, -w.reset))

    def retry_after(self, now: float) -> int:
        """Whole seconds until the refusing window frees a request; at least 1."""
        refusing = [w for w in self.windows if w.remaining == 0] or list(self.windows)
        return max(1, math.ceil(max(w.reset for w in refusing) - now))


@lru_cache(maxsize=1024)
def _items(per_minute: int, per_day: int) -> tuple[RateLimitItem, RateLimitItem]:
    return (
        RateLimitItemPerMinute(per_minute, namespace="quota"),
        RateLimitItemPerDay(per_day, namespace="quota"),
    )


class Counter:
    """The two windows over one `limits` storage."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self.minute = MovingWindowRateLimiter(storage)
        self.day = SlidingWindowCounterRateLimiter(storage)

    async def consume(self, subject: str, plan: Plan) -> Verdict:
        minute, day = _items(plan.per_minute, plan.per_day)
        ids = (subject, plan.name)
        # The exact minute window first: when it refuses, nothing was counted. When the day
        # refuses after the minute accepted, that one minute entry is the only overcount.
        allowed = await self.minute.hit(minute, *ids) and await self.day.hit(day, *ids)
        return Verdict(allowed, await self._windows(minute, day, ids))

    async def peek(self, subject: str, plan: Plan) -> Verdict:
        minute, day = _items(plan.per_minute, plan.per_day)
        windows = await self._windows(minute, day, (subject, plan.name))
        return Verdict(all(w.remaining > 0 for w in windows), windows)

    async def _windows(
        self, minute: RateLimitItem, day: RateLimitItem, ids: tuple[str, ...]
    ) -> tuple[Window, ...]:
        minute_stats = await self.minute.get_window_stats(minute, *ids)
        day_stats = await self.day.get_window_stats(day, *ids)
        return (
            Window("minute", minute.amount, 60, minute_stats.remaining, minute_stats.reset_time),
            Window("day", day.amount, 86_400, day_stats.remaining, day_stats.reset_time),
        )

    async def refusal_is_violation(self, subject: str, retry_after: int) -> bool:
        """Note a 429 sent to subject; say whether an earlier 429 was still in force."""
        in_force = await self.storage.incr(f"refused/{subject}", retry_after)
        if in_force == 1:
            await self.storage.incr(f"grace/{subject}", math.ceil(VIOLATION_GRACE))
            return False
        return await self.storage.get(f"grace/{subject}") == 0

    async def violation_bans(self, subject: str, after: int, window: int) -> bool:
        """Note a violation; say whether it is the one that reaches the ban threshold."""
        count = await self.storage.incr(f"violations/{subject}", window)
        if count >= after:
            await self.storage.clear(f"violations/{subject}")
            return True
        return False


class QuotaStorageDown(Exception):
    """The quota storage failed and the settings say to fail closed."""


def _open_storage(settings: Settings) -> Storage:
    uri = settings.ratelimit_storage
    if not uri.startswith("async+"):
        uri = "async+" + uri
    options: dict[str, Any] = {"wrap_exceptions": True}
    if "redis" in uri or "valkey" in uri:
        options.update(
            implementation="redispy",
            key_prefix=settings.ratelimit_key_prefix,
            socket_timeout=REDIS_TIMEOUT,
            socket_connect_timeout=REDIS_TIMEOUT,
        )
    storage = storage_from_string(uri, **options)
    assert isinstance(storage, Storage)
    return storage


class Quotas:
    """Counters in the configured storage, with the fallback of RATELIMIT_ON_ERROR."""

    def __init__(self, settings: Settings) -> None:
        self.primary = Counter(_open_storage(settings))
        self.fallback = Counter(MemoryStorage())
        self.fail_closed = settings.ratelimit_on_error == "closed"
        self._down_since: float | None = None
        self._retry_at = 0.0

    async def run(self, action: Callable[[Counter], Awaitable[T]]) -> T:
        """Run action on the primary storage, or as RATELIMIT_ON_ERROR says when it fails."""
        now = time.monotonic()
        if self._down_since is None or now >= self._retry_at:
            try:
                result = await action(self.primary)
            except StorageError as exc:
                if self._down_since is None:
                    self._down_since = now
                    log.warning(
                        "quota storage failed (%s); %s until it answers again",
                        type(exc.storage_error).__name__,
                        "answering 503" if self.fail_closed else "counting in process memory",
                    )
                self._retry_at = now + RETRY_PRIMARY_AFTER
            else:
                if self._down_since is not None:
                    log.warning(
                        "quota storage answers again after %.1f s", now - self._down_since
                    )
                    self._down_since = None
                return result
        if self.fail_closed:
            raise QuotaStorageDown()
        return await action(self.fallback)

    async def check(self) -> bool:
        """Whether the primary storage answers (for /readyz)."""
        try:
            return bool(await self.primary.storage.check())
        except StorageError:
            return False


# headers --------------------------------------------------------------------------------


def rate_limit_headers(verdict: Verdict, now: float) -> list[tuple[bytes, bytes]]:
    """X-RateLimit-* for the tightest window (D8), and the IETF draft's RateLimit-Policy
    and RateLimit fields for both (draft-ietf-httpapi-ratelimit-headers)."""
    tightest = verdict.tightest
    policy = ", ".join(f'"{w.name}";q={w.limit};w={w.seconds}' for w in verdict.windows)
    state = ", ".join(
        f'"{w.name}";r={w.remaining};t={max(0, math.ceil(w.reset - now))}'
        for w in verdict.windows
    )
    return [
        (b"x-ratelimit-limit", str(tightest.limit).encode()),
        (b"x-ratelimit-remaining", str(tightest.remaining).encode()),
        (b"x-ratelimit-reset", str(math.ceil(tightest.reset)).encode()),
        (b"ratelimit-policy", policy.encode()),
        (b"ratelimit", state.encode()),
    ]


def _bearer_token(scope: Scope) -> str | None:
    """The bearer token of the request's single Authorization header, if it has one."""
    values = [v for k, v in scope["headers"] if k.lower() == b"authorization"]
    if len(values) != 1:
        return None
    scheme, _, token = values[0].decode("latin-1").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def _ban_ends(key: ApiKey) -> float | None:
    if key.banned_until is None:
        return None
    return dt.datetime.fromisoformat(key.banned_until.replace("Z", "+00:00")).timestamp()


# middleware -----------------------------------------------------------------------------


class RateLimitMiddleware:
    """Counts every API request, answers 429 over quota, puts the headers on every response.

    Added outermost (MiddlewarePosition.BEFORE_EXCEPTION): it sees every request, including
    those Connexion rejects before Flask. It must send its own 429 and 503, since an
    exception raised here is not handled by Connexion's error handlers.
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
        token = _bearer_token(scope)
        try:
            key = self.keyring.lookup(token) if token else None
        except errors.StoreUnavailable as exc:
            log.warning("store unavailable: %s", exc.message)
            await self._unavailable(send, self.plans[ANONYMOUS_PLAN], errors.UNAVAILABLE_MESSAGE)
            return
        if key is not None:
            subject, plan = f"key/{key.id}", plan_of(key, self.plans)
        else:
            client = scope.get("client") or ("unknown", 0)
            subject, plan = f"addr/{client[0]}", self.plans[ANONYMOUS_PLAN]

        now = time.time()
        try:
            ban_ends = _ban_ends(key) if key is not None else None
            if ban_ends is not None and ban_ends > now:
                verdict = await self.quotas.run(lambda c: c.peek(subject, plan))
                await self._banned(send, verdict, ban_ends, now)
                return
            verdict = await self.quotas.run(lambda c: c.consume(subject, plan))
            if not verdict.allowed:
                await self._refuse(send, verdict, key, token, subject, now)
                return
        except QuotaStorageDown:
            await self._unavailable(
                send, plan, "The service cannot check quotas right now; retry shortly."
            )
            return

        headers = rate_limit_headers(verdict, now)
        scope[HEADERS_SCOPE_KEY] = headers

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = _merge(message.get("headers", []), headers)
            await send(message)

        await self.app(scope, receive, send_with_headers)

    async def _refuse(
        self, send: Send, verdict: Verdict, key: ApiKey | None, token: str | None,
        subject: str, now: float,
    ) -> None:
        retry_after = verdict.retry_after(now)
        if key is not None and token is not None and self.settings.ban_seconds > 0:
            settings = self.settings
            bans = await self.quotas.run(
                lambda c: self._violation_bans(c, subject, retry_after)
            )
            if bans:
                until = now + settings.ban_seconds
                banned = dt.datetime.fromtimestamp(until, dt.UTC)
                await run_in_threadpool(self.store.ban_key, key.id, format_time(banned))
                self.keyring.forget(token)
                log.warning("key %d banned until %s after repeated 429s", key.id,
                            format_time(banned))
                await self._banned(send, verdict, until, now)
                return
        await errors.send_error(
            send, 429, "rate_limit_exceeded",
            f"Too many requests: the {verdict.tightest.name} quota is spent. "
            f"Retry after {retry_after} s.",
            [*rate_limit_headers(verdict, now), (b"retry-after", str(retry_after).encode())],
        )

    async def _violation_bans(self, counter: Counter, subject: str, retry_after: int) -> bool:
        if not await counter.refusal_is_violation(subject, retry_after):
            return False
        return await counter.violation_bans(
            subject, self.settings.ban_after, self.settings.ban_window
        )

    async def _banned(self, send: Send, verdict: Verdict, ban_ends: float, now: float) -> None:
        retry_after = max(1, math.ceil(ban_ends - now))
        await errors.send_error(
            send, 429, "api_key_banned",
            f"This API key is banned for repeated requests after 429 answers. "
            f"Retry after {retry_after} s.",
            [*rate_limit_headers(verdict, now), (b"retry-after", str(retry_after).encode())],
        )

    async def _unavailable(self, send: Send, plan: Plan, message: str) -> None:
        """503 when the caller's windows cannot be known: they are reported closed until
        Retry-After, which is honest about what the client may do."""
        now = time.time()
        retry = errors.RETRY_AFTER_UNAVAILABLE
        windows = (Window("minute", plan.per_minute, 60, 0, now + retry),
                   Window("day", plan.per_day, 86_400, 0, now + retry))
        await errors.send_error(
            send, 503, "service_unavailable", message,
            [*rate_limit_headers(Verdict(False, windows), now),
             (b"retry-after", str(retry).encode())],
        )


def _merge(
    headers: list[tuple[bytes, bytes]], extra: list[tuple[bytes, bytes]]
) -> list[tuple[bytes, bytes]]:
    present = {name.lower() for name, _ in headers}
    return list(headers) + [(name, value) for name, value in extra if name not in present]


class RateLimitHeaders:
    """Writes the headers RateLimitMiddleware decided onto the handler's response, inside
    Connexion's response validator, so that the validator sees the headers the YAML
    declares required (DESIGN.md: headers added outside it are invisible to it)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = scope.get(HEADERS_SCOPE_KEY)
        if scope["type"] != "http" or not headers:
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = _merge(message.get("headers", []), headers)
            await send(message)

        await self.app(scope, receive, send_with_headers)
