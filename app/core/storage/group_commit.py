"""Group commit: the writes that a worker's threads make at the same moment share one
transaction and one commit, because on both stores the commit's flush, not the SQL, was
most of what a durable write cost.

A durable commit waits for a flush to disk. On SQLite (WAL, synchronous=FULL) it writes the
pages the transaction changed, and the triggers of every change (the revision, the order's
version and position) and the list indexes change the same few pages write after write,
so writes committed together share those pages' writing and cost each a fraction of one
committed alone (docs/performance.md has the figures). On
PostgreSQL every change of an order holds the revision's row until its commit is flushed
(D26), so writes committed one by one take turns, one flush each.

How: the first thread to arrive becomes the leader: it takes every write waiting at that
moment (its own first) and hands them to the store's commit, which runs them in one
transaction and gives each its result or its error: a write refused, or failing on its
own, fails alone, and the others commit. Every caller returns (or raises) only once the
commit that holds its write has been made, so an answered write survives a crash as
before. Writes that arrive while a batch is being committed wait for the next one, whose
leader is the first of them. A failure of the transaction itself (the commit raising)
fails every write of the batch. How a store runs a batch is its own: SQLite's in
savepoints (Savepoints, below), PostgreSQL's in pipelines (postgres_writes.py). Either way
the writes run in the order they arrived, in one transaction, so the feed's positions are
given in commit order as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

W = TypeVar("W")
C = TypeVar("C")


class Write(Generic[W]):
    """One write of a batch: what to do (work, as the store's commit understands it), and
    what came of it, which the commit sets: result, or error when it failed."""

    __slots__ = ("_asleep", "done", "error", "lead", "result", "work")

    def __init__(self, work: W) -> None:
        self.work = work
        # Held while the write's thread may sleep; released once for each wake (done, or
        # made the next leader). A bare lock, not a threading.Event: an Event is a Condition
        # and a waiters' list built in Python for each wait, and a batch wakes every one of
        # its writes (docs/performance.md).
        self._asleep = threading.Lock()
        self._asleep.acquire()
        self.lead = False
        self.done = False
        self.result: Any = None
        self.error: BaseException | None = None

    def sleep(self) -> None:
        """Wait for the next wake."""
        self._asleep.acquire()

    def wake(self) -> None:
        """End this write's sleep (or its next one: each wake is one sleep's end)."""
        self._asleep.release()


class GroupCommit(Generic[W]):
    """Runs writes in shared transactions, as above. commit(batch) runs a batch in one
    transaction and sets each write's result or error; when it raises, every write of the
    batch fails with that exception."""

    def __init__(self, commit: Callable[[list[Write[W]]], None]) -> None:
        self.commit = commit
        self._lock = threading.Lock()
        self._waiting: list[Write[W]] = []
        self._leading = False

    def run(self, work: W) -> Any:
        """work in a transaction, committed before this returns; its result, or its
        exception."""
        write: Write[W] = Write(work)
        with self._lock:
            self._waiting.append(write)
            write.lead = not self._leading
            self._leading = True
        while not write.done:
            if write.lead:
                write.lead = False
                self._lead()
            else:
                write.sleep()
        if write.error is not None:
            raise write.error
        return write.result

    def _lead(self) -> None:
        with self._lock:
            batch, self._waiting = self._waiting, []
        try:
            self.commit(batch)
        except BaseException as exc:  # the transaction failed: so did every write in it
            for write in batch:
                write.result = None
                write.error = _copy(exc) if isinstance(exc, Exception) else exc
            if not isinstance(exc, Exception):
                raise
        finally:
            for write in batch:
                write.done = True
                write.wake()
            with self._lock:
                following = self._waiting[0] if self._waiting else None
                if following is None:
                    self._leading = False
                else:
                    following.lead = True
            if following is not None:
                following.wake()


class Savepoints(Generic[C]):
    """A commit for GroupCommit whose writes are functions of a connection (SQLite's): each
    runs in a savepoint of its own inside one BEGIN IMMEDIATE transaction; a write that
    raises is rolled back to its savepoint, alone, and its caller gets the exception.

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

    def __call__(self, batch: list[Write[Callable[[C], Any]]]) -> None:
        if not self.writing.acquire(timeout=self.timeout):
            raise self.locked()
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
