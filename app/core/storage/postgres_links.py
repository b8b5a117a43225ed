"""The bounds of every wait on PostgreSQL (D41): what libpq, the server and the store's own
watchdog each bound, from the settings.

libpq bounds a connection's making (connect_timeout) and, over a real network, a link that
stops acknowledging what is sent (tcp_user_timeout) or goes quiet (TCP keepalives); the
server bounds a statement (statement_timeout, set on each connection). None of them
bounds a call whose link goes silent while the kernel still acknowledges: a relay, a
proxy, a NAT or a load balancer that holds the connection but forwards nothing. The client
then waits for an answer until the kernel gives up, minutes later, with a handler thread
held all along. Watchdog bounds every call on a connection: one that has had no answer
within its bound has its socket shut down, which libpq reads as a closed connection (the
call fails, and the pool drops the connection when it comes back). It uses the public
fileno() of the connection only, on a copy of the descriptor.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

from app.core.config import Settings

# A call gets this much longer than the statement timeout: on a link that answers, the
# server's cancel comes first and the connection stays usable.
MARGIN_SECONDS = 1.0


@dataclass(frozen=True)
class Bounds:
    """The bounds of the settings (PETSTORE_DATABASE_*), in seconds."""

    connect_timeout: int = 2
    statement_timeout: float = 3.0
    pool_timeout: float = 2.0
    keepalives_idle: int = 2
    keepalives_interval: int = 1
    keepalives_count: int = 3
    tcp_user_timeout: float = 5.0

    @classmethod
    def of(cls, settings: Settings) -> Bounds:
        return cls(settings.database_connect_timeout, settings.database_statement_timeout,
                   settings.database_pool_timeout, settings.database_keepalives_idle,
                   settings.database_keepalives_interval, settings.database_keepalives_count,
                   settings.database_tcp_user_timeout)

    @property
    def call(self) -> float:
        """The longest a call on a connection may wait for the database's answers."""
        return self.statement_timeout + MARGIN_SECONDS

    def libpq(self) -> dict[str, Any]:
        """libpq's parameters for these bounds (a URL's own values win over them)."""
        return {"connect_timeout": self.connect_timeout, "keepalives": 1,
                "keepalives_idle": self.keepalives_idle,
                "keepalives_interval": self.keepalives_interval,
                "keepalives_count": self.keepalives_count,
                "tcp_user_timeout": int(self.tcp_user_timeout * 1000)}


class Bound:
    """One call's bound: cut says whether the watchdog closed its connection."""

    __slots__ = ("conn", "cut", "deadline", "seconds")

    def __init__(self, conn: Any, seconds: float) -> None:
        self.conn, self.seconds, self.cut = conn, seconds, False
        self.deadline = time.monotonic() + seconds


class Watchdog:
    """Closes the socket of every call that outlives its bound, from a thread of its own
    (started at the first call). Arming and disarming cost a lock and a heap entry; the
    thread wakes only when the earliest bound runs out."""

    def __init__(self, name: str = "petstore-db-watchdog") -> None:
        self.name = name
        self._armed: dict[int, Bound] = {}
        self._heap: list[tuple[float, int]] = []
        self._numbers = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def bounded(self, conn: Any, seconds: float | None) -> Iterator[Bound]:
        """Run the block with conn's socket closed if it is still running after seconds
        (None: no bound, as for an import)."""
        bound = Bound(conn, seconds if seconds is not None else float("inf"))
        if seconds is None:
            yield bound
            return
        number = next(self._numbers)
        with self._changed:
            self._armed[number] = bound
            earliest = not self._heap or bound.deadline < self._heap[0][0]
            heapq.heappush(self._heap, (bound.deadline, number))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, name=self.name,
                                                daemon=True)
                self._thread.start()
            elif earliest:
                self._changed.notify()
        try:
            yield bound
        finally:
            with self._changed:
                self._armed.pop(number, None)

    def release(self, bound: Bound) -> None:
        """Lift bound for the rest of its block (a long migration found under way)."""
        with self._changed:
            for number, armed in list(self._armed.items()):
                if armed is bound:
                    del self._armed[number]

    def cut_all(self) -> int:
        """Close the connection of every call under way now (the link is known silent);
        return how many."""
        with self._changed:
            bounds = list(self._armed.values())
            for bound in bounds:
                self._cut(bound)
        return len(bounds)

    def _watch(self) -> None:
        with self._changed:
            while True:
                now = time.monotonic()
                while self._heap and (self._heap[0][1] not in self._armed
                                      or self._heap[0][0] <= now):
                    _, number = heapq.heappop(self._heap)
                    bound = self._armed.get(number)
                    if bound is not None:
                        self._cut(bound)
                self._changed.wait(self._heap[0][0] - now if self._heap else None)

    @staticmethod
    def _cut(bound: Bound) -> None:
        """Shut the socket of bound's connection down (its owner is still in its call:
        the caller holds the lock its disarming takes). A copy of the descriptor, so that
        the socket object never closes libpq's own."""
        if bound.cut:
            return
        bound.cut = True
        with suppress(Exception):  # a connection already closed has no socket to cut
            fd = os.dup(bound.conn.fileno())
            with socket.socket(fileno=fd) as copy:
                copy.shutdown(socket.SHUT_RDWR)
