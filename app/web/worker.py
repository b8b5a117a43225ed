"""The gunicorn worker `petstore serve` runs: uvicorn's, with uvloop and httptools, except
that it accepts connections itself, every waiting one at once.

Why: since libuv 1.45 (libuv/libuv#3696) uvloop accepts one connection per turn of its
loop, so on a busy worker a burst of new connections, as a client's pool opening, waits in
a staircase, one turn of the loop each, and the last of them sets the tail of the latency.
asyncio's own loop accepts every waiting connection at once and has no such tail, but costs
throughput; so uvloop stays, and this worker takes over accept: a reader on
the listening socket accepts until none waits, and hands each connection to uvloop
(connect_accepted_socket) with uvicorn's protocol, as uvicorn's own server would.

It also bounds what one client can hold (D27), before any of the service's code runs:
uvicorn reads a request head of any size and waits for it forever, so a client holding
thousands of connections with partial heads could run the worker out of file descriptors,
after which its accept loop spun, logging without end. Here:
- a request head is at most PETSTORE_HEAD_MAX_BYTES, else 431 (an Error body) and a
  lingering close; it must arrive within PETSTORE_HEAD_TIMEOUT of the connection opening or
  of the previous answer, else the connection is closed;
- a worker keeps at most PETSTORE_MAX_CONNECTIONS open, lowered to what its open-files limit
  leaves; at the cap a new connection pushes out the one that has waited longest without a
  whole head (or idled longest), never one whose request is being answered;
- an accept that fails for want of resources pauses accepting for a second, with one
  warning at most a second.

Its threads run as batch work (SCHED_BATCH, batch_scheduling): a thread one of them wakes
waits its turn instead of preempting its waker for a GIL it cannot take yet.

Every reach into uvicorn's internals is in uvicorn_internals.py, each with its reason: the
hooks GuardedProtocol takes from the parser's callbacks, the startup Server serves
gunicorn's sockets from, and the worker's construction of its Server.
"""

from __future__ import annotations

import asyncio
import errno
import gc
import logging
import os
import resource
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from uvicorn.config import Config

from app.core import metrics
from app.core.config import Settings
from app.web.errors import error_body
from app.web.longpoll import release_waiting
from app.web.uvicorn_internals import HeadHooks, ServerWorker, SocketsServer

log = logging.getLogger("petstore.worker")

# accept() failing with these concerns that one connection (the peer left early): the next
# one is tried at once.
PASSING = {errno.ECONNABORTED, errno.EPROTO, errno.EPERM}
# accept() failing with these means the process or the machine is out of something (file
# descriptors, buffers): trying again at once would spin, so accepting pauses.
EXHAUSTED = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}
PAUSE_SECONDS = 1.0  # as asyncio's own accept loop does on EMFILE
# At most this many accepts a turn of the loop: a burst of connections is still taken at
# once, and the connections pushed out to make room for them, whose descriptors
# close on the next turn, stay within RESERVED_FILES.
ACCEPT_BATCH = 64
# Descriptors a worker keeps for what is not a client connection: the database and its
# pool, the quota storage, log files, the metrics files, gunicorn's pipes, a burst's
# pushed-out connections. The connection cap is the open-files limit less this.
RESERVED_FILES = 128
LINGER_SECONDS = 2.0  # how long a refused head's connection reads and drops before closing
SWEEP_SECONDS = 1.0  # how often head timeouts are looked for: they fire within this late


def connection_cap(settings: Settings) -> int:
    """PETSTORE_MAX_CONNECTIONS, lowered to what the soft limit of open files leaves after
    RESERVED_FILES and the database pool: the cap and its eviction must come before the
    worker runs out of descriptors."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return settings.max_connections
    room = soft - RESERVED_FILES - settings.database_pool_size
    return max(1, min(settings.max_connections, room))


@dataclass(frozen=True)
class Bounds:
    """What one worker allows a connection (D27)."""

    head_max_bytes: int
    head_timeout: float
    max_connections: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Bounds:
        return cls(settings.head_max_bytes, settings.head_timeout, connection_cap(settings))


class Guard:
    """One worker's open connections, and those among them waiting for a whole request
    head (or idle between requests), oldest first: the ones a new connection may push out
    at the cap, and the ones the head timeout closes. A connection whose request is being
    answered is in neither."""

    def __init__(self, loop: asyncio.AbstractEventLoop, bounds: Bounds) -> None:
        self.loop, self.bounds = loop, bounds
        self.open = 0
        self.waiting: OrderedDict[GuardedProtocol, float] = OrderedDict()
        self._sweeping: asyncio.TimerHandle | None = None

    def admit(self, conn: GuardedProtocol) -> bool:
        """Count a new connection in, pushing out the longest waiting one at the cap;
        False when every open connection is being answered."""
        if self.open >= self.bounds.max_connections:
            if not self.waiting:
                metrics.CONNECTIONS_CLOSED.labels("refused").inc()
                return False
            oldest, _ = self.waiting.popitem(last=False)
            oldest.drop("evicted")
        self.open += 1
        self.wait(conn)
        if self._sweeping is None:
            self._sweeping = self.loop.call_later(SWEEP_SECONDS, self._sweep)
        return True

    def wait(self, conn: GuardedProtocol) -> None:
        """conn now waits for a request head, from now."""
        self.waiting.pop(conn, None)
        self.waiting[conn] = self.loop.time()

    def busy(self, conn: GuardedProtocol) -> None:
        """conn's request is being answered: it may be neither pushed out nor timed out."""
        self.waiting.pop(conn, None)

    def forget(self, conn: GuardedProtocol) -> None:
        """conn is closed (or closing: its descriptor goes on the loop's next turn)."""
        self.open -= 1
        self.waiting.pop(conn, None)

    def _sweep(self) -> None:
        deadline = self.loop.time() - self.bounds.head_timeout
        while self.waiting:
            conn, since = next(iter(self.waiting.items()))
            if since > deadline:
                break
            del self.waiting[conn]
            conn.drop("head_timeout")
        self._sweeping = self.loop.call_later(SWEEP_SECONDS, self._sweep)


class GuardedProtocol(HeadHooks):
    """uvicorn's httptools protocol under a Guard, with the request head's size bounded.

    The head is counted from the first byte after the previous answer (or the connection's
    opening) up to the parser's on_headers_complete. A chunk that would pass the bound is
    fed only up to it: a head not complete there is refused, and nothing past the bound is
    ever parsed or kept. (A request pipelined behind another one starts its count at its
    own first parsed byte: at most one read more than the bound.)"""

    def __init__(self, *args: Any, guard: Guard, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.guard = guard
        self.counted = False  # whether the guard counts this connection among its open ones
        self.in_head = True  # no whole request head since the previous answer
        self.head_bytes = 0
        self.lingering = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.counted = self.guard.admit(self)
        if not self.counted:
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.release()
        super().connection_lost(exc)

    def release(self) -> None:
        if self.counted:
            self.counted = False
            self.guard.forget(self)

    def drop(self, reason: str) -> None:
        """Close this connection for the guard (its head is late, or room is needed)."""
        metrics.CONNECTIONS_CLOSED.labels(reason).inc()
        self.release()
        self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.lingering or self.transport.is_closing():
            return
        if not self.in_head:
            super().data_received(data)
            return
        room = self.guard.bounds.head_max_bytes - self.head_bytes
        if len(data) <= room:
            self.head_bytes += len(data)
            super().data_received(data)
            return
        self.head_bytes += room
        super().data_received(data[:room])
        if self.in_head:
            self.refuse_head()
        else:
            self.data_received(data[room:])

    def head_begun(self) -> None:
        if not self.in_head:  # a request pipelined behind one being answered
            self.in_head, self.head_bytes = True, 0

    def head_complete(self) -> None:
        self.in_head = False
        self.guard.busy(self)

    def waiting(self) -> None:
        if not self.in_head:
            self.in_head, self.head_bytes = True, 0
        self.guard.wait(self)

    def refuse_head(self) -> None:
        """431 with an Error body, then a lingering close (D27, as nginx does):
        stop writing, read and drop what the client still sends for a while, then close.
        Closing at once with unread input would send a reset, and the client would never
        see the 431. (uvicorn's eof_received closes as soon as the client has sent all.)
        Answered before the quotas, like uvicorn's 400: no rate-limit headers."""
        metrics.CONNECTIONS_CLOSED.labels("head_too_large").inc()
        body = error_body(
            431, "request_header_fields_too_large",
            f"The request head (request line and headers) is larger than "
            f"{self.guard.bounds.head_max_bytes} bytes.")
        self.write_refusal(431, b"content-type: application/json\r\ncontent-length: %d\r\n"
                                b"connection: close\r\n" % len(body), body)
        self.lingering = True
        try:
            self.transport.write_eof()
        except (NotImplementedError, OSError, RuntimeError):
            self.transport.close()
            return
        self.guard.loop.call_later(LINGER_SECONDS, self.transport.close)


class Acceptor:
    """Accepts every connection waiting on a listening socket, each turn of the loop, and
    serves it with a new protocol: what loop.create_server does, without uvloop's one
    connection per turn. Has the close() and wait_closed() uvicorn calls at shutdown."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol_factory: Callable[[], asyncio.Protocol], backlog: int) -> None:
        self.loop, self.sock, self.factory, self.backlog = loop, sock, protocol_factory, backlog
        self.connecting: set[asyncio.Task[Any]] = set()
        self.paused: asyncio.TimerHandle | None = None
        self.failures, self.warned_at = 0, -1.0
        sock.setblocking(False)
        loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(min(self.backlog, ACCEPT_BATCH)):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in PASSING:
                    continue
                if exc.errno not in EXHAUSTED:
                    raise
                self._pause(exc)
                return
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self.loop.create_task(self._serve(conn))
            self.connecting.add(task)
            task.add_done_callback(self.connecting.discard)

    def _pause(self, exc: OSError) -> None:
        """Stop accepting for PAUSE_SECONDS (the connections wait in the listen backlog),
        saying so at most once a second with how many accepts failed meanwhile."""
        metrics.ACCEPT_FAILURES.inc()
        self.failures += 1
        now = time.monotonic()
        if now - self.warned_at >= 1.0:
            log.warning("accept failed (%s); not accepting for %.0f s (%d failed accepts "
                        "since the last warning)", exc.strerror, PAUSE_SECONDS, self.failures)
            self.warned_at, self.failures = now, 0
        self.loop.remove_reader(self.sock.fileno())
        self.paused = self.loop.call_later(PAUSE_SECONDS, self._resume)

    def _resume(self) -> None:
        self.paused = None
        self.loop.add_reader(self.sock.fileno(), self._accept)

    async def _serve(self, conn: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(self.factory, conn)
        except OSError:
            conn.close()  # the peer left before its transport was made

    def close(self) -> None:
        """Stop accepting (the listening socket stays open: gunicorn owns it)."""
        if self.paused is not None:
            self.paused.cancel()
        self.loop.remove_reader(self.sock.fileno())

    async def wait_closed(self) -> None:
        """Wait for connections accepted but not yet handed to their protocol."""
        if self.connecting:
            await asyncio.wait(self.connecting)


def batch_scheduling() -> None:
    """Have Linux schedule the worker's threads as batch work (SCHED_BATCH): a thread that
    another wakes then waits for the waker to block or use up its time slice, rather than
    preempting it at once.

    Why: the worker's threads hand work to one another (the event loop to a handler
    thread, Starlette's pool; a batch's leader to its writes, group_commit.py), and a woken thread
    needs the GIL, which its waker holds. Preempting the waker, it found the GIL taken and
    slept again: two context switches for nothing (docs/performance.md has the counts).
    Threads started afterwards inherit the policy. A system without it, or refusing it,
    changes nothing."""
    batch = getattr(os, "SCHED_BATCH", None)
    if batch is None:
        return
    try:
        os.sched_setscheduler(0, batch, os.sched_param(0))
    except OSError as exc:
        log.info("the worker keeps the system's default scheduling: %s", exc)


def freeze_what_lives() -> None:
    """Once the app is built, keep the garbage collector off what lives as long as the
    process (the app, its documents, their validators, Flask, Connexion).

    Python's full collections walk every tracked object; with the app's tens of thousands,
    one took long enough to be the service's p99 (docs/performance.md). After gc.freeze()
    those objects are never walked again, while everything a request makes is still
    collected as before.

    Here, after the lifespan's startup, rather than when gunicorn's worker starts: Connexion
    builds its middleware stack (every operation's validators) on the first ASGI message it
    gets, the lifespan's. Frozen before that, it was walked by every full collection under
    load, and those collections came often (gc.callbacks showed them)."""
    gc.collect()
    gc.freeze()


class Server(SocketsServer):
    """uvicorn's server, serving gunicorn's listening sockets through Acceptor, each
    connection with GuardedProtocol under one Guard."""

    def __init__(self, config: Config, bounds: Bounds) -> None:
        super().__init__(config=config)
        self.bounds = bounds

    def serve_sockets(self, sockets: list[socket.socket],
                      protocol_arguments: dict[str, Any]) -> list[Any]:
        freeze_what_lives()
        loop = asyncio.get_running_loop()
        guard = Guard(loop, self.bounds)

        def create_protocol() -> asyncio.Protocol:
            return GuardedProtocol(**protocol_arguments, guard=guard)

        return [Acceptor(loop, sock, create_protocol, self.config.backlog) for sock in sockets]

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Waiting feed requests are answered now, with what they have (D26), rather than
        # holding the shutdown for the rest of their wait.
        release_waiting()
        await super().shutdown(sockets)


class Worker(ServerWorker):
    """uvicorn's gunicorn worker (uvloop, httptools) with Server in place of uvicorn's."""

    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {"loop": "uvloop", "http": "httptools"}

    def init_process(self) -> None:
        # Right after the fork, before any of the worker's threads starts: all inherit it.
        batch_scheduling()
        super().init_process()

    def server(self, config: Config) -> Server:
        bounds = Bounds.from_settings(Settings.from_env())
        log.info("at most %d connections (open files: %d), request heads of %d bytes "
                 "within %g s", bounds.max_connections,
                 resource.getrlimit(resource.RLIMIT_NOFILE)[0], bounds.head_max_bytes,
                 bounds.head_timeout)
        return Server(config=config, bounds=bounds)
