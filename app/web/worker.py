"""The gunicorn worker `petstore serve` runs: uvicorn's, with uvloop and httptools, except
that it accepts connections itself, every waiting one at once.

Why (issue 17, measured): since libuv 1.45 (libuv/libuv#3696) uvloop accepts one connection
per turn of its loop. A worker busy with 64 connections turns its loop about every 10 ms, so
a burst of new connections, as a client's pool opening, waits in a staircase: on the wire
(tcpdump) every answer slower than 40 ms was the first on its connection, the 64th about
300 ms late, and wrk's p99 at 64 connections swung from 1.5 to 17 times its p50 from run to
run. asyncio's own loop accepts every waiting connection at once and has no such tail, but
cost 5 to 8% of throughput; so uvloop stays, and this worker takes over accept: a reader on
the listening socket accepts until none waits, and hands each connection to uvloop
(connect_accepted_socket) with uvicorn's protocol, as uvicorn's own server would.

Every reach into uvicorn's internals is here: Server.startup's socket branch, and the
worker's _serve that builds the Server.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import sys
from collections.abc import Callable
from typing import Any, ClassVar

from gunicorn.arbiter import Arbiter
from uvicorn.server import STARTUP_FAILURE
from uvicorn.server import Server as UvicornServer
from uvicorn_worker import UvicornWorker

log = logging.getLogger("petstore.worker")

# accept() failing for these concerns one connection, or passes (the peer left early, or
# the process is out of file descriptors for a moment): stop this round, the next readiness
# of the socket tries again.
TRANSIENT = {errno.ECONNABORTED, errno.EPROTO, errno.EMFILE, errno.ENFILE, errno.ENOBUFS,
             errno.ENOMEM, errno.EPERM}


class Acceptor:
    """Accepts every connection waiting on a listening socket, each turn of the loop, and
    serves it with a new protocol: what loop.create_server does, without uvloop's one
    connection per turn. Has the close() and wait_closed() uvicorn calls at shutdown."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket,
                 protocol_factory: Callable[[], asyncio.Protocol], backlog: int) -> None:
        self.loop, self.sock, self.factory, self.backlog = loop, sock, protocol_factory, backlog
        self.connecting: set[asyncio.Task[Any]] = set()
        sock.setblocking(False)
        loop.add_reader(sock.fileno(), self._accept)

    def _accept(self) -> None:
        for _ in range(self.backlog):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno not in TRANSIENT:
                    raise
                log.warning("accept failed: %s", exc)
                return
            conn.setblocking(False)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            task = self.loop.create_task(self._serve(conn))
            self.connecting.add(task)
            task.add_done_callback(self.connecting.discard)

    async def _serve(self, conn: socket.socket) -> None:
        try:
            await self.loop.connect_accepted_socket(self.factory, conn)
        except OSError:
            conn.close()  # the peer left before its transport was made

    def close(self) -> None:
        """Stop accepting (the listening socket stays open: gunicorn owns it)."""
        self.loop.remove_reader(self.sock.fileno())

    async def wait_closed(self) -> None:
        """Wait for connections accepted but not yet handed to their protocol."""
        if self.connecting:
            await asyncio.wait(self.connecting)


class Server(UvicornServer):
    """uvicorn's server, serving gunicorn's listening sockets through Acceptor."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None:  # not under gunicorn: uvicorn's own way
            await super().startup(sockets)
            return
        await self.lifespan.startup()
        if self.lifespan.should_exit:
            sys.exit(STARTUP_FAILURE)
        config = self.config

        def create_protocol() -> asyncio.Protocol:
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state)

        loop = asyncio.get_running_loop()
        self.servers = [Acceptor(loop, sock, create_protocol, config.backlog)  # type: ignore[misc]
                        for sock in sockets]
        # As uvicorn's startup ends: without it, serve() skips the graceful shutdown (the
        # shutdown test caught answers cut at SIGTERM).
        self.started = True


class Worker(UvicornWorker):
    """uvicorn's gunicorn worker (uvloop, httptools) with Server in place of uvicorn's."""

    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {"loop": "uvloop", "http": "httptools"}

    async def _serve(self) -> None:
        # UvicornWorker._serve, with this module's Server.
        self.config.app = self.wsgi
        server = Server(config=self.config)
        self._install_sigquit_handler()
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
