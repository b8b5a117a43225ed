from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pythonjsonlogger.orjson import OrjsonFormatter
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from app.core import keys
from app.core.config import Settings
from app.core.setting_values import redacted
from app.core.storage import Store, open_store
from tests.support import ISSUED_SECRETS, SERVER_LOGS, free_port, postgres_databases, unavailable

# A full key ("psk_" and 43 characters; its first 12 are the prefix lists may show) or an
# Authorization header's bearer credential, wherever it appears.
LEAK = re.compile(r"psk_[A-Za-z0-9_-]{20,}|authorization\W{0,4}bearer\s+\S", re.IGNORECASE)


class LogRecorder(logging.Handler):
    """Keeps every log line of the run's in-process apps, with all its fields."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(OrjsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


RECORDER = LogRecorder()


def pytest_sessionstart(session: pytest.Session) -> None:
    logging.getLogger().addHandler(RECORDER)


def _leaks() -> list[str]:
    """Where this process's logs of the run, in process or from a served process, hold a
    key, a key's digest or an Authorization header's credential."""
    texts = [("in-process logs", "\n".join(RECORDER.lines))]
    texts += [(str(path), path.read_text(errors="replace"))
              for path in SERVER_LOGS if path.exists()]
    digests = {keys.digest(secret) for secret in ISSUED_SECRETS}
    leaks = []
    for where, text in texts:
        leaks += [f"{where}: {match.group(0)[:16]}..." for match in LEAK.finditer(text)]
        leaks += [f"{where}: the digest of a key" for d in digests if d in text]
    return leaks


# What the worker processes of a parallel run (pytest-xdist, make test) found: each scans its
# own logs when it finishes and hands the result to the controlling process, which fails the
# run (a worker's own exit status does not fail it).
WORKERS_LEAKS: list[str] = []


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown where xdist is not installed
def pytest_testnodedown(node: Any, error: Any) -> None:
    WORKERS_LEAKS.extend(getattr(node, "workeroutput", {}).get("leaks", []))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No log of the whole run, in-process or from a served process, holds a key, a key's
    digest or an Authorization header's credential: fail the run if one does."""
    leaks = _leaks() + WORKERS_LEAKS
    if hasattr(session.config, "workeroutput"):  # a worker: the controller reports them
        session.config.workeroutput["leaks"] = leaks
        return
    if leaks:
        print("\nSECRETS IN THE LOGS OF THIS RUN:\n  " + "\n  ".join(sorted(set(leaks))))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings for a fresh database in the test's own folder. Every HTTP test validates
    its responses against the OpenAPI document."""
    return Settings(database=str(tmp_path / "petstore.db"), validate_responses=True)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    store = open_store(settings)
    yield store
    store.close()


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The shared Redis of PETSTORE_TEST_REDIS_URL (use database 15). Unset, the tests that
    need it are skipped (failed under PETSTORE_TEST_REQUIRE_SERVICES); set but silent, they
    fail: a service the run was given and cannot reach is a fault, not a missing tool."""
    url = os.environ.get("PETSTORE_TEST_REDIS_URL")
    if not url:
        unavailable("PETSTORE_TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379/15)")
    import redis

    try:
        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.fail(f"Redis at {url} (PETSTORE_TEST_REDIS_URL) does not answer: {exc}")
    return str(url)


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix of this test's own in the shared Redis, deleted afterwards."""
    import redis

    prefix = f"petstore-test-{uuid.uuid4().hex[:12]}"
    yield prefix
    client = redis.Redis.from_url(redis_url)
    for name in client.scan_iter(f"{prefix}*"):
        client.delete(name)


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The shared PostgreSQL of PETSTORE_TEST_POSTGRES_URL, as a URL of a database a test
    may connect to in order to create its own (e.g. postgresql://postgres@127.0.0.1/postgres).
    Unset, skipped (failed under PETSTORE_TEST_REQUIRE_SERVICES); set but silent, failed."""
    url = os.environ.get("PETSTORE_TEST_POSTGRES_URL")
    if not url:
        unavailable("PETSTORE_TEST_POSTGRES_URL is not set "
                    "(e.g. postgresql://postgres@127.0.0.1:5432/postgres)")
    import psycopg

    try:
        psycopg.connect(url, connect_timeout=3).close()
    except psycopg.Error as exc:
        pytest.fail(f"PostgreSQL at {redacted(str(url))} (PETSTORE_TEST_POSTGRES_URL) does "
                    f"not answer: {exc}")
    return str(url)


@pytest.fixture
def postgres_database(postgres_url: str) -> Iterator[str]:
    """The URL of a database of this test's own on the shared PostgreSQL, created empty
    and dropped afterwards (with any connection still open to it)."""
    with postgres_databases(postgres_url) as create:
        yield create()


class PrivateRedis:
    """A redis-server of the test's own on a free port, to kill and restart at will.
    Never the shared one."""

    def __init__(self, binary: str, folder: Path) -> None:
        self.binary, self.folder = binary, folder
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import redis

        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    def dbsize(self) -> int:
        import redis

        return int(redis.Redis.from_url(self.url).dbsize())


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[PrivateRedis]:
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server is not installed (apt-get install redis-server)")
    server = PrivateRedis(str(binary), tmp_path)
    server.start()
    yield server
    server.kill()


# A name of another site that resolves to this machine in the test's browser, as an
# attacker's DNS makes theirs resolve to the victim's machine (DNS rebinding, D36).
REBOUND_HOST = "attacker.rebind.test"
# Chromium's switches for a test: no window, no sandbox (CI runs as root), no shared memory
# of /dev/shm's small size, and nothing fetched from outside (no proxy, no component
# updates, no sync, no first-run pages); REBOUND_HOST is 127.0.0.1.
CHROMIUM_ARGUMENTS = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                      "--disable-gpu", "--no-first-run", "--no-proxy-server",
                      "--disable-background-networking", "--disable-component-update",
                      "--disable-sync", f"--host-resolver-rules=MAP {REBOUND_HOST} 127.0.0.1")


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium of the test's own (Debian's `chromium`), driven by Selenium
    through Debian's `chromedriver`, named by its path so that Selenium Manager never looks
    for a driver, let alone downloads one. Without either package the test is skipped with
    the reason, or fails where PETSTORE_TEST_REQUIRE_SERVICES=1 (.ci/run installs both)."""
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or chromedriver is None:
        unavailable("a browser test needs Chromium and its driver "
                    "(apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(chromium)
    for argument in (*CHROMIUM_ARGUMENTS, f"--user-data-dir={tmp_path / 'chromium'}"):
        options.add_argument(argument)
    service = Service(executable_path=str(chromedriver),
                      log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)
    try:
        yield driver
    finally:
        driver.quit()
