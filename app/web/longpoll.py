"""Long polling of the feed of changed orders (D26), without a handler thread.

The handler of listOrderChanges answers at once. When its page is empty and the request
asked to `wait`, it writes in the request's Exchange the revision the page was read at and
the seconds asked for (Exchange.wait). LongPoll, between the quotas and Connexion, holds
such an answer on the event loop instead of sending it, and waits for the revision to pass
the one the page was read at; then it runs the request through Connexion again (so it is
counted once, on arrival, by the quotas outside). When the time is up, when the service
stops (release_waiting, from the worker's shutdown) or when this worker holds its cap of
waiting requests already, it sends the answer it holds.

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
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.core import metrics
from app.core.storage import Store
from app.web.exchange import exchange

log = logging.getLogger("petstore.feed")

POLL_SECONDS = 0.1  # how often a worker with waiting requests reads the revision
_RUNNING: weakref.WeakSet[LongPoll] = weakref.WeakSet()


def release_waiting() -> None:
    """Answer every waiting request of this process at once, with what it has (SIGTERM)."""
    for middleware in list(_RUNNING):
        middleware.release()


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


class LongPoll:
    """Holds the feed's empty answers of requests that asked to wait (see the module)."""

    def __init__(self, app: ASGIApp, *, store: Store, path: str, max_waiting: int,
                 watch: RevisionWatch | None = None) -> None:
        self.app, self.path, self.max_waiting = app, path, max_waiting
        # The worker's one watch, shared with the webhooks' deliverer (D28).
        self.watch = watch or RevisionWatch(store)
        self.waiting = 0
        self.stopping = False
        _RUNNING.add(self)

    def release(self) -> None:
        """Answer every waiting request now, and any that comes later at once."""
        self.stopping = True
        self.watch.release()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self.path:
            await self.app(scope, receive, send)
            return
        deadline: float | None = None
        asking = receive
        while True:
            held = await self._run(scope, asking, send)
            if held is None:  # answered
                return
            messages, revision, seconds = held
            now = time.monotonic()
            deadline = now + seconds if deadline is None else deadline
            if self.stopping or now >= deadline or self.waiting >= self.max_waiting:
                break
            self.waiting += 1
            metrics.FEED_WAITING.inc()
            try:
                changed = await self._wait(revision, deadline - now, receive)
            finally:
                self.waiting -= 1
                metrics.FEED_WAITING.dec()
            if changed is None:  # the client went away: nothing to answer
                return
            if not changed:
                break
            asking = _replay(receive)
        for message in messages:
            await send(message)

    async def _wait(self, revision: int, timeout: float, receive: Receive) -> bool | None:
        """Whether the revision passed this one within timeout (None if the client
        disconnected meanwhile, which frees its place under the cap at once)."""
        change = asyncio.ensure_future(self.watch.passed(revision, timeout))
        gone = asyncio.ensure_future(_disconnected(receive))
        try:
            await asyncio.wait((change, gone), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (change, gone):
                task.cancel()
        return None if gone.done() and not gone.cancelled() else change.result()

    async def _run(self, scope: Scope, receive: Receive,
                   send: Send) -> tuple[list[Message], int, float] | None:
        """Run the request; hold its answer if the handler asked to wait (returning it with
        the revision and the seconds it asked for), else send it on (returning None)."""
        found = exchange(scope)
        found.wait = None
        held: list[Message] = []

        async def sending(message: Message) -> None:
            if found.wait is not None:
                held.append(message)
            else:
                await send(message)

        await self.app(dict(scope), receive, sending)
        if found.wait is None:
            return None
        revision, seconds = found.wait
        return held, revision, seconds


async def _disconnected(receive: Receive) -> None:
    """Return when the client disconnects (a GET's body has been read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _replay(receive: Receive) -> Receive:
    """The request's receive for running it again: its (empty) body once more, then the
    connection's own messages (a disconnect)."""
    sent = False

    async def again() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        return await receive()

    return again
