"""The Deploying page (docs/running/deploying.md), run as it is written: its systemd unit
passes `systemd-analyze verify`, and its nginx configuration, with TLS, in front of `petstore
serve`: the client's address and scheme reach the service only through a proxy its settings
trust, the feed's long polls pass through, and nginx refuses no body, head or wait that the
service accepts, and answers what it refuses itself with the service's Error object.

Everything runs on 127.0.0.1, nginx and the service alike, so each client connects from
an address of its own on the loopback network (127.0.0.2 and up): the service tells them
apart from nginx (127.0.0.1, which the default PETSTORE_FORWARDED_ALLOW_IPS trusts) and
from one another, as it would on a real network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml

from app.core.config import Settings
from app.web.bodies import MAX_BODY_BYTES
from tests.support import (
    SERVER_LOGS,
    Server,
    assert_error,
    free_port,
    serving,
    stop,
    unavailable,
    wait_until,
)
from tests.web.test_metrics import sample

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "running" / "deploying.md"
FENCED = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# nginx's main context and http block around the page's configuration: everything of its
# own in the test's folder, in the foreground. As root, nginx's workers would otherwise run
# as nobody, who cannot enter the test's folder.
NGINX_CONF = """daemon off;
{user}
worker_processes 1;
pid {folder}/nginx.pid;
error_log {folder}/error.log info;
events {{ worker_connections 256; }}
http {{
    access_log {folder}/access.log;
    client_body_temp_path {folder}/client_body;
    proxy_temp_path {folder}/proxy;
    fastcgi_temp_path {folder}/fastcgi;
    uwsgi_temp_path {folder}/uwsgi;
    scgi_temp_path {folder}/scgi;
{site}
}}
"""


def block(language: str, holding: str) -> str:
    """The page's one fenced block in this language that holds this text."""
    found = [text for lang, text in FENCED.findall(PAGE.read_text())
             if lang == language and holding in text]
    assert len(found) == 1, f"{PAGE.name} has {len(found)} {language} blocks with {holding!r}"
    return found[0]


def replaced(text: str, replacements: dict[str, str]) -> str:
    """text with each of its parts replaced, every one of which it holds exactly once."""
    for old, new in replacements.items():
        assert text.count(old) == 1, f"the page's configuration no longer holds {old!r} once"
        text = text.replace(old, new)
    return text


def test_the_pages_systemd_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable("systemd-analyze is not installed (Debian package systemd): the unit on "
                    "the Deploying page is not checked here")
    # The unit runs the venv's petstore, which must exist for verify: here, this venv's.
    unit = replaced(block("ini", "[Service]"), {
        "ExecStartPre=/opt/petstore/bin/petstore init":
            f"ExecStartPre={Path(sys.executable).parent / 'petstore'} init",
        "ExecStart=/opt/petstore/bin/petstore serve":
            f"ExecStart={Path(sys.executable).parent / 'petstore'} serve",
    })
    path = tmp_path / "petstore.service"
    path.write_text(unit)
    done = subprocess.run([analyze, "verify", str(path)], capture_output=True, text=True,
                          timeout=60)
    # verify exits 0 on an unknown key or a value it cannot parse, but says so.
    assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), done


@dataclass
class Stack:
    """`petstore serve` behind nginx with the page's configuration."""

    service: Server
    https: int  # nginx's port for TLS (443 on the page)
    http: int  # nginx's plain HTTP port (80), which sends clients to HTTPS
    certificate: Path  # self-signed, for 127.0.0.1

    def client(self, source: str, *, direct: bool = False) -> httpx.Client:
        """A client connecting from the loopback address source: to nginx over HTTPS, or
        (direct) straight to the service's port."""
        if direct:
            return httpx.Client(base_url=f"http://127.0.0.1:{self.service.port}",
                                transport=httpx.HTTPTransport(local_address=source))
        return httpx.Client(base_url=f"https://127.0.0.1:{self.https}",
                            transport=httpx.HTTPTransport(local_address=source,
                                                          verify=self.tls()))

    def tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.certificate)

    def seen(self, request_id: str) -> tuple[str, str]:
        """The client's address and the scheme the service took for that request, from
        its access line."""
        deadline = time.monotonic() + 5
        while True:
            for text in self.service.log.read_text().split("\n")[:-1]:  # whole lines
                line = json.loads(text)
                if line["logger"] == "petstore.access" and line["request_id"] == request_id:
                    return line["client"], line["scheme"]
            assert time.monotonic() < deadline, f"no access line for {request_id}"
            time.sleep(0.05)


@contextmanager
def nginx(folder: Path, upstream: int) -> Iterator[tuple[int, int, Path]]:
    """nginx with the page's configuration in front of the service on port upstream, with a
    certificate made here: its HTTPS and HTTP ports and the certificate."""
    binary = shutil.which("nginx", path=f"{os.environ.get('PATH', '')}:/usr/sbin")
    if binary is None:
        unavailable("nginx is not installed (Debian package nginx-light or nginx)")
    if shutil.which("openssl") is None:
        unavailable("openssl is not installed (Debian package openssl)")
    folder.mkdir()
    certificate, key = folder / "certificate.pem", folder / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", "/CN=petstore",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
                    "-out", str(certificate)], capture_output=True, check=True)
    https, http = free_port(), free_port()
    site = replaced(block("nginx", "listen 443 ssl;"), {
        "server 127.0.0.1:8080;": f"server 127.0.0.1:{upstream};",
        "listen 443 ssl;": f"listen 127.0.0.1:{https} ssl;",
        "listen 80;": f"listen 127.0.0.1:{http};",
        "/etc/letsencrypt/live/shop.example/fullchain.pem": str(certificate),
        "/etc/letsencrypt/live/shop.example/privkey.pem": str(key),
    })
    conf = folder / "nginx.conf"
    conf.write_text(NGINX_CONF.format(folder=folder, site=site,
                                      user="user root;" if os.geteuid() == 0 else ""))
    SERVER_LOGS.extend([folder / "access.log", folder / "error.log"])
    with (folder / "output.log").open("w") as out:
        process = subprocess.Popen([str(binary), "-p", str(folder), "-c", str(conf),
                                    "-e", str(folder / "error.log")],
                                   stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, (folder / "output.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", https), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, (folder / "error.log").read_text()
                time.sleep(0.05)
        yield https, http, certificate
    finally:
        stop(process, signal.SIGQUIT)  # nginx's graceful stop


@contextmanager
def behind_nginx(folder: Path, environ: dict[str, str] | None = None) -> Iterator[Stack]:
    with serving(folder, environ=environ) as service, \
            nginx(folder / "nginx", service.port) as (https, http, certificate):
        yield Stack(service, https, http, certificate)


# The page's settings name the public host the console answers (D36); the clients here reach
# nginx at 127.0.0.1, which the test names too.
CONSOLE_HOSTS = "shop.example,127.0.0.1"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The page's setup: nginx on the service's host, which the default settings trust."""
    with behind_nginx(tmp_path_factory.mktemp("deploying"),
                      {"PETSTORE_CONSOLE_HOSTS": CONSOLE_HOSTS}) as stack:
        yield stack


def anonymous_remaining(client: httpx.Client, request_id: str, **headers: str) -> int:
    """What remains of the quota of a request without a key, which counts against the
    client's address."""
    answer = client.get("/v1/store/orders", headers={"X-Request-ID": request_id, **headers})
    assert answer.status_code == 401, answer.text
    return int(answer.headers["x-ratelimit-remaining"])


def test_the_client_address_reaches_the_quotas_only_through_the_trusted_proxy(
        stack: Stack) -> None:
    with stack.client("127.0.0.2") as a, stack.client("127.0.0.3") as b, \
            stack.client("127.0.0.4", direct=True) as c:
        fresh = anonymous_remaining(a, "a-1")
        assert anonymous_remaining(a, "a-2") == fresh - 1
        # Another client through the same nginx has a counter of its own.
        assert anonymous_remaining(b, "b-1") == fresh
        # An X-Forwarded-For a client sends through nginx changes nothing.
        assert anonymous_remaining(a, "a-3", **{"X-Forwarded-For": "10.1.2.3"}) == fresh - 2
        # Straight to the service, X-Forwarded-For is not believed, whatever it names.
        assert anonymous_remaining(c, "c-1", **{"X-Forwarded-For": "127.0.0.2"}) == fresh
        assert anonymous_remaining(c, "c-2", **{"X-Forwarded-For": "10.1.2.4"}) == fresh - 1
        assert anonymous_remaining(a, "a-4") == fresh - 3
    assert [stack.seen(request) for request in ("a-1", "a-3", "b-1", "c-1", "c-2")] == [
        ("127.0.0.2", "https"), ("127.0.0.2", "https"), ("127.0.0.3", "https"),
        ("127.0.0.4", "http"), ("127.0.0.4", "http")]


def test_https_is_believed_from_the_trusted_proxy_and_no_one_else(stack: Stack) -> None:
    with stack.client("127.0.0.5") as through, \
            stack.client("127.0.0.6", direct=True) as direct:
        assert through.get("/healthz", headers={"X-Request-ID": "tls-1"}).status_code == 200
        answer = direct.get("/healthz", headers={"X-Request-ID": "direct-1",
                                                 "X-Forwarded-Proto": "https"})
        assert answer.status_code == 200
    assert stack.seen("tls-1") == ("127.0.0.5", "https")
    assert stack.seen("direct-1") == ("127.0.0.6", "http")
    # Plain HTTP to nginx goes no further than a redirect to HTTPS.
    moved = httpx.get(f"http://127.0.0.1:{stack.http}/healthz",
                      headers={"X-Request-ID": "plain-1"})
    assert (moved.status_code, moved.headers["location"]) == (
        301, "https://127.0.0.1/healthz")


def test_the_console_behind_the_proxy_gets_host_only_secure_cookies(stack: Stack) -> None:
    """Through nginx with TLS (D35), the console takes the client's address for its
    allow-list and https for its cookies from the proxy the settings trust: a user signs in
    with Secure __Host- cookies; an address outside PETSTORE_CONSOLE_ALLOW (loopback's
    127.0.0.1 by default) is refused, whatever nginx's own address. The Host nginx passes on
    is the browser's (D36): the public name of PETSTORE_CONSOLE_HOSTS is answered, another
    refused with 400 and no cookie."""
    one_time = stack.service.petstore("users", "add", "owner").stdout.strip()
    settings = block("sh", "PETSTORE_DATABASE=/var/lib/petstore")
    assert "PETSTORE_CONSOLE_HOSTS=shop.example" in settings
    with stack.client("127.0.0.1") as browser:
        rebound = browser.get("/console/sign-in", headers={"Host": "rebind.example"})
        assert rebound.status_code == 400 and "set-cookie" not in rebound.headers
        assert "does not answer at this name" in rebound.text
        public = browser.get("/console/sign-in", headers={"Host": "shop.example"})
        assert public.status_code == 200 and "Secure" in public.headers["set-cookie"]
        browser.cookies.clear()
        form = browser.get("/console/sign-in")
        assert form.status_code == 200
        assert form.headers["strict-transport-security"] == "max-age=31536000"
        cookie = form.headers["set-cookie"]
        assert cookie.startswith("__Host-petstore-console-form=") and "Secure" in cookie
        token = re.search(r'name="token" value="([^"]+)"', form.text).group(1)  # type: ignore[union-attr]
        signed = browser.post("/console/sign-in", data={
            "token": token, "name": "owner", "password": one_time},
            headers={"Sec-Fetch-Site": "same-origin"})
        assert signed.status_code == 303, signed.text
        assert signed.headers["location"] == "/console/account/password"
        session = signed.headers["set-cookie"]
        assert session.startswith("__Host-petstore-console=")
        assert all(part in session for part in ("Secure", "HttpOnly", "SameSite=Strict"))
    with stack.client("127.0.0.2") as elsewhere:
        refused = elsewhere.get("/console/sign-in")
    assert refused.status_code == 403 and "does not answer this address" in refused.text
    with stack.client("127.0.0.1", direct=True) as plain:
        cookie = plain.get("/console/sign-in").headers["set-cookie"]
    assert cookie.startswith("petstore-console-form=") and "Secure" not in cookie


def test_a_proxy_the_settings_do_not_trust_is_not_believed(tmp_path: Path) -> None:
    """With nginx's address left out of PETSTORE_FORWARDED_ALLOW_IPS, every client through
    it is nginx to the service: one address, one counter, plain HTTP."""
    with behind_nginx(tmp_path, {"PETSTORE_FORWARDED_ALLOW_IPS": "127.0.0.9"}) as untrusted:
        with untrusted.client("127.0.0.7") as a, untrusted.client("127.0.0.8") as b:
            fresh = anonymous_remaining(a, "untrusted-a")
            assert anonymous_remaining(b, "untrusted-b") == fresh - 1
        assert untrusted.seen("untrusted-a") == ("127.0.0.1", "http")
        assert untrusted.seen("untrusted-b") == ("127.0.0.1", "http")
        assert untrusted.service.process is not None
        stop(untrusted.service.process)
        # The service away, nginx answers as the service does when its database is.
        with untrusted.client("127.0.0.7") as a:
            away = a.get("/v1/store/orders")
        assert_error(away, 503, "service_unavailable")
        assert away.headers["retry-after"] == "1"


def test_nginx_refuses_no_body_or_head_the_service_accepts_and_refuses_as_it_does(
        stack: Stack) -> None:
    key = stack.service.petstore("keys", "create", "--plan", "pro").stdout.strip()
    write = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    order = b'{"petId": 1, "quantity": 1}'
    head_limit = Settings().head_max_bytes

    def bodies(client: httpx.Client, size: int, name: str) -> httpx.Response:
        return client.post("/v2/store/orders", content=order.ljust(size),
                           headers={**write, "Idempotency-Key": name})

    def heads(client: httpx.Client, **headers: str) -> httpx.Response:
        return client.get("/healthz", headers=headers)

    with stack.client("127.0.0.10") as through, \
            stack.client("127.0.0.11", direct=True) as direct:
        assert bodies(through, MAX_BODY_BYTES, "at-the-limit").status_code == 201
        own = assert_error(bodies(direct, MAX_BODY_BYTES + 1, "direct"), 413,
                           "payload_too_large")
        for size in (MAX_BODY_BYTES + 1, 10 * MAX_BODY_BYTES):
            assert assert_error(bodies(through, size, f"over-{size}"), 413,
                                "payload_too_large") == own

        assert heads(through, **{"X-Pad": "a" * (head_limit - 2000)}).status_code == 200
        own = assert_error(heads(direct, **{"X-Pad": "a" * head_limit}), 431,
                           "request_header_fields_too_large")
        # Over the limit in two lines, each within nginx's buffers: the service refuses.
        half = "a" * (head_limit // 2 + 1000)
        assert assert_error(heads(through, **{"X-Pad": half, "X-Pad-2": half}), 431,
                            "request_header_fields_too_large") == own
        # One line over the limit, or a request line: nginx refuses, in the same words.
        assert assert_error(heads(through, **{"X-Pad": "a" * (head_limit + 4000)}), 431,
                            "request_header_fields_too_large") == own
        assert assert_error(through.get("/healthz", params={"a": "a" * (head_limit + 4000)}),
                            431, "request_header_fields_too_large") == own


def _longest_wait() -> int:
    """The feed's longest wait, from v2's document."""
    document = yaml.safe_load((ROOT / "openapi" / "petstore-v2.yaml").read_text())
    (wait,) = [p for p in document["components"]["parameters"].values()
               if p["name"] == "wait"]
    return int(wait["schema"]["maximum"])


def _closed_after(stack: Stack, sent: bytes) -> float:
    """Seconds until nginx closes a TLS connection on which only sent was sent."""
    with socket.create_connection(("127.0.0.1", stack.https), timeout=60) as raw, \
            stack.tls().wrap_socket(raw, server_hostname="127.0.0.1") as connection:
        connection.sendall(sent)
        began = time.monotonic()
        try:
            while connection.recv(65536):
                pass
        except (ssl.SSLError, ConnectionError):
            pass  # closed without TLS's goodbye
        return time.monotonic() - began


def test_nginx_waits_for_the_feed_and_times_out_as_the_service_does(stack: Stack) -> None:
    longest = _longest_wait()
    # nginx gives up on an idle connection to the service before the service closes it.
    (idle,) = re.findall(r"^\s*keepalive_timeout (\d+)s;", block("nginx", "listen 443 ssl;"),
                         re.MULTILINE)
    assert int(idle) < Settings().keepalive_timeout
    key = stack.service.petstore("keys", "create", "--plan", "pro").stdout.strip()
    auth = {"Authorization": f"Bearer {key}"}
    answers: list[tuple[float, httpx.Response]] = []

    def poll(after: str) -> None:
        began = time.monotonic()
        with stack.client("127.0.0.12") as client:
            answer = client.get("/v2/store/order-changes", headers=auth,
                                params={"after": after, "wait": longest},
                                timeout=longest + 30)
        answers.append((time.monotonic() - began, answer))

    with stack.client("127.0.0.12") as client:
        start = client.get("/v2/store/order-changes", headers=auth)
    assert start.status_code == 200, start.text
    # A poll that nothing wakes: nginx holds it for the feed's whole wait.
    waiting = threading.Thread(target=poll, args=(start.json()["next"],))
    waiting.start()
    # Meanwhile, nginx closes a connection whose head is late, as the service does.
    late = _closed_after(stack, b"GET /healthz HTTP/1.1\r\nHost: petstore\r\n")
    assert Settings().head_timeout - 2 <= late <= Settings().head_timeout + 3, late
    waiting.join(timeout=longest + 40)
    ((took, answer),) = answers
    assert answer.status_code == 200, answer.text
    assert answer.json()["orders"] == []
    assert longest - 0.5 <= took <= longest + 5, took

    # A poll that a change wakes: answered through nginx as soon as the order is placed.
    answers.clear()
    waiting = threading.Thread(target=poll, args=(answer.json()["next"],))
    waiting.start()
    # Placed once the poll is held by the service (its /metrics' gauge of waiting feed
    # requests), so that the answer is the wake's, not a read that found the order.
    wait_until(lambda: sample(stack.service.request("GET", "/metrics")[2].decode(),
                              "petstore_feed_waiting") == 1, 20, "the poll was not waiting")
    with stack.client("127.0.0.12") as client:
        placed = client.post("/v2/store/orders", json={"petId": 2, "quantity": 1},
                             headers={**auth, "Idempotency-Key": "wakes-the-feed"})
    assert placed.status_code == 201, placed.text
    waiting.join(timeout=longest + 40)
    ((took, answer),) = answers
    assert answer.status_code == 200, answer.text
    assert [order["id"] for order in answer.json()["orders"]] == [placed.json()["id"]]
    assert took < 5, took
