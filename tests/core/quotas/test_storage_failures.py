"""Any failure of the quota storage is a storage failure, whatever the client library raises
(issue 24): `fallback` counts in process memory, `closed` refuses with QuotaStorageDown (the
middleware's 503 with Retry-After), and nothing else escapes to become a 500. The failures
are injected into the Redis counter's own call, where a real outage surfaces."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis.exceptions
from limits.errors import StorageError

from app.core.config import Settings
from app.core.quotas.counters import Quotas, QuotaStorageDown, RedisCounter, Verdict
from app.core.quotas.plans import Plan

PLAN = Plan("free", 60, 1000)
FAILURES = [
    ConnectionError("connection refused"),
    TimeoutError("timed out"),
    OSError(104, "Connection reset by peer"),
    # What redis' asyncio client raised when Redis was killed under load: asyncio's
    # transport, already closed, refusing a write.
    RuntimeError("unable to perform operation on <TCPTransport closed=True>; "
                 "the handler is closed"),
    redis.exceptions.ConnectionError("Error 111 connecting to 127.0.0.1:6379."),
    redis.exceptions.TimeoutError("Timeout reading from socket"),
    redis.exceptions.BusyLoadingError("Redis is loading the dataset in memory"),
    redis.exceptions.ResponseError("NOSCRIPT No matching script"),
    StorageError(redis.exceptions.ConnectionError("wrapped by limits")),
]


def quotas_failing_with(error: BaseException, on_error: str) -> Quotas:
    quotas = Quotas(Settings(ratelimit_storage="redis://127.0.0.1:1/15",
                             ratelimit_on_error=on_error))
    assert isinstance(quotas.primary, RedisCounter)

    async def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    quotas.primary.script = fail
    return quotas


@pytest.mark.parametrize("error", FAILURES, ids=lambda e: type(e).__name__)
def test_fallback_counts_in_memory_whatever_the_storage_raises(error: BaseException) -> None:
    quotas = quotas_failing_with(error, "fallback")

    async def three() -> list[Verdict]:
        return [await quotas.run(lambda counter: counter.consume("key/1", PLAN))
                for _ in range(3)]

    verdicts = asyncio.run(three())
    assert all(verdict.allowed for verdict in verdicts)
    assert [verdict.windows[0].remaining for verdict in verdicts] == [59, 58, 57]


@pytest.mark.parametrize("error", FAILURES, ids=lambda e: type(e).__name__)
def test_closed_refuses_whatever_the_storage_raises(error: BaseException) -> None:
    quotas = quotas_failing_with(error, "closed")
    with pytest.raises(QuotaStorageDown):
        asyncio.run(quotas.run(lambda counter: counter.consume("key/1", PLAN)))


def test_a_cancelled_request_is_not_taken_for_a_storage_failure() -> None:
    quotas = quotas_failing_with(asyncio.CancelledError(), "closed")
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(quotas.run(lambda counter: counter.consume("key/1", PLAN)))
