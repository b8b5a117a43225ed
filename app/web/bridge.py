"""The hop from the event loop to the Flask app: one trip to a thread per response.

Connexion 3 runs Flask behind a2wsgi's WSGIMiddleware, which hands every message of a
response (its start, each chunk, its end) from the handler's thread to the event loop and
waits for the loop to take it: three round trips between threads for the smallest response,
which cost more CPU than Flask itself (see `make bench`). WSGIBridge keeps a2wsgi's environ
and request body (read from the thread on demand: a2wsgi_internals.wsgi_environ) and changes
only how the response comes back:

- The app runs in the thread pool until its response is complete or holds STREAM_AFTER
  bytes; that much comes back in one trip.
- The rest of a longer response is pulled one chunk per trip, and each chunk is sent from
  the event loop. A thread is held only while a chunk is being made, never while a slow
  client reads: ten clients downloading a huge list leave the pool free for other requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from starlette.types import Receive, Scope, Send

from app.web.a2wsgi_internals import wsgi_environ

WORKERS = 10  # handler threads per worker process, as a2wsgi's default
STREAM_AFTER = 1 << 20  # bytes of body gathered in the thread before streaming the rest

_DONE = object()
T = TypeVar("T")


class Reply:
    """What one trip to the thread brings back: the status and headers, the body gathered
    so far, and the iterator still to pull (None once the body is complete)."""

    __slots__ = ("chunks", "close", "headers", "rest", "status")

    def __init__(self) -> None:
        self.status = 500
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []
        self.rest: Iterator[bytes] | None = None
        self.close: Any = None


def _next_chunk(rest: Iterator[bytes]) -> Any:
    return next(rest, _DONE)


async def _watch_disconnect(receive: Receive, gone: asyncio.Event) -> None:
    """Set gone when the client disconnects. Started once the app has returned, so that it
    never takes a message of the request's body from the app."""
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.set()


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


class WSGIBridge:
    """An ASGI app running a WSGI app in a thread pool (in place of a2wsgi's)."""

    def __init__(self, app: Any, workers: int = WORKERS,
                 threads: HandlerThreads | None = None) -> None:
        self.app = app
        # threads: shared by the API's bridge and the console's (app/web/__init__.py)
        self.threads = threads or HandlerThreads(workers, "WSGI")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1000})
            return
        loop = asyncio.get_running_loop()
        environ = wsgi_environ(scope, receive, loop)
        reply = await self.threads.run(self._respond, environ)
        try:
            await send({"type": "http.response.start", "status": reply.status,
                        "headers": reply.headers})
            if reply.rest is None:
                await send({"type": "http.response.body", "body": b"".join(reply.chunks)})
                return
            # The client may leave half-way: stop making pieces nobody will read.
            gone = asyncio.Event()
            watcher = loop.create_task(_watch_disconnect(receive, gone))
            try:
                for chunk in reply.chunks:
                    await send({"type": "http.response.body", "body": chunk,
                                "more_body": True})
                while not gone.is_set():
                    chunk = await self.threads.run(_next_chunk, reply.rest)
                    if chunk is _DONE:
                        break
                    if chunk:
                        await send({"type": "http.response.body", "body": chunk,
                                    "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            finally:
                watcher.cancel()
        finally:
            if reply.close is not None:
                await self.threads.run(reply.close)

    def _respond(self, environ: dict[str, Any]) -> Reply:
        """In a handler thread: run the app and gather its response up to STREAM_AFTER."""
        reply = Reply()

        def start_response(status: str, headers: list[tuple[str, str]],
                           exc_info: Any = None) -> Any:
            if exc_info is not None and reply.headers:
                raise exc_info[1].with_traceback(exc_info[2])
            reply.status = int(status.split(" ", 1)[0])
            reply.headers = [(name.strip().lower().encode("latin-1"),
                              value.strip().encode("latin-1")) for name, value in headers]
            return reply.chunks.append

        iterable: Iterable[bytes] = self.app(environ, start_response)
        reply.close = getattr(iterable, "close", None)
        try:
            chunks = iter(iterable)
            gathered = sum(len(chunk) for chunk in reply.chunks)
            for chunk in chunks:
                reply.chunks.append(chunk)
                gathered += len(chunk)
                if gathered >= STREAM_AFTER:
                    # A body that ends here still goes out in one message (a cached list
                    # is one large chunk; compression caches only whole bodies).
                    following = next(chunks, None)
                    if following is not None:
                        reply.chunks.append(following)
                        reply.rest = chunks
                    break
        except BaseException:
            if reply.close is not None:
                reply.close()
            raise
        if reply.rest is None and reply.close is not None:
            reply.close()
            reply.close = None
        return reply

    @staticmethod
    async def _lifespan(receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            message = await receive()
        if message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
