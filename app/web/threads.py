"""HandlerThreads: a fixed set of threads that run blocking calls for the event loop, for
the webhooks' deliverer (deliverer.py). (It served Flask's bridge until the API moved to
Connexion's AsyncApp, D42, whose handlers run in Starlette's thread pool.)
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class HandlerThreads:
    """A fixed set of threads that run calls for the event loop. A call waits in a queue;
    its result comes back as an asyncio future, set from the thread with one
    call_soon_threadsafe. (loop.run_in_executor does this through a concurrent.futures
    Future chained to an asyncio one, which cost a tenth of a small request.)"""

    def __init__(self, count: int, name: str) -> None:
        self.count, self.name = count, name
        self._reset()

    def _reset(self) -> None:
        # Threads do not survive a fork: a process starts its own (the app may have been
        # built before gunicorn forked its workers).
        self.calls: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.lock = threading.Lock()
        # idle: threads waiting for a call that no call has claimed yet
        self.pid, self.started, self.idle = os.getpid(), 0, 0

    def run(self, function: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """function(*args) in one of the threads, in the caller's context variables."""
        if self.pid != os.getpid():
            self._reset()
        # A new thread only when none is idle, as ThreadPoolExecutor does: calls one after
        # another reuse one thread (each thread that allocates grows a malloc arena of its
        # own: ten taking turns cost a streamed list 30 MB more).
        with self.lock:
            if self.idle:
                self.idle -= 1
                start = False
            else:
                start = self.started < self.count
                self.started += start
        if start:
            threading.Thread(target=self._work, args=(self.calls, self.lock),
                             name=f"{self.name}-{self.started}", daemon=True).start()
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self.calls.put((loop, future, contextvars.copy_context(), function, args))
        return future

    def close(self) -> None:
        """End the threads once the calls queued before this are done."""
        with self.lock:
            for _ in range(self.started):
                self.calls.put(())

    def _work(self, calls: queue.SimpleQueue[tuple[Any, ...]], lock: threading.Lock) -> None:
        while True:
            call = calls.get()
            if not call:  # close()
                return
            loop, future, context, function, args = call
            try:
                result = context.run(function, *args)
            except BaseException as exc:  # handed to the awaiting request, as it is
                outcome: tuple[Any, BaseException | None] = (None, exc)
            else:
                outcome = (result, None)
            # The loop may have closed meanwhile (a worker's end): nobody awaits the call.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, *outcome)
            with lock:
                self.idle += 1


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
