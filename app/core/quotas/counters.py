"""Quota counting (D8-D10), over the `limits` library: the windows of a caller,
in process memory or in a shared storage (Redis), and what to do when that storage fails.

Windows: the minute window is a moving window (exact: never more than its number in any
60 seconds). The day window is a sliding-window counter, one pair of counters instead of a
timestamp per request: at most its number in each day window, and so at most twice its
number in the worst 24-hour span (requests bunched at a window's end).

Violations (D10): a violation is a refusal while an earlier 429 to the same caller is
still in force, more than VIOLATION_GRACE after that 429 (requests already in flight in
parallel are not violations). The middleware that counts requests, refuses 429s and bans
keys is app.web.caller.
"""

from __future__ import annotations

import inspect
import logging
import math
import time
from array import array
from collections.abc import Awaitable, Callable
from functools import lru_cache
from typing import Any, NamedTuple, TypeVar

from limits import RateLimitItemPerDay, RateLimitItemPerMinute
from limits.aio.storage import Storage as AsyncStorage
from limits.errors import ConfigurationError, StorageError
from limits.storage import MemoryStorage, storage_from_string
from redis import asyncio as redis_asyncio
from redis.exceptions import RedisError

from app.core import metrics
from app.core.config import Settings, SettingsError
from app.core.quotas.plans import Plan
from app.core.setting_values import redacted

log = logging.getLogger("petstore.quotas")

VIOLATION_GRACE = 1.0  # seconds after a 429 during which more refusals are not violations
RETRY_PRIMARY_AFTER = 1.0  # seconds between attempts to reach a failed quota storage
T = TypeVar("T")


class Window(NamedTuple):
    """One window's state for one caller, after counting (or not) this request. (Named
    tuples, not dataclasses: several are made for every request.)"""

    name: str
    limit: int
    seconds: int
    remaining: int
    reset: float  # Unix time at which the window frees a request


class Verdict(NamedTuple):
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


MINUTE = 60
DAY = 86_400


@lru_cache(maxsize=65_536)
def _keys(subject: str, plan: Plan) -> tuple[str, str]:
    """The storage keys of a caller's two windows, as limits' strategies name them. The
    plan is part of the key, so a plan change starts fresh counters (D11)."""
    ids = (subject, plan.name)
    return (RateLimitItemPerMinute(plan.per_minute, namespace="quota").key_for(*ids),
            RateLimitItemPerDay(plan.per_day, namespace="quota").key_for(*ids))


def _minute(plan: Plan, window_start: float, count: int) -> Window:
    """The minute window from get_moving_window, as MovingWindowRateLimiter reports it."""
    return Window("minute", plan.per_minute, MINUTE, plan.per_minute - count,
                  window_start + MINUTE)


def _day(plan: Plan, previous: int, previous_ttl: float, current: int,
         current_ttl: float) -> Window:
    """The day window from get_sliding_window (TTLs in seconds)."""
    remaining, reset = _sliding_stats(plan.per_day, previous, previous_ttl, current,
                                      current_ttl, time.time())
    return Window("day", plan.per_day, DAY, remaining, reset)


async def _settle(value: Any) -> Any:
    """The value of a call to limits' sync or async API alike (for the rare paths)."""
    return await value if inspect.isawaitable(value) else value


class Timestamps:
    """A moving window's timestamps, oldest first, as raw doubles in an array.

    Not a deque of floats: the garbage collector walks every item of a deque at each full
    collection, and a key allowed thousands of requests a minute holds as many timestamps,
    so every full collection grew with the traffic and showed in the tail of the latency.
    An array is not walked, and takes 8 bytes a timestamp instead of about 32. Entries
    leave from the front by moving a start index; the array is compacted when more than
    half of it has left."""

    __slots__ = ("stamps", "start")

    def __init__(self) -> None:
        self.stamps = array("d")
        self.start = 0

    def __len__(self) -> int:
        return len(self.stamps) - self.start

    def oldest(self) -> float:
        return self.stamps[self.start]

    def newest(self) -> float:
        return self.stamps[-1]

    def drop_before(self, horizon: float) -> None:
        """Drop the entries older than horizon, from the old end, as a deque's popleft."""
        stamps, start, end = self.stamps, self.start, len(self.stamps)
        while start < end and stamps[start] < horizon:
            start += 1
        if start * 2 > end:
            del stamps[:start]
            start = 0
        self.start = start

    def add(self, now: float, amount: int) -> None:
        self.stamps.extend([now] * amount)


class WindowedMemoryStorage(MemoryStorage):
    """limits' MemoryStorage with its moving windows kept as arrays of timestamps
    (Timestamps), and no timer thread.

    limits keeps a moving window as a list that every hit is inserted at the front of, and
    copies every list from a timer thread every 10 ms: a hit costs time in proportion to
    the requests in the window (alisaifee/limits#268 documents it), and under load the
    timer starts a thread 100 times a second. With a key allowed thousands of requests a
    minute, the two cost a worker a noticeable share of its throughput.

    Here a hit and a read cost O(1): timestamps leave from the old end as they expire.
    Counters (the day's sliding window, violations) are limits' own, expired lazily when
    read as limits does; keys of either kind that nobody reads any more are swept every
    SWEEP_SECONDS instead of by the timer. Same answers as limits' own implementation (a
    test drives both with one clock).

    Called from the worker's event loop thread only, like every quota check, so it needs
    none of limits' locks.
    """

    SWEEP_SECONDS = 10.0

    def __init__(self) -> None:
        super().__init__()
        self.windows: dict[str, tuple[int, Timestamps]] = {}
        self._next_sweep = time.time() + self.SWEEP_SECONDS

    def _current(self, key: str, expiry: int, now: float) -> Timestamps:
        """The key's timestamps within expiry seconds of now, oldest first."""
        window = self.windows.get(key)
        if window is None:
            window = self.windows[key] = (expiry, Timestamps())
        events = window[1]
        events.drop_before(now - expiry)
        return events

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        now = time.time()
        if now >= self._next_sweep:
            self._sweep(now)
        events = self._current(key, expiry, now)
        if len(events) + amount > limit:
            return False
        events.add(now, amount)
        return True

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        now = time.time()
        events = self._current(key, expiry, now)
        return (events.oldest(), len(events)) if events else (now, 0)

    def incr(self, key: str, expiry: float, amount: int = 1) -> int:
        now = time.time()
        if now >= self._next_sweep:
            self._sweep(now)
        value = self.get(key) + amount  # get() drops the key if it has expired
        self.storage[key] = value
        if value == amount:
            self.expirations[key] = now + expiry
        return value

    def decr(self, key: str, amount: int = 1) -> int:
        value = self.storage[key] = max(self.get(key) - amount, 0)
        return value

    def clear(self, key: str) -> None:
        self.windows.pop(key, None)
        super().clear(key)

    def reset(self) -> int | None:
        self.windows.clear()
        return super().reset()

    def _sweep(self, now: float) -> None:
        self._next_sweep = now + self.SWEEP_SECONDS
        for key, (expiry, events) in list(self.windows.items()):
            if not events or events.newest() < now - expiry:
                del self.windows[key]
        for key, expires in list(self.expirations.items()):
            if expires <= now:
                self.clear(key)


# limits wraps every storage method of every Storage class so that a backend's exceptions
# can be re-raised as StorageError. Memory raises none of its own, and the wrappers nested
# (a call to get_sliding_window went through four) were two fifths of what quotas cost a
# request in process: this class calls the methods themselves.
for _name in ("incr", "get", "get_expiry", "check", "reset", "clear", "acquire_entry",
              "get_moving_window", "acquire_sliding_window_entry", "get_sliding_window",
              "clear_sliding_window"):
    setattr(WindowedMemoryStorage, _name, inspect.unwrap(getattr(WindowedMemoryStorage, _name)))


class LimitsCounter:
    """The two windows over a `limits` storage (memory, or any async storage).

    It calls the storage interface that limits' own MovingWindowRateLimiter and
    SlidingWindowCounterRateLimiter call (acquire_entry, get_moving_window,
    acquire_sliding_window_entry, get_sliding_window), with each caller's keys built once
    and the strategies' formulas for what remains: the strategy layer rebuilt the key
    strings on every call, which was most of what quotas cost a request in process.

    In-process counting uses limits' sync MemoryStorage (with the moving window of
    WindowedMemoryStorage): its calls never block, where the async one starts an expiry
    task (and a thread hop) on nearly every request.
    """

    def __init__(self, storage: Any) -> None:
        self.storage = storage
        self.is_async = inspect.iscoroutinefunction(getattr(storage, "acquire_entry", None))

    @classmethod
    def in_memory(cls) -> LimitsCounter:
        return cls(WindowedMemoryStorage())

    async def _settle(self, value: Any) -> Any:
        """The value of a call to the storage, sync or async alike."""
        return await value if self.is_async else value

    async def consume(self, subject: str, plan: Plan) -> Verdict:
        """Count a request against both windows, if both have room; else count nothing."""
        minute_key, day_key = _keys(subject, plan)
        storage, settle = self.storage, self._settle
        # The day's state, read first, serves as its test: a refused request counts
        # nothing. The exact minute window is then hit (test and count in one step), then
        # the day. Only two requests racing for a day's last place can both pass the
        # test; the second is then refused with one minute entry counted.
        day = _day(plan, *await settle(storage.get_sliding_window(day_key, DAY)))
        allowed = (day.remaining > 0
                   and await settle(storage.acquire_entry(minute_key, plan.per_minute, MINUTE))
                   and await settle(storage.acquire_sliding_window_entry(
                       day_key, plan.per_day, DAY)))
        minute = _minute(plan, *await settle(
            storage.get_moving_window(minute_key, plan.per_minute, MINUTE)))
        if allowed:
            if day.remaining == plan.per_day:
                # The first request of a day window starts it: read when it frees one.
                day = _day(plan, *await settle(storage.get_sliding_window(day_key, DAY)))
            else:
                day = Window("day", plan.per_day, DAY, day.remaining - 1, day.reset)
        return Verdict(bool(allowed), (minute, day))

    async def peek(self, subject: str, plan: Plan) -> Verdict:
        """The windows' state, counting nothing."""
        minute_key, day_key = _keys(subject, plan)
        minute = _minute(plan, *await self._settle(
            self.storage.get_moving_window(minute_key, plan.per_minute, MINUTE)))
        day = _day(plan, *await self._settle(self.storage.get_sliding_window(day_key, DAY)))
        return Verdict(minute.remaining > 0 and day.remaining > 0, (minute, day))

    async def refusal_is_violation(self, subject: str, retry_after: int) -> bool:
        """Note a 429 sent to subject; say whether an earlier 429 was still in force."""
        in_force = await _settle(self.storage.incr(f"refused/{subject}", retry_after))
        if in_force == 1:
            await _settle(self.storage.incr(f"grace/{subject}", math.ceil(VIOLATION_GRACE)))
            return False
        return bool(await _settle(self.storage.get(f"grace/{subject}")) == 0)

    async def violation_bans(self, subject: str, after: int, window: int) -> bool:
        """Note a violation; say whether it is the one that reaches the ban threshold."""
        count = await _settle(self.storage.incr(f"violations/{subject}", window))
        if count >= after:
            await _settle(self.storage.clear(f"violations/{subject}"))
            return True
        return False


# Both windows of one request in one round trip: the checks, the counting and the state
# for the headers. The algorithms and formulas are limits' own (acquire_moving_window,
# moving_window, acquire_sliding_window and sliding_window.lua, and the strategies'
# get_window_stats), except that the moving window's list drops expired entries, as
# WindowedMemoryStorage does, instead of keeping up to its limit of them
# (alisaifee/limits#268): a large limit would otherwise cost every request a walk of the
# list. One script instead of
# four calls is what keeps Redis cheap per request.
CONSUME_SCRIPT = """
local now, minute_limit, day_limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local consume = ARGV[4] == '1'
local minute_expiry, day_expiry = 60, 86400000

local current_ttl = tonumber(redis.call('pttl', KEYS[3]))
if current_ttl > 0 and current_ttl < day_expiry then
    redis.call('rename', KEYS[3], KEYS[2])
    redis.call('set', KEYS[3], 0, 'PX', current_ttl + day_expiry)
end
local previous = tonumber(redis.call('get', KEYS[2])) or 0
local previous_ttl = math.max(tonumber(redis.call('pttl', KEYS[2])) or 0, 0)
local current = tonumber(redis.call('get', KEYS[3])) or 0
current_ttl = math.max(tonumber(redis.call('pttl', KEYS[3])) or 0, 0)
local weighted = math.floor(previous * previous_ttl / day_expiry) + current

-- Entries that left the minute window go from the list's old end first, so the list
-- holds the window's entries only (at most its limit): llen counts them, the last is the
-- oldest, and no request costs more than the entries that expired since the last one.
local horizon = now - minute_expiry
while true do
    local last = redis.call('lindex', KEYS[1], -1)
    if not last or tonumber(last) >= horizon then break end
    redis.call('rpop', KEYS[1])
end

local allowed = 0
if consume and redis.call('llen', KEYS[1]) < minute_limit and weighted + 1 <= day_limit then
    allowed = 1
    redis.call('lpush', KEYS[1], now)
    redis.call('ltrim', KEYS[1], 0, minute_limit - 1)
    redis.call('expire', KEYS[1], minute_expiry)
    if redis.call('exists', KEYS[3]) == 1 then
        current = redis.call('incrby', KEYS[3], 1)
    else
        redis.call('set', KEYS[3], 1, 'PX', day_expiry * 2)
        current, current_ttl = 1, day_expiry * 2
    end
end

local count = redis.call('llen', KEYS[1])
local oldest = redis.call('lindex', KEYS[1], -1) or '0'
return {allowed, count, oldest, previous, previous_ttl, current, current_ttl}
"""


class RedisCounter(LimitsCounter):
    """For a plain Redis (redis:// or rediss://): one script per request (CONSUME_SCRIPT)
    instead of limits' four calls. Violations and checks use limits' storage."""

    def __init__(self, storage: AsyncStorage, url: str, prefix: str,
                 bounds: dict[str, Any] | None = None) -> None:
        super().__init__(storage)
        self.client = redis_asyncio.from_url(url, **(bounds or {}))
        self.script = self.client.register_script(CONSUME_SCRIPT)
        self.prefix = prefix

    async def consume(self, subject: str, plan: Plan) -> Verdict:
        return await self._run(subject, plan, consume=True)

    async def peek(self, subject: str, plan: Plan) -> Verdict:
        verdict = await self._run(subject, plan, consume=False)
        return Verdict(all(w.remaining > 0 for w in verdict.windows), verdict.windows)

    async def _run(self, subject: str, plan: Plan, consume: bool) -> Verdict:
        base = f"{self.prefix}:quota:{subject}:{plan.name}:{plan.per_minute}:{plan.per_day}"
        now = time.time()
        try:
            result = await self.script(
                keys=[f"{base}:minute", f"{base}:day:previous", f"{base}:day:current"],
                args=[repr(now), plan.per_minute, plan.per_day, "1" if consume else "0"],
            )
        except (RedisError, OSError) as exc:
            raise StorageError(exc) from exc
        allowed, minute_count, oldest, previous, previous_ttl, current, current_ttl = result
        minute_reset = float(oldest) + 60 if minute_count else now
        return Verdict(bool(allowed), (
            Window("minute", plan.per_minute, 60, plan.per_minute - int(minute_count),
                   minute_reset),
            Window("day", plan.per_day, 86_400,
                   *_sliding_stats(plan.per_day, int(previous), int(previous_ttl) / 1000,
                                   int(current), int(current_ttl) / 1000, now)),
        ))


def _sliding_stats(limit: int, previous: int, previous_ttl: float, current: int,
                   current_ttl: float, now: float) -> tuple[int, float]:
    """(remaining, reset) of a day window, as limits' SlidingWindowCounterRateLimiter
    computes them in get_window_stats."""
    expiry = DAY
    remaining = max(0, limit - math.floor(previous * previous_ttl / expiry + current))
    if not (previous or current):
        return remaining, now
    # A remainder of 0 means a whole period, not now: a window just started has a TTL of
    # exactly twice its length, where limits' own formula would report "resets now".
    previous_reset_in = (previous_ttl % (expiry / previous) or expiry / previous
                         if previous else math.inf)
    current_reset_in = current_ttl % expiry or expiry if current else math.inf
    return remaining, now + min(previous_reset_in, current_reset_in)


class QuotaStorageDown(Exception):
    """The quota storage failed and the settings say to fail closed."""


def _storage_options(settings: Settings, plain: str) -> dict[str, Any]:
    options: dict[str, Any] = {"wrap_exceptions": True}
    if "redis" in plain or "valkey" in plain:
        options.update(key_prefix=settings.ratelimit_key_prefix, **redis_bounds(settings))
    return options


def redis_bounds(settings: Settings) -> dict[str, Any]:
    """redis-py's bounds on every wait for the quota storage (D41): connecting and each
    answer within RATELIMIT_STORAGE_TIMEOUT (a quota check never waits longer on the
    network), TCP keepalives, and a PING before using a connection idle for
    RATELIMIT_STORAGE_HEALTH_CHECK seconds."""
    return {"socket_timeout": settings.ratelimit_storage_timeout,
            "socket_connect_timeout": settings.ratelimit_storage_timeout,
            "socket_keepalive": True,
            "health_check_interval": settings.ratelimit_storage_health_check}


def open_counter(settings: Settings) -> LimitsCounter:
    """The counter for PETSTORE_RATELIMIT_STORAGE."""
    uri = settings.ratelimit_storage
    plain = uri.removeprefix("async+")
    if plain.startswith("memory://"):
        return LimitsCounter.in_memory()
    options = _storage_options(settings, plain)
    if "redis" in plain or "valkey" in plain:
        options["implementation"] = "redispy"
    storage = _storage(uri, "async+" + plain, options)
    assert isinstance(storage, AsyncStorage)
    if plain.startswith(("redis://", "rediss://")):
        return RedisCounter(storage, plain, settings.ratelimit_key_prefix,
                            redis_bounds(settings))
    if not hasattr(storage, "acquire_entry") or not hasattr(storage, "get_sliding_window"):
        raise SettingsError(
            f"PETSTORE_RATELIMIT_STORAGE={redacted(uri)}: this storage supports neither moving nor "
            "sliding windows; use memory://, redis:// (or Sentinel, Cluster) or mongodb://"
        )
    return LimitsCounter(storage)


def sync_storage(settings: Settings) -> Any:
    """The quota storage of the settings through limits' synchronous API, which any
    thread may use (a Flask thread must not touch the event loop's client)."""
    plain = settings.ratelimit_storage.removeprefix("async+")
    return _storage(settings.ratelimit_storage, plain, _storage_options(settings, plain))


def _storage(uri: str, scheme_uri: str, options: dict[str, Any]) -> Any:
    """limits' storage for scheme_uri; a URI it cannot use (an unknown scheme, or its
    client not installed) is a SettingsError naming the variable, whichever opens it
    first: the quotas' counter, the readiness probe or the console's throttle."""
    try:
        return storage_from_string(scheme_uri, **options)
    except ConfigurationError as exc:
        raise SettingsError(f"PETSTORE_RATELIMIT_STORAGE={redacted(uri)}: {exc}") from None


def storage_probe(settings: Settings) -> Callable[[], bool]:
    """A check of the quota storage that any thread may call (the readiness handler runs
    in a Flask thread)."""
    storage = sync_storage(settings)

    def probe() -> bool:
        try:
            return bool(storage.check())
        except Exception:  # any failure to answer is "not ready", never a 500
            return False

    return probe


class Quotas:
    """Counters in the configured storage, with the fallback of RATELIMIT_ON_ERROR."""

    def __init__(self, settings: Settings) -> None:
        self.primary = open_counter(settings)
        self.fallback = LimitsCounter.in_memory()
        self.fail_closed = settings.ratelimit_on_error == "closed"
        self._down_since: float | None = None
        self._retry_at = 0.0

    async def run(self, action: Callable[[LimitsCounter], Awaitable[T]]) -> T:
        """Run action on the primary storage, or as RATELIMIT_ON_ERROR says when it fails."""
        now = time.monotonic()
        if self._down_since is None or now >= self._retry_at:
            try:
                result = await action(self.primary)
            # Any failure, not only limits' StorageError: a Redis client whose connection
            # was closed under it raised RuntimeError from asyncio's transport when the
            # storage went away, and one request must never be a 500 for the way a client
            # library fails.
            except Exception as exc:
                cause = exc.storage_error if isinstance(exc, StorageError) else exc
                metrics.QUOTA_STORAGE_ERRORS.inc()
                if self._down_since is None:
                    self._down_since = now
                    log.warning(
                        "quota storage failed (%s: %s); %s until it answers again",
                        type(cause).__name__, cause,
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
