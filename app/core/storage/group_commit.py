"""Group commit for the SQLite store (issue 34): the writes that wait for the database's
write lock together share one transaction and one commit.

A durable commit (WAL, synchronous=FULL) is a write of the pages the transaction changed
and an fsync; the triggers of every change (the revision, the order's version and
position) and the list indexes change the same few pages write after write. Committed one
by one under load, a write cost about 120 us of CPU in SQLite and the kernel; four
committed together about 40 each, eight about 27 (measured on this machine).

How: a write is a function of the connection. The first thread to arrive becomes the
leader: it takes every write waiting at that moment (its own first), runs each in a
savepoint of its own inside one BEGIN IMMEDIATE transaction, and commits. A write that
raises is rolled back to its savepoint, alone, and its caller gets the exception; the
others commit. Every caller returns (or raises) only once the commit that holds its write
has been made, so an answered write survives a crash as before. Writes that arrive while
a batch is being committed wait for the next one, whose leader is the first of them. A
failure of the transaction itself (the lock not had within the busy timeout, the commit
failing) fails every write of the batch. The writes run in the order they arrived, in one
transaction, so the feed's positions are given in commit order as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")
C = TypeVar("C")


class _Write(Generic[C]):
    __slots__ = ("done", "error", "lead", "result", "wake", "work")

    def __init__(self, work: Callable[[C], Any]) -> None:
        self.work = work
        self.wake = threading.Event()  # set when done, or when made the next leader
        self.lead = False
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None


class GroupCommit(Generic[C]):
    """Runs writes (functions of a connection) in shared transactions, as above.

    connection() gives the calling thread's connection; execute(connection, sql) runs a
    statement on it; writing is the store's lock of its writers, held for each batch
    (taken within timeout seconds, else the batch fails with locked())."""

    def __init__(self, connection: Callable[[], C], execute: Callable[[C, str], Any],
                 writing: Any, timeout: float,
                 locked: Callable[[], BaseException]) -> None:
        self.connection = connection
        self.execute = execute
        self.writing = writing
        self.timeout = timeout
        self.locked = locked
        self._lock = threading.Lock()
        self._waiting: list[_Write[C]] = []
        self._leading = False

    def run(self, work: Callable[[C], T]) -> T:
        """work(connection) in a transaction, committed before this returns; its result, or
        its exception."""
        write: _Write[C] = _Write(work)
        with self._lock:
            self._waiting.append(write)
            write.lead = not self._leading
            self._leading = True
        while not write.done:
            if write.lead:
                write.lead = False
                self._lead()
            else:
                write.wake.wait()
                write.wake.clear()
        if write.error is not None:
            raise write.error
        result: T = write.result
        return result

    def _lead(self) -> None:
        with self._lock:
            batch, self._waiting = self._waiting, []
        try:
            self._commit(batch)
        finally:
            for write in batch:
                write.done = True
                write.wake.set()
            with self._lock:
                following = self._waiting[0] if self._waiting else None
                if following is None:
                    self._leading = False
                else:
                    following.lead = True
            if following is not None:
                following.wake.set()

    def _commit(self, batch: list[_Write[C]]) -> None:
        if not self.writing.acquire(timeout=self.timeout):
            for write in batch:
                write.error = self.locked()
            return
        try:
            connection = self.connection()
            self.execute(connection, "BEGIN IMMEDIATE")
            try:
                for write in batch:
                    self.execute(connection, "SAVEPOINT grouped_write")
                    try:
                        write.result = write.work(connection)
                    except Exception as exc:  # this write's own failure: it alone is undone
                        write.error = exc
                        self.execute(connection, "ROLLBACK TO grouped_write")
                    self.execute(connection, "RELEASE grouped_write")
                self.execute(connection, "COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):  # SQLite may have rolled back already
                    self.execute(connection, "ROLLBACK")
                raise
        except BaseException as exc:  # the transaction failed: so did every write in it
            for write in batch:
                write.result = None
                write.error = _copy(exc) if isinstance(exc, Exception) else exc
            if not isinstance(exc, Exception):
                raise
        finally:
            self.writing.release()


def _copy(error: Exception) -> Exception:
    """The same failure as a new exception, so that each caller's thread raises its own."""
    try:
        copied = type(error)(*error.args)
    except Exception:
        return error
    copied.__cause__ = error.__cause__
    return copied
