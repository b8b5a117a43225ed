"""Long polling of the feed of changed orders (D26), without a handler thread.

The feed's handler (handlers/v2/changes.py) is the one `async def` handler: it reads its
page in the thread pool as every handler reads the store, and when the page is empty and
the request asked to `wait`, it waits on the event loop (FeedWaits.changed) for the
revision to pass the one the page was read at, then reads again. It is counted once, on
arrival, by the caller layer, and holds no thread while it waits. When the time is up,
when the service stops (release_waiting, from the worker's shutdown) or when this worker
holds its cap of waiting requests already, it answers with the page it has.

RevisionWatch learns of commits by reading the revision (which every change raises, from
any worker, host or the CLI) every POLL_SECONDS from a thread of its own, and only while a
request waits: one small read serves every waiting request of the worker.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import weakref

from starlette.types import Receive

from app.core import metrics
from app.core.storage import Store

log = logging.getLogger("petstore.feed")

POLL_SECONDS = 0.1  # how often a worker with waiting requests reads the revision
_RUNNING: weakref.WeakSet[FeedWaits] = weakref.WeakSet()


def release_waiting() -> None:
    """Answer every waiting request of this process at once, with what it has (SIGTERM)."""
    for waits in list(_RUNNING):
        waits.release()


class RevisionWatch:
    """Wakes waiters on the event loop when the store's revision passes theirs."""

    def __init__(self, store: Store, interval: float = POLL_SECONDS) -> None:
        self.store, self.interval = store, interval
        self.waiters: dict[asyncio.Future[bool], int] = {}
        self.lock = threading.Lock()
        self.more = threading.Event()
        self.thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None

    async def passed(self, revision: int, timeout: float) -> bool:
        """Whether the revision passed this one within timeout seconds (False also when
        release() ended the wait)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        with self.lock:
            self.waiters[future] = revision
            if self.thread is None or not self.thread.is_alive():
                # Started by the first waiter of this process (threads do not survive
                # gunicorn's fork of the worker).
                self.loop = loop
                self.thread = threading.Thread(target=self._watch, name="feed-watch",
                                               daemon=True)
                self.thread.start()
        self.more.set()
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return False
        finally:
            with self.lock:
                self.waiters.pop(future, None)

    def release(self) -> None:
        """End every wait now (from any thread)."""
        with self.lock:
            futures = list(self.waiters)
        if futures and self.loop is not None:
            self.loop.call_soon_threadsafe(self._settle,
                                           [(future, False) for future in futures])

    def _settle(self, outcomes: list[tuple[asyncio.Future[bool], bool]]) -> None:
        for future, outcome in outcomes:
            if not future.done():
                future.set_result(outcome)

    def _watch(self) -> None:
        failing = False
        while True:
            with self.lock:
                waiting = list(self.waiters.items())
                if not waiting:
                    self.more.clear()
            if not waiting:
                self.more.wait()
                continue
            try:
                revision = self.store.revision()
            except Exception as exc:  # the store is down: the waits run out, or it returns
                if not failing:  # said once, not once a second for the whole outage
                    log.warning("the feed's watch cannot read the revision (%s); waiting "
                                "requests are answered when their time is up", exc)
                failing = True
                time.sleep(1)
                continue
            if failing:
                log.warning("the feed's watch reads the revision again")
                failing = False
            passed = [(future, True) for future, seen in waiting if revision > seen]
            if passed and self.loop is not None:
                self.loop.call_soon_threadsafe(self._settle, passed)
            time.sleep(self.interval)


class FeedWaits:
    """The feed's waiting requests of one app: at most max_waiting at once, all woken by
    the worker's one RevisionWatch, all answered at once by release()."""

    def __init__(self, watch: RevisionWatch, max_waiting: int) -> None:
        # The worker's one watch, shared with the webhooks' deliverer (D28).
        self.watch, self.max_waiting = watch, max_waiting
        self.waiting = 0
        self.stopping = False
        _RUNNING.add(self)

    def release(self) -> None:
        """Answer every waiting request now, and any that comes later at once."""
        self.stopping = True
        self.watch.release()

    async def changed(self, revision: int, timeout: float, receive: Receive) -> bool | None:
        """Whether the revision passed this one within timeout: False at once when the
        service stops or the worker holds its cap of waiting requests; None if the client
        disconnected meanwhile, which frees its place under the cap at once."""
        if self.stopping or self.waiting >= self.max_waiting:
            return False
        self.waiting += 1
        metrics.FEED_WAITING.inc()
        change = asyncio.ensure_future(self.watch.passed(revision, timeout))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait((change, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (change, gone):
                task.cancel()
            self.waiting -= 1
            metrics.FEED_WAITING.dec()
        return None if gone.done() and not gone.cancelled() else change.result()


async def _disconnected(receive: Receive) -> None:
    """Return when the client disconnects (a GET's body has been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass
