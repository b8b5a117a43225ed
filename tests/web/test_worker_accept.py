"""The worker's accept loop when the process runs out of file descriptors (issue 24): it
pauses instead of spinning, warns at most once a second with a count, and resumes by itself.
Run in a child process of its own, whose limit of open files is set just above what it
holds, with the worker's Acceptor on a listening socket of 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

from tests.support import cpu_seconds, wait_until

ROOT = Path(__file__).resolve().parents[2]
CHILD = r"""
import asyncio, logging, os, resource, socket, sys
logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s %(message)s")
from app.web.worker import Acceptor

class Echo(asyncio.Protocol):
    def connection_made(self, transport):
        self.transport = transport
    def data_received(self, data):
        self.transport.write(data)

async def main():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    held = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (held + 20, hard))
    Acceptor(asyncio.get_running_loop(), sock, Echo, 1024)
    print(sock.getsockname()[1], flush=True)
    await asyncio.sleep(float(sys.argv[1]))

asyncio.run(main())
"""


def test_out_of_descriptors_the_accept_loop_pauses_warns_once_a_second_and_resumes(
        tmp_path: Path) -> None:
    errors = tmp_path / "stderr"
    with errors.open("w") as stderr:
        child = subprocess.Popen([sys.executable, "-c", CHILD, "12"], cwd=ROOT,
                                 stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        assert child.stdout is not None
        port = int(child.stdout.readline())
        held = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(60)]
        wait_until(lambda: "accept failed" in errors.read_text(), 10,
                   "the worker did not run out of descriptors")
        cpu = cpu_seconds(child.pid)
        time.sleep(4)  # a window to measure the CPU over
        assert cpu_seconds(child.pid) - cpu < 1.0  # paused, not spinning
        warnings = [line for line in errors.read_text().splitlines()
                    if "accept failed" in line]
        assert 1 <= len(warnings) <= 6, warnings  # at most one a second
        assert "Too many open files" in warnings[0] and "failed accepts" in warnings[0]
        for sock in held:
            sock.close()
        # The descriptors come back: accepting resumes by itself (the backlog drains by
        # up to 20 connections a second, what the limit leaves, then the new one is served).
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
                    sock.sendall(b"ping")
                    if sock.recv(4) == b"ping":
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "accepting did not resume"
            time.sleep(0.2)
    finally:
        child.kill()
        child.wait()
