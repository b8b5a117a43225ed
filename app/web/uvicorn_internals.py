"""Every reach into uvicorn's internals, in one place (uvicorn 0.54 and uvicorn-worker 0.4,
pinned in pyproject.toml to the range the tests have passed on: an upgrade is a conscious
step that starts by reading this module). worker.py builds on these three classes; uvicorn's
public API (Config, Server.serve, the worker classes and their CONFIG_KWARGS) has none of it.

- The parser's callbacks. uvicorn has no hook for where a request head begins and ends, or
  for when a connection waits for the next one, which D27's bounds need: HeadHooks
  overrides the httptools callbacks of uvicorn's HttpToolsProtocol (on_message_begin,
  on_headers_complete, on_response_complete, in uvicorn.protocols.http.httptools_impl) and
  reads its request cycle to call them (Kludex/uvicorn#157, uvicorn's own, asks for a
  timeout on the request head, `--timeout-request-start`, which would make most of it
  unneeded). It also writes a refusal before the app, as uvicorn writes its own 400 (its
  STATUS_LINE, the server's default headers in server_state), and lets the parser go
  with what it held of the head. (HeadHooks)
- Accepting. Server.startup hands gunicorn's listening sockets to loop.create_server, which
  under uvloop accepts one connection a turn of the loop. SocketsServer.startup keeps the
  rest of it (the lifespan's startup and the exit status of its failure, the protocol's
  arguments, and the `servers` and `started` that serve() and shutdown() read) and lets a
  subclass serve the sockets. (SocketsServer)
- The worker's server. UvicornWorker.run serves with uvicorn's Server, and nothing names
  another class: ServerWorker.run is uvicorn-worker's run and its serving coroutine
  written out with a subclass's server, through public names only (gunicorn's
  handle_exit for SIGQUIT, uvicorn's Config.get_loop_factory). (ServerWorker; no
  upstream issue asks for a server class setting.)
"""

from __future__ import annotations

import asyncio
import signal
import socket
import sys
from typing import Any

from gunicorn.arbiter import Arbiter
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import STARTUP_FAILURE
from uvicorn.server import Server as UvicornServer
from uvicorn_worker import UvicornWorker


class HeadHooks(HttpToolsProtocol):
    """uvicorn's httptools protocol, telling a subclass where each request head begins
    (head_begun) and ends (head_complete, before the request goes to the app), and when an
    answer is done with the connection kept open and no pipelined request taking its turn
    (waiting)."""

    def head_begun(self) -> None:
        """The parser has the first byte of a request."""

    def head_complete(self) -> None:
        """The parser has a whole request head."""

    def waiting(self) -> None:
        """The answer is done; the connection waits for the next request."""

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.head_begun()

    def on_headers_complete(self) -> None:
        self.head_complete()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.cycle.response_complete:
            self.waiting()

    def write_refusal(self, status: int, headers: bytes, body: bytes) -> None:
        """Write an answer before the app (status, then the server's default headers, then
        headers, each line ending CRLF, then body), and let the parser go with what it
        held of the request head: nothing more is parsed."""
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            head.extend([name, b": ", value, b"\r\n"])
        head.extend([headers, b"\r\n", body])
        self.transport.write(b"".join(head))
        self.parser = None  # type: ignore[assignment]


class SocketsServer(UvicornServer):
    """uvicorn's Server, whose startup under gunicorn serves the listening sockets by
    serve_sockets (a subclass's) in place of loop.create_server."""

    def serve_sockets(self, sockets: list[socket.socket],
                      protocol_arguments: dict[str, Any]) -> list[Any]:
        """Serve the sockets, each connection with a protocol made with protocol_arguments
        (uvicorn's config, server state and app state); the servers made, each with close()
        and wait_closed(), which uvicorn calls at shutdown."""
        raise NotImplementedError

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        if sockets is None:  # not under gunicorn: uvicorn's own way
            await super().startup(sockets)
            return
        await self.lifespan.startup()
        if self.lifespan.should_exit:
            sys.exit(STARTUP_FAILURE)
        self.servers = self.serve_sockets(sockets, {
            "config": self.config, "server_state": self.server_state,
            "app_state": self.lifespan.state})
        # As uvicorn's startup ends: without it, serve() skips the graceful shutdown (the
        # shutdown test caught answers cut at SIGTERM).
        self.started = True


class ServerWorker(UvicornWorker):
    """uvicorn's gunicorn worker, serving with the Server that server() makes."""

    def server(self, config: Config) -> UvicornServer:
        raise NotImplementedError

    def run(self) -> None:
        # UvicornWorker.run: the worker's event loop (uvloop where the config asks), on
        # Python 3.11 as asyncio.run does from 3.12.
        with asyncio.Runner(loop_factory=self.config.get_loop_factory()) as runner:
            runner.run(self.serve())

    async def serve(self) -> None:
        """What UvicornWorker serves, with server() in place of uvicorn's Server."""
        self.config.app = self.wsgi
        server = self.server(self.config)
        # As uvicorn-worker does (encode/uvicorn#1116, benoitc/gunicorn#2604): SIGQUIT,
        # gunicorn's quick shutdown, goes to gunicorn's handle_exit, which marks the
        # worker no longer alive, in place of the signal's default, a core dump; the
        # master ends the worker after its graceful timeout.
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGQUIT, self.handle_exit, signal.SIGQUIT, None)
        await server.serve(sockets=self.sockets)
        if not server.started:
            sys.exit(Arbiter.WORKER_BOOT_ERROR)
