"""A TCP relay of the tests' own between the service and a server it needs (PostgreSQL,
Redis), on a free port of 127.0.0.1, that fails the way a link between hosts does (D41):

- drop(): a black hole. Nothing is forwarded either way and nothing is read, yet nothing
  is refused or closed: connections stay open and new ones are taken and held, as when a
  switch, a security group or a partition drops every packet.
- heal(): forward again, every connection held meanwhile included, from where it was.
- delay(seconds): forward every piece that much later (0: at once again).
- cut(): close every connection and refuse new ones, as a host gone down does;
  restore(): take connections again, on the same port.

One thread runs an asyncio loop for all of it; the tests call its methods from theirs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager

CHUNK = 65536


class Relay:
    """Forwards 127.0.0.1:port to (host, upstream_port); see the module."""

    def __init__(self, host: str, upstream_port: int) -> None:
        self.upstream = (host, upstream_port)
        self.port = 0
        self._flowing = threading.Event()  # set: forwarding; clear: dropping
        self._flowing.set()
        self._delay = 0.0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="relay",
                                        daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()  # both ends of each connection
        self._gate: asyncio.Event | None = None

    def start(self) -> Relay:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        return self

    def stop(self) -> None:
        """Close every connection and the listener, and end the thread."""
        async def close() -> None:
            assert self._server is not None and self._gate is not None
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            self._gate.set()  # the pumps and held connections wake, and end
            others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            await asyncio.wait(others, timeout=5) if others else None

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def cut(self) -> None:
        """Close every connection and the listener: connecting is refused until restore()."""
        async def cut() -> None:
            assert self._server is not None
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()

        asyncio.run_coroutine_threadsafe(cut(), self._loop).result(10)

    def restore(self) -> None:
        """Take connections again, on the same port."""
        asyncio.run_coroutine_threadsafe(self._listen(self.port), self._loop).result(10)

    def drop(self) -> None:
        """Forward nothing and read nothing from now on, closing nothing (a black hole)."""
        self._flowing.clear()
        self._loop.call_soon_threadsafe(self._gate_set, False)

    def heal(self) -> None:
        """Forward again, what was held included."""
        self._flowing.set()
        self._loop.call_soon_threadsafe(self._gate_set, True)

    def delay(self, seconds: float) -> None:
        """Forward every piece this many seconds after it came (0: at once)."""
        self._delay = seconds

    @property
    def dropping(self) -> bool:
        return not self._flowing.is_set()

    def _gate_set(self, flowing: bool) -> None:
        assert self._gate is not None
        if flowing:
            self._gate.set()
        else:
            self._gate.clear()

    async def _listen(self, port: int = 0) -> None:
        if self._gate is None:
            self._gate = asyncio.Event()
            self._gate.set()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, client_in: asyncio.StreamReader,
                     client_out: asyncio.StreamWriter) -> None:
        assert self._gate is not None
        self._writers.add(client_out)
        try:
            await self._gate.wait()  # a connection made while dropping is held, not refused
            server_in, server_out = await asyncio.open_connection(*self.upstream)
        except OSError:
            self._writers.discard(client_out)
            client_out.close()
            return
        self._writers.add(server_out)
        try:
            await asyncio.gather(self._pump(client_in, server_out),
                                 self._pump(server_in, client_out))
        finally:
            for writer in (client_out, server_out):
                self._writers.discard(writer)
                with contextlib.suppress(Exception):
                    writer.close()

    async def _pump(self, source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
        assert self._gate is not None
        try:
            while True:
                await self._gate.wait()  # while dropping, nothing more is read
                data = await source.read(CHUNK)
                if not data:
                    break
                if self._delay:
                    await asyncio.sleep(self._delay)
                await self._gate.wait()  # what was read as the drop began is held too
                target.write(data)
                await target.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            with contextlib.suppress(Exception):
                target.write_eof()


@contextmanager
def relay_to(host: str, port: int) -> Iterator[Relay]:
    """A started Relay to (host, port), stopped when the block ends."""
    relay = Relay(host, port).start()
    try:
        yield relay
    finally:
        relay.stop()
