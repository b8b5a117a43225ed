"""The store's connections to PostgreSQL (D41): its pool, the bound of every call on it
(postgres_links.py), the state of the link, and check()'s connection of its own.

A call that ran out of time, or that found no connection while the pool had room to make
one (not a busy database's queue, whose connections are all handed out), marks the link
down: calls then
fail at once, but for one at a time that tries (and check(), which the readiness checks
run off the requests' path every second), until one gets an answer; the pool then checks
each connection it hands out for a while, so that none broken meanwhile reaches a request.
A handler thread is held at most one bound, however long the link stays silent, and the
one that tries a link marked down at most the connect timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo as pq_conninfo
from psycopg import errors as pq_errors
from psycopg_pool import ConnectionPool, PoolTimeout

from app.core.errors import StoreUnavailable
from app.core.storage.postgres_links import Bound, Bounds, Watchdog

T = TypeVar("T")

log = logging.getLogger("app.core.storage.postgres")

# While the link is down, the one call that tries waits this long for a connection, so
# that an outage answers 503 at once rather than holding handler threads.
DOWN_WAIT_SECONDS = 0.25
# While the database is down the pool retries a connection after 1, 2, 4... seconds; it
# gives up after this long, and the next request starts again from 1 s. (Its default of
# five minutes lets the waits grow past a minute, so recovery would lag the database.)
RECONNECT_SECONDS = 5.0
# After a connection was found broken (a restart, a failover) the pool checks each one it
# hands out (a round trip within CHECK_SECONDS) for this long, so that none of the others
# broken alike reaches a request.
SUSPECT_SECONDS = 10.0
CHECK_SECONDS = 1.0
# The errors that mean "the database cannot answer now", not "this request is wrong":
# connection failures, timeouts, shutdowns and full disks (OperationalError, which also
# covers the pool's PoolTimeout), and a standby's refusal to write after a failover.
UNAVAILABLE: tuple[type[Exception], ...] = (
    psycopg.OperationalError,
    pq_errors.ReadOnlySqlTransaction,
    psycopg.InterfaceError,  # a connection closed under us
)


class _Silent(psycopg.OperationalError):
    """check()'s connection had no answer within its bound."""


def first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def connection_parameters(url: str, bounds: Bounds | None = None) -> dict[str, Any]:
    """libpq's parameters for a postgresql:// URL, with the bounds' (D41) and our defaults
    where it sets none."""
    params = pq_conninfo.conninfo_to_dict(url)
    for name, value in (bounds or Bounds()).libpq().items():
        params.setdefault(name, value)
    params.setdefault("application_name", "petstore")
    return params


class Link:
    """The connections of one store to its database; see the module."""

    def __init__(self, url: str, bounds: Bounds, busy_timeout_ms: int, pool_size: int) -> None:
        self.bounds = bounds
        self.params = connection_parameters(url, bounds)
        self.busy_timeout_ms = busy_timeout_ms
        self.watchdog = Watchdog()
        # When the link went down (None: up) and why; while down, one call at a time
        # tries (the trial), the others fail at once.
        self._down_since: float | None = None
        self._down_reason = ""
        self._trial = threading.Lock()
        self._suspect_until = 0.0  # the pool checks what it hands out until then
        self._probe: psycopg.Connection[tuple[Any, ...]] | None = None  # check()'s own
        self._probing = threading.Lock()
        self.pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = ConnectionPool(
            pq_conninfo.make_conninfo(**self.params),
            kwargs={"autocommit": True},
            min_size=1,
            max_size=pool_size,
            configure=self.configure,
            check=self._check_if_suspect,
            timeout=bounds.pool_timeout,
            reconnect_timeout=RECONNECT_SECONDS,
            name="petstore",
            open=False,
        )
        # Without waiting: a database that is down now makes requests 503, not the start.
        self.pool.open(wait=False)

    def refuse_if_down(self) -> None:
        """StoreUnavailable at once while the link is down (for a connection made apart
        from the pool)."""
        if self._down_since is not None:
            raise StoreUnavailable(f"PostgreSQL: {self._down_reason}")

    def dispose(self) -> None:
        """Close the pool and every connection in it, and check()'s own."""
        self.pool.close()
        with self._probing:
            self._drop_probe()

    def configure(self, conn: psycopg.Connection[Any]) -> None:
        """Every new connection: synchronous commits, a bounded wait for locks and a
        bounded statement (D41); the SET itself bounded too (the pool's thread must not
        hang on a link that went silent after the connection was made)."""
        with self.watchdog.bounded(conn, self.bounds.call):
            conn.execute(f"SET synchronous_commit = on; SET lock_timeout = "
                         f"{int(self.busy_timeout_ms)}; SET statement_timeout = "
                         f"{int(self.bounds.statement_timeout * 1000)}")

    def _check_if_suspect(self, conn: psycopg.Connection[Any]) -> None:
        """The pool's check of a connection it hands out: a round trip, but only for a
        while after a connection was found broken (otherwise it would cost every call
        one); a connection that fails it is dropped and the next one is tried."""
        if time.monotonic() < self._suspect_until:
            with self.watchdog.bounded(conn, CHECK_SECONDS):
                conn.execute("")

    @contextmanager
    def connection(self, bounded: bool = True
                   ) -> Iterator[tuple[psycopg.Connection[tuple[Any, ...]], Bound]]:
        """A pooled connection and its call's bound, which counts the wait for the
        connection too: a call never takes longer than the statement timeout and a
        second. While the link is down, only one caller at a time gets one (the trial):
        the others get StoreUnavailable at once. The trial is bounded by the connect
        timeout instead (D41): it asks whether a link known silent answers again, and
        should not hold its request longer than making a connection may take."""
        trial = self._down_since is not None
        if trial and not self._trial.acquire(blocking=False):
            raise StoreUnavailable(f"PostgreSQL: {self._down_reason}")
        try:
            started = time.monotonic()
            limit = (min(self.bounds.call, self.bounds.connect_timeout) if trial
                     else self.bounds.call)
            wait = DOWN_WAIT_SECONDS if trial else self.bounds.pool_timeout
            try:
                conn = self._pooled(min(wait, limit) if bounded else wait)
            except PoolTimeout:
                if trial and self._down_since is None:
                    # The link rose while this trial waited (a check or another call had
                    # answers); the pool has made no connection since, which says nothing
                    # of the link: a 503, without marking the link down again.
                    raise StoreUnavailable("PostgreSQL: no connection yet after it "
                                           "answered again") from None
                raise
            try:
                left = limit - (time.monotonic() - started)
                with self.watchdog.bounded(conn, max(left, 0.1) if bounded else None) as bound:
                    yield conn, bound
            finally:
                self.pool.putconn(conn)
        finally:
            if trial:
                self._trial.release()

    def _pooled(self, wait: float) -> psycopg.Connection[tuple[Any, ...]]:
        """A connection of the pool within wait seconds, asked for DOWN_WAIT_SECONDS at a
        time: a caller waiting when the link is found down (by another call or the
        readiness check) gives up then, rather than hold its thread for the whole wait."""
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            try:
                return self.pool.getconn(max(min(left, DOWN_WAIT_SECONDS), 0.001))
            except PoolTimeout:
                if self._down_since is not None:
                    raise
                if time.monotonic() >= deadline:
                    raise PoolTimeout(f"no connection within {wait:g} s") from None

    def fell(self, reason: str, cut_others: bool = False) -> None:
        """The link is down (a call ran out of time or found no connection, or check()
        had no answer): say so once; with cut_others, close the connections of the calls
        still waiting on it too, each of which would only run out of time in turn."""
        self._down_reason = reason
        if self._down_since is None:
            self._down_since = time.monotonic()
            log.warning("PostgreSQL is unreachable (%s); requests that need it get 503 "
                        "until it answers again", reason)
        if cut_others:
            self.watchdog.cut_all()

    def rose(self) -> None:
        """A call had its answers: the link is up again, if it was down."""
        if self._down_since is not None:
            since, self._down_since = self._down_since, None
            # Connections made before may have broken meanwhile: check each handed out.
            self._suspect_until = time.monotonic() + SUSPECT_SECONDS
            log.warning("PostgreSQL answers again after %.1f s", time.monotonic() - since)

    def call(self, work: Callable[[psycopg.Connection[tuple[Any, ...]]], T],
             retry: bool = True, bounded: bool = True) -> T:
        """work(connection) on a pooled connection, within the call's bound (unless
        bounded is False: imports). A connection found broken (the database restarted or
        failed over since it was last used) is dropped by the pool; work that is safe to
        repeat then runs once more, on a fresh connection, so that a failover costs the
        pool's idle connections and not a 503 each. Not repeated: writes whose commit may
        have happened and cannot be told apart (new keys, imports), and a call that ran
        out of time (the link is silent; another try would only wait as long)."""
        for attempt in (1, 2):
            conn: psycopg.Connection[tuple[Any, ...]] | None = None
            bound: Bound | None = None
            try:
                with self.connection(bounded) as (conn, bound):
                    result = work(conn)
            except UNAVAILABLE as exc:
                failure = self.noted(exc, bound)
                if conn is None or bound is None or bound.cut:
                    raise failure from exc
                if not conn.broken:  # the database's refusal (read-only, a lock...)
                    raise
                # The pool's other idle connections are likely broken too: have each
                # checked before it is handed out.
                self._suspect_until = time.monotonic() + SUSPECT_SECONDS
                if not retry or attempt == 2:
                    raise
            else:
                self.rose()
                return result
        raise AssertionError("unreachable")  # pragma: no cover

    def noted(self, exc: Exception, bound: Bound | None) -> StoreUnavailable:
        """What a call that failed with exc tells of the link (bound None: it found no
        connection; cut: it ran out of time, so the link is silent), as the error to
        raise."""
        if bound is not None and bound.cut:
            reason = f"no answer within {bound.seconds:.1f} s"
            self.fell(reason, cut_others=True)
        else:
            reason = first_line(exc)
            if bound is None and not self._all_in_use():
                self.fell(reason)
        return StoreUnavailable(f"PostgreSQL: {reason}")

    def _all_in_use(self) -> bool:
        """Whether every connection the pool may have is made and handed out: a call that
        found none then met a busy database (a flash sale's requests queued on one pet),
        not a silent link, and gets its 503 without marking the link down for every other
        call; a silent link is found by the calls holding those connections, which run out
        of time (the watchdog), and by the readiness check."""
        stats = self.pool.get_stats()
        return (stats.get("pool_size", 0) >= self.pool.max_size
                and stats.get("pool_available", 0) == 0)

    def check(self) -> dict[str, str]:
        """Facts about a connection for the storage suite and /readyz (commit durability,
        lock wait); raises StoreUnavailable when the database does not answer within
        CHECK_SECONDS (or the connect timeout, making a connection), or answers read-only
        (a standby, as during a failover), since cancels would fail.

        On a connection of its own, not the pool's: the readiness monitor calls it every
        second, off the requests' path, and it must answer however busy the pool is. Its
        answer or silence marks the link up or down for every call (D41)."""
        with self._probing:
            try:
                try:
                    row = self._probe_facts()
                except UNAVAILABLE as exc:
                    if isinstance(exc, _Silent) or self._probe is None:
                        raise
                    # Its connection was dropped (a restart, a failover): the link is
                    # down only if a fresh one fails too.
                    self._drop_probe()
                    row = self._probe_facts()
            except UNAVAILABLE as exc:
                self._drop_probe()
                reason = (f"no answer within {CHECK_SECONDS:g} s"
                          if isinstance(exc, _Silent) else first_line(exc))
                self.fell(reason, cut_others=True)
                raise StoreUnavailable(f"PostgreSQL: {reason}") from exc
        self.rose()
        if row[3] == "on":
            raise StoreUnavailable("PostgreSQL: the database is read-only (a standby?)")
        return {"synchronous_commit": row[0], "lock_timeout": row[1], "server_version": row[2]}

    def _drop_probe(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None

    def _probe_facts(self) -> tuple[Any, ...]:
        if self._probe is None or self._probe.closed:
            self._probe = psycopg.connect(**self.params, autocommit=True)
            self.configure(self._probe)
        with self.watchdog.bounded(self._probe, CHECK_SECONDS) as bound:
            try:
                row = self._probe.execute(
                    "SELECT current_setting('synchronous_commit'), current_setting("
                    "'lock_timeout'), current_setting('server_version'), current_setting("
                    "'transaction_read_only')").fetchone()
            except UNAVAILABLE as exc:
                if bound.cut:
                    raise _Silent(str(exc)) from exc
                raise
        assert row is not None
        return row
