"""Hostile input over raw sockets to a real `petstore serve`: what reaches the application
is answered with the right status and the Error object; what the HTTP parser refuses first
gets a 4xx or a closed connection; and the worker goes on serving everyone else."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import NamedTuple

import pytest

from tests.support import Server, serving

pytestmark = pytest.mark.slow

LIST = "/v1/store/orders"


class Answer(NamedTuple):
    status: int | None  # None: the server closed the connection without answering
    headers: dict[str, str]
    body: bytes


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    with serving(tmp_path_factory.mktemp("hostile")) as server:
        key = server.petstore("keys", "create", "--plan", "enterprise", "--name", "h",
                              "--per-minute", "100000", "--per-day", "1000000").stdout.strip()
        server.petstore("init", "--demo")
        yield server, key


def send_raw(port: int, data: bytes) -> Answer:
    """Send bytes as they are; read one response (Content-Length bodies only)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        received = b""
        while b"\r\n\r\n" not in received:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                return Answer(None, {}, received)
            received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
        return Answer(int(lines[0].split()[1]), headers, body)


def request(method: str, target: str, headers: list[tuple[str, bytes]], body: bytes = b"",
            ) -> bytes:
    lines = [f"{method} {target} HTTP/1.1".encode("latin-1"), b"Host: 127.0.0.1",
             b"Connection: close"]
    lines += [name.encode() + b": " + value for name, value in headers]
    if body:
        lines.append(b"Content-Length: " + str(len(body)).encode())
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def assert_error_object(answer: Answer, status: int) -> dict[str, object]:
    assert answer.status == status, answer
    assert answer.headers["content-type"] == "application/json"
    error = json.loads(answer.body)
    assert set(error) == {"code", "message", "status"} and error["status"] == status
    assert "Traceback" not in answer.body.decode("utf-8", "replace")
    return error


def still_serving(server: Server, key: str) -> None:
    status, _, body = server.request("GET", LIST, {"Authorization": f"Bearer {key}"})
    assert status == 200 and isinstance(json.loads(body), list)


# Requests the HTTP parser lets through: each answered by the application.
REACHES_THE_APP = {
    "NUL in the order id": ("DELETE", f"{LIST}/1%00", "key", b"", 400),
    "control character in the order id": ("DELETE", f"{LIST}/%01", "key", b"", 400),
    "DEL character in the path": ("GET", f"{LIST}%7F", "key", b"", 404),
    "NUL in the path without a key": ("GET", f"{LIST}%00", None, b"", 404),
    "very long order id": ("DELETE", f"{LIST}/{'9' * 4000}", "key", b"", 400),
    "very long path": ("GET", "/v1/" + "a/" * 3000, "key", b"", 404),
    "a body on GET": ("GET", LIST, "key", b'{"hello": "world"}', 200),
    "a body on DELETE": ("DELETE", f"{LIST}/99999", "key", b"\x00\xff" * 100, 404),
    # 1,200 of them (12 KiB) fit in a request head; larger heads are 431 (test_slow_clients).
    "a thousand unknown query parameters":
        ("GET", LIST + "?" + "&".join(f"p{i}={i}" for i in range(1200)), "key", b"", 200),
}


@pytest.mark.parametrize("case", list(REACHES_THE_APP))
def test_hostile_input_that_reaches_the_app_gets_its_status_and_the_error_object(
    server: tuple[Server, str], case: str,
) -> None:
    http, key = server
    method, target, with_key, body, status = REACHES_THE_APP[case]
    headers = [("Authorization", f"Bearer {key}".encode())] if with_key else []
    answer = send_raw(http.port, request(method, target, headers, body))
    if status == 200:
        assert answer.status == 200 and isinstance(json.loads(answer.body), list)
    else:
        assert_error_object(answer, status if with_key or status == 404 else 401)
    if with_key:
        assert answer.headers["x-ratelimit-limit"]
    still_serving(http, key)


@pytest.mark.parametrize("header", [
    b"Bearer \xff\xfe\xfd",  # not UTF-8
    b"Bearer " + b"A" * 10000,  # far longer than any key, within a head's 16 KiB
])
def test_hostile_tokens_are_401_and_never_echoed(
    server: tuple[Server, str], header: bytes,
) -> None:
    http, key = server
    answer = send_raw(http.port, request("GET", LIST, [("Authorization", header)]))
    error = assert_error_object(answer, 401)
    assert header[7:17].decode("latin-1") not in str(error["message"])
    still_serving(http, key)


def test_two_authorization_headers_are_400(server: tuple[Server, str]) -> None:
    http, key = server
    auth = f"Bearer {key}".encode()
    answer = send_raw(http.port, request("GET", LIST, [("Authorization", auth),
                                                       ("Authorization", auth)]))
    assert_error_object(answer, 400)
    still_serving(http, key)


def test_a_control_character_in_the_request_id_gets_a_fresh_id(
    server: tuple[Server, str],
) -> None:
    http, key = server
    answer = send_raw(http.port, request("GET", LIST, [
        ("Authorization", f"Bearer {key}".encode()), ("X-Request-ID", b"abc\x01def")]))
    if answer.status is not None:  # the parser may refuse the header outright
        assert answer.status in (200, 400)
        assert "\x01" not in answer.headers.get("x-request-id", "")
    still_serving(http, key)


PARSER_REFUSES = {
    "bad request line": b"GARBAGE\r\n\r\n",
    "bad method characters": b"G(T / HTTP/1.1\r\nHost: x\r\n\r\n",
    "Transfer-Encoding with Content-Length":
        b"DELETE /v1/store/orders/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "NUL in a header name": b"GET / HTTP/1.1\r\nHost: x\r\nX\x00Y: 1\r\n\r\n",
    "NUL in a header value": b"GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n",
    "path of 100 kB": b"GET /v1/store/" + b"o" * 100_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    "header line without a colon": b"GET / HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n",
    "control characters in the token (DEL is refused alike)":
        b"GET /v1/store/orders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer psk_\x01\x02\r\n\r\n",
    "oversized header": b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 2_000_000
                        + b"\r\n\r\n",
}


@pytest.mark.parametrize("case", list(PARSER_REFUSES))
def test_input_the_parser_refuses_gets_a_4xx_or_a_closed_connection(
    server: tuple[Server, str], case: str,
) -> None:
    http, key = server
    answer = send_raw(http.port, PARSER_REFUSES[case])
    assert answer.status is None or 400 <= answer.status < 500, answer
    still_serving(http, key)
