"""What one client can hold (D27), against a real `petstore serve` with
one worker and a limit of 1,500 open files: partial request heads are closed after the head
timeout, a client keeping the worker at its connection cap cannot keep a well-behaved one
out, a head too large is a 431 with an Error body and costs no memory, and running out of
file descriptors neither spins nor floods the log. Every loop here is bounded in count and
time, and every socket goes to 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import resource
import select
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import Server, cpu_seconds, serving, unavailable
from tests.web.test_metrics import sample

pytestmark = pytest.mark.slow

LIST = "/v1/store/orders"
PARTIAL = b"GET /v1/store/orders HTTP/1.1\r\nHost: x\r\n"
OPEN_FILES = 1500


@pytest.fixture(autouse=True, scope="module")
def enough_files_for_the_attacker() -> None:
    """This process plays the attacker and needs thousands of sockets of its own."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 6000 if hard == resource.RLIM_INFINITY else min(hard, 6000)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    if wanted < 4500:
        unavailable(f"the attacker needs 4,500 open files; the hard limit is {hard}")


def worker_of(server: Server) -> int:
    """The pid of the server's one gunicorn worker (the master is the serve process)."""
    assert server.process is not None
    pid = server.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def log_lines(server: Server) -> int:
    return len(server.log.read_text().splitlines())


def open_partial(port: int, count: int) -> list[socket.socket]:
    """count connections, each with the start of a request head and nothing more."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        sock.sendall(PARTIAL)
        sockets.append(sock)
    return sockets


def closed_by_server(sock: socket.socket) -> bool:
    """Whether the server has closed sock (it reads as ended, or was reset)."""
    poll = select.poll()  # select() takes no descriptor above 1023
    poll.register(sock, select.POLLIN)
    if not poll.poll(0):
        return False
    try:
        return sock.recv(65536) == b""
    except (ConnectionResetError, OSError):
        return True


class WellBehaved(threading.Thread):
    """A client that lists the orders on a new connection every interval, recording each
    answer's status and time."""

    def __init__(self, server: Server, auth: dict[str, str], interval: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.server, self.auth, self.interval = server, auth, interval
        self.answers: list[tuple[int | None, float]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set() and len(self.answers) < 2000:
            started = time.monotonic()
            try:
                status = self.server.request("GET", LIST, self.auth)[0]
            except OSError:
                status = None
            self.answers.append((status, time.monotonic() - started))
            self.stop.wait(self.interval)

    def finish(self) -> list[tuple[int | None, float]]:
        self.stop.set()
        self.join(timeout=15)
        return self.answers


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[tuple[Server, dict[str, str]]]:
    """One worker with the shipped bounds but a 2 s head timeout (to keep the test short),
    under a limit of 1,500 open files."""
    with serving(tmp_path, open_files=OPEN_FILES, head_timeout="2") as server:
        key = server.petstore("keys", "create", "--plan", "enterprise", "--per-minute",
                              "100000", "--per-day", "1000000").stdout.strip()
        server.petstore("init", "--demo")
        yield server, {"Authorization": f"Bearer {key}"}


def test_two_thousand_trickling_heads_are_closed_after_the_head_timeout(
        guarded: tuple[Server, dict[str, str]]) -> None:
    server, auth = guarded
    client = WellBehaved(server, auth)
    client.start()
    sockets = open_partial(server.port, 2000)
    try:
        # Trickle: a header line now and then keeps each connection busy sending, so only
        # the head timeout (not the idle timeout) can end it.
        open_now = list(sockets)
        # Those past the worker's cap wait in the listen backlog, or push out older ones
        # and are accepted: each is closed 2 s after its acceptance, so the last ones a
        # few seconds after the first. 6 s was too short on a machine busy with another
        # test run (314 of 2,000 still open in one of five runs); a passing run ends as
        # soon as all are closed.
        deadline = time.monotonic() + 15
        while open_now and time.monotonic() < deadline:
            open_now = [s for s in open_now if not closed_by_server(s)]
            for sock in open_now:
                with contextlib.suppress(OSError):
                    sock.send(b"X-Slow: 1\r\n")
            time.sleep(0.5)
        assert not open_now, f"{len(open_now)} of 2,000 partial heads still open"
    finally:
        answers = client.finish()
        for sock in sockets:
            sock.close()
    assert answers and all(status == 200 for status, _ in answers), answers
    _, _, body = server.request("GET", "/metrics")
    closed = sample(body.decode(), "petstore_connections_closed_total", reason="head_timeout")
    assert closed > 0


def test_a_client_at_the_connection_cap_cannot_keep_another_out(tmp_path: Path) -> None:
    with serving(tmp_path, open_files=OPEN_FILES, max_connections="200") as server:
        key = server.petstore("keys", "create", "--plan", "enterprise", "--per-minute",
                              "100000", "--per-day", "1000000").stdout.strip()
        auth = {"Authorization": f"Bearer {key}"}
        worker = worker_of(server)
        hostile = open_partial(server.port, 300)  # past the cap of 200 already
        client = WellBehaved(server, auth, interval=0.05)
        client.start()
        try:
            # The attacker opens a new connection for each one the server pushed out.
            deadline = time.monotonic() + 4
            while time.monotonic() < deadline:
                gone = [s for s in hostile if closed_by_server(s)]
                for sock in gone:
                    hostile.remove(sock)
                    sock.close()
                hostile += open_partial(server.port, len(gone))
                time.sleep(0.05)
        finally:
            answers = client.finish()
            for sock in hostile:
                sock.close()
        assert len(answers) >= 20 and all(status == 200 for status, _ in answers), answers
        assert worker_of(server) == worker  # the same worker throughout
        _, _, body = server.request("GET", "/metrics")
        assert sample(body.decode(), "petstore_connections_closed_total",
                      reason="evicted") >= 100


def send_huge_head(port: int, header_bytes: int) -> tuple[bytes, float]:
    """A request whose one header is header_bytes long, sent from a thread while the
    answer is read here; (the answer, seconds to it)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)

    def send() -> None:
        with contextlib.suppress(OSError):
            sock.sendall(b"GET /v1/store/orders HTTP/1.1\r\nHost: x\r\nX-Big: ")
            chunk = b"a" * 65536
            for _ in range(header_bytes // len(chunk)):
                sock.sendall(chunk)
            sock.sendall(b"\r\n\r\n")

    sender = threading.Thread(target=send, daemon=True)
    started = time.monotonic()
    sender.start()
    answer = b""
    try:
        while not answer.endswith(b"}"):
            data = sock.recv(65536)
            if not data:
                break
            answer += data
    finally:
        elapsed = time.monotonic() - started
        sock.close()
        sender.join(timeout=10)
    return answer, elapsed


@pytest.mark.parametrize("size", [64 * 1024, 20 * 1024 * 1024], ids=["64KiB", "20MB"])
def test_a_head_too_large_is_431_with_an_error_body_and_costs_no_memory(
        tmp_path: Path, size: int) -> None:
    with serving(tmp_path, open_files=OPEN_FILES) as server:
        worker = worker_of(server)
        server.request("GET", "/v1/openapi.json")  # the worker warmed up
        before = resident_mib(worker)
        for _ in range(3):
            answer, _ = send_huge_head(server.port, size)
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 431 "), answer[:200]
            assert b"connection: close" in head.lower()
            assert b"x-ratelimit-limit" not in head.lower()  # answered before the quotas
            assert json.loads(body) == {
                "code": "request_header_fields_too_large", "status": 431,
                "message": "The request head (request line and headers) is larger than "
                           "16384 bytes."}
        assert resident_mib(worker) - before < 20
        assert worker_of(server) == worker
        assert server.request("GET", "/v1/openapi.json")[0] == 200


def test_running_out_of_file_descriptors_neither_spins_nor_floods_the_log(
        tmp_path: Path) -> None:
    # 200 open files: what the worker needs for itself leaves it a cap of a few dozen
    # connections, and the attacker holds 1,000.
    with serving(tmp_path, open_files=200) as server:
        key = server.petstore("init", "--demo").stdout.strip()
        auth = {"Authorization": f"Bearer {key}"}
        worker = worker_of(server)
        lines = log_lines(server)
        hostile = open_partial(server.port, 1000)
        try:
            cpu = cpu_seconds(worker)
            time.sleep(5)
            assert cpu_seconds(worker) - cpu < 1.0  # no spinning
            assert log_lines(server) - lines < 100
        finally:
            for sock in hostile:
                sock.close()
        deadline = time.monotonic() + 10
        while server.request("GET", LIST, auth)[0] != 200:
            assert time.monotonic() < deadline, "service did not resume"
            time.sleep(0.2)
        assert worker_of(server) == worker
