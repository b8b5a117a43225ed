"""Real HTTP receivers of webhooks on loopback, for the tests of D28: each records what it
is sent (verified with standardwebhooks when it knows the secret) and answers as told."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson
from standardwebhooks.webhooks import Webhook


@dataclass
class Received:
    """One request a receiver got: its headers (lower-case names), body and target (the
    path and query of its request line)."""

    headers: dict[str, str]
    body: bytes
    at: float = 0.0  # time.monotonic() of its arrival
    target: str = ""

    @property
    def message(self) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self.body)
        return value

    @property
    def id(self) -> str:
        return self.headers["webhook-id"]


@dataclass
class Receiver:
    """A receiver on 127.0.0.1:port. answer(received) gives (status, headers, body) for each
    request; by default 204. hang makes it hold each request for that many seconds.
    connections counts the connections open to it."""

    port: int = 0
    received: list[Received] = field(default_factory=list)
    answer: Callable[[Received], tuple[int, dict[str, str], bytes]] | None = None
    hang: float = 0.0
    arrived: threading.Condition = field(default_factory=threading.Condition)
    connections: int = 0  # open now: a sender keeps one alive between its messages

    def connected(self, change: int) -> None:
        """Count a connection opened (1) or closed (-1)."""
        with self.arrived:
            self.connections += change

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks"

    def record(self, got: Received) -> tuple[int, dict[str, str], bytes]:
        """Keep the request as it arrives, then answer it (after hang, if set)."""
        got.at = time.monotonic()
        with self.arrived:
            self.received.append(got)
            self.arrived.notify_all()
        if self.hang:
            time.sleep(self.hang)
        return self.answer(got) if self.answer else (204, {}, b"")

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Received]:
        """The first count requests, waiting up to timeout for them."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.received) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(self.received)} of {count} messages arrived "
                                         f"at {self.url} within {timeout} s")
                self.arrived.wait(left)
            return list(self.received[:count])

    def wait_until(self, done: Callable[[list[Received]], bool],
                   timeout: float = 10.0) -> list[Received]:
        """Every request received once done(received) holds, waiting up to timeout."""
        deadline = time.monotonic() + timeout
        with self.arrived:
            while not done(list(self.received)):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"after {timeout} s, {len(self.received)} messages "
                                         f"at {self.url}, not what was awaited")
                self.arrived.wait(left)
            return list(self.received)

    def verified(self, secret: str) -> list[dict[str, Any]]:
        """Every message received, each verified with the secret."""
        return [Webhook(secret).verify(r.body, r.headers) for r in list(self.received)]


@contextmanager
def receiving(**options: Any) -> Iterator[Receiver]:
    """A Receiver serving on a free port of 127.0.0.1 until the block ends."""
    receiver = Receiver(**options)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def setup(self) -> None:
            super().setup()
            receiver.connected(1)

        def finish(self) -> None:  # the sender closed the connection (or handle() failed)
            receiver.connected(-1)
            super().finish()

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            got = Received({k.lower(): v for k, v in self.headers.items()},
                           self.rfile.read(length), target=self.path)
            status, headers, body = receiver.record(got)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
