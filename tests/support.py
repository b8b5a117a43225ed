"""Helpers every test suite shares: one way to check an Error response, one way to make keys."""

from __future__ import annotations

import ast
import dataclasses
import functools
import http.client
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

import pytest

from app.core import keys
from app.core.storage import Store

ERROR_FIELDS = {"code", "message", "status"}

# Every key the run issued and every log a server of the run wrote: at the session's end,
# conftest.py checks that no log line holds a key, its digest or a bearer header.
ISSUED_SECRETS: set[str] = set()
SERVER_LOGS: list[Path] = []


def assert_error(response: Any, status: int, code: str,
                 param: str | None = None) -> dict[str, Any]:
    """The response is an Error object with this status and code, as JSON, with a one-line
    message that leaks no stack trace, SQL or key; with param, it names that field (v2's
    Error only: v1's answers never carry `param`)."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) - {"param"} == ERROR_FIELDS, body
    assert body["code"] == code, body
    if param is not None:
        assert body.get("param") == param, body
    request = getattr(response, "_request", None)
    if request is not None and request.url.path.startswith("/v1/"):
        assert "param" not in body, body
    assert body["status"] == status
    message = body["message"]
    assert isinstance(message, str) and message and "\n" not in message
    for leak in ("Traceback", "sqlite", "psycopg", "SELECT ", "UPDATE ", "psk_"):
        assert leak not in message, message
    return body


def require_services() -> bool:
    """Whether this run must have every service and tool (CI: .ci/run sets
    PETSTORE_TEST_REQUIRE_SERVICES=1)."""
    return os.environ.get("PETSTORE_TEST_REQUIRE_SERVICES") == "1"


def unavailable(reason: str) -> NoReturn:
    """The one way a test gives up for want of a service or a tool (a database, a program,
    root, enough open files): skipped with the reason, or failed where the run requires
    them, so that CI cannot drop a test silently. tests/test_skips.py holds every skip of
    the suite to this."""
    if require_services():
        pytest.fail(f"{reason} (PETSTORE_TEST_REQUIRE_SERVICES=1 requires it)")
    pytest.skip(reason)


# What a loaded CI machine may add to a time the service promises (a key cache's time to
# live, say) before a test that waits for it gives up: the promise is the service's, the
# room is the machine's (two cores shared by two test processes and their servers).
LOADED_ROOM = 8.0


def wait_until(condition: Callable[[], Any], timeout: float = 10.0,
               message: str = "the condition did not come about", every: float = 0.02) -> Any:
    """condition()'s first true value, polled every `every` seconds until timeout seconds
    have passed (then the test fails with the message): the way a test waits for what it
    can observe, never a fixed sleep standing in for it."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} within {timeout} s")
        time.sleep(every)
    return value


def text_id(text: object) -> str:
    """A test id for a text full of control or direction characters: each character that
    is not an ASCII letter or digit as U<code point>, so that the id holds no backslash,
    quote or bracket (pytest's ids=ascii gave 'Rex\\tX', a node id that mutmut could not
    hand back to pytest)."""
    return "".join(c if c.isascii() and c.isalnum() else f"_U{ord(c):04X}_"
                   for c in str(text)) or "empty"


def make_key(
    store: Store,
    plan: str = "free",
    name: str = "test",
    per_minute: int | None = None,
    per_day: int | None = None,
) -> str:
    """Create a key in the store and return its secret."""
    new = keys.generate_key()
    store.create_key(
        digest=new.digest,
        prefix=new.prefix,
        name=name,
        plan=plan,
        per_minute=per_minute,
        per_day=per_day,
        now="2026-01-01T00:00:00Z",
    )
    ISSUED_SECRETS.add(new.secret)
    return new.secret


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PETSTORE = [sys.executable, "-m", "app.cli"]


class Server:
    """A running `petstore serve`, spoken to over real HTTP."""

    def __init__(self, port: int, log: Path, env: dict[str, str],
                 process: subprocess.Popen[Any] | None = None) -> None:
        self.port, self.log, self.env, self.process = port, log, env, process

    def request(
        self, method: str, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            conn.request(method, path, headers=headers or {})
            response = conn.getresponse()
            body = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, body
        finally:
            conn.close()

    def statuses(self, auth: dict[str, str]) -> dict[int, str]:
        """The order list as {id: status}; the list must answer 200."""
        status, _, body = self.request("GET", "/v1/store/orders", auth)
        assert status == 200, body
        return {order["id"]: order["status"] for order in json.loads(body)}

    def revision(self, auth: dict[str, str]) -> int:
        """The store's revision, as the list's ETag W/"<version>-<revision>" shows it."""
        etag = self.request("GET", "/v1/store/orders", auth)[1]["etag"]
        return int(etag.rsplit("-", 1)[1].rstrip('"'))

    def petstore(self, *args: str) -> subprocess.CompletedProcess[str]:
        """Run a petstore command against the server's database."""
        done = subprocess.run([*PETSTORE, *args], env=self.env, capture_output=True,
                              text=True, check=True)
        ISSUED_SECRETS.update(word for word in done.stdout.split() if word.startswith("psk_"))
        return done


def _wait_until_serving(port: int, process: subprocess.Popen[Any], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"server exited early:\n{log.read_text()}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            conn.request("GET", "/v1/openapi.json")
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"server did not answer within 30 s:\n{log.read_text()}")


@contextmanager
def serving(folder: Path, *serve_args: str, environ: dict[str, str] | None = None,
            own_group: bool = False, open_files: int | None = None,
            **settings: str) -> Iterator[Server]:
    """`petstore serve` on a free port of 127.0.0.1 over a database in folder, with extra
    PETSTORE_* settings (and other variables in environ); stopped with SIGTERM (then
    SIGKILL) when the block ends, unless it has stopped already. With own_group it leads a
    process group of its own, as a server started from a terminal does (Ctrl-C there is
    SIGINT to the whole group). With open_files, the server's limit of open files (soft and
    hard) is that number."""
    # Its temporary files (the metrics folder) in folder too: a test that kills the server
    # with SIGKILL leaves nothing in the machine's temporary folder.
    env = {**os.environ, "PETSTORE_DATABASE": str(folder / "petstore.db"), "TMPDIR": str(folder),
           **(environ or {})}
    env.update({f"PETSTORE_{name.upper()}": value for name, value in settings.items()})
    subprocess.run([*PETSTORE, "init"], env=env, capture_output=True, check=True)
    port = free_port()
    log = folder / f"server-{port}.log"
    SERVER_LOGS.append(log)
    with log.open("w") as out:
        process = subprocess.Popen(
            [*PETSTORE, "serve", "--bind", f"127.0.0.1:{port}", *serve_args],
            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=own_group,
            preexec_fn=None if open_files is None else functools.partial(
                resource.setrlimit, resource.RLIMIT_NOFILE, (open_files, open_files)),
        )
    try:
        _wait_until_serving(port, process, log)
        yield Server(port, log, env, process)
    finally:
        stop(process)


def stop(process: subprocess.Popen[Any], how: int = signal.SIGTERM,
         timeout: float = 15) -> None:
    """Stop a process the test started, unless it has stopped already: the signal how, and
    SIGKILL if it is still running timeout seconds later."""
    if process.poll() is None:
        process.send_signal(how)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wrap_store(app: Any, wrapper: Callable[[Store], Any]) -> None:
    """Make a built app's handlers and middleware use wrapper(its store): a failing one.
    Its readiness checks (D41) check the wrapped store from their next run on."""
    services = app.services
    wrapped = wrapper(services.store)
    services.readiness.store = wrapped
    app.services = dataclasses.replace(services, store=wrapped)


@contextmanager
def postgres_databases(admin_url: str) -> Iterator[Callable[[], str]]:
    """A factory of fresh databases on the PostgreSQL of admin_url, all dropped at the end."""
    import psycopg
    from psycopg import sql

    names: list[str] = []

    def create() -> str:
        name = f"petstore_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        names.append(name)
        return _with_database(admin_url, name)

    try:
        yield create
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            for name in names:
                admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
                              .format(sql.Identifier(name)))


def _with_database(url: str, name: str) -> str:
    """The URL with its database (path) replaced by name, its query kept."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def cpu_seconds(pid: int) -> float:
    """The CPU time (user and system) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def parse_python(source: str) -> ast.Module:
    """ast.parse, past CPython 3.11's spurious "AST constructor recursion depth mismatch"
    SystemError (python/cpython#106905, fixed after 3.11.7): its converter can miscount its
    depth while other threads run, as the servers and handler threads of earlier tests do.
    The source is parsed again then; any other failure is raised as it is."""
    try:
        return ast.parse(source)
    except SystemError as error:
        if "recursion depth mismatch" not in str(error):
            raise
        return ast.parse(source)



@contextmanager
def page_elsewhere(page: bytes) -> Iterator[int]:
    """One HTML page served on a free port of 127.0.0.1 of its own (another origin than
    the service's, for a browser test: a shop's page, another site's form); yields the
    port."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


class Interposed:
    """A store that runs `before`, given the call's arguments, once, at the next call of
    `name` after `arm()` (at once if armed=True) for which `when()` holds, then makes that
    call: something another request does at that very moment. Every other call goes to
    the store."""

    def __init__(self, store: Any, name: str, before: Callable[..., Any],
                 armed: bool = False, when: Callable[[], bool] = lambda: True) -> None:
        self.store, self.name, self.before, self.when = store, name, before, when
        self.armed = threading.Event()
        self.done = threading.Event()
        self.lock = threading.Lock()  # one call runs before, whatever calls at once
        if armed:
            self.arm()

    def arm(self) -> None:
        self.armed.set()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.store, name)
        if name != self.name:
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            if self.armed.is_set() and not self.done.is_set() and self.when():
                with self.lock:
                    if not self.done.is_set():
                        self.before(*args, **kwargs)
                        self.done.set()
            return method(*args, **kwargs)
        return call
