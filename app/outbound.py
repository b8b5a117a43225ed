"""Sending one webhook message (DESIGN.md D28), with httpx's async client: the one outbound
HTTP client of the service, used by the web wing's deliverer (on its event loop) and by the
CLI's `petstore webhooks test`. It stands between them and the core, which imports no
HTTP client (import-linter's layers in pyproject.toml).

Every attempt resolves the URL's host again, checks every address it gets against the
rules of app.core.webhooks (address_allowed), and connects to the address it checked: the
request goes to a URL holding that address, with the original `Host` header and, for
https, the original name for TLS (httpx's `sni_hostname` extension, which the certificate
is also checked against). So a name that resolves to a public address when checked and to
127.0.0.1 a moment later (DNS rebinding) cannot steer a message inside. Redirects are not
followed: a 3xx is a failed attempt. Each attempt has a timeout of its own, connecting
and reading the answer included; only the first RESPONSE_KEPT bytes of an answer are read.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Sequence

import httpx

from app.core import webhooks
from app.core.errors import InvalidParameter, WebhookUrlNotAllowed


class Sender:
    """POSTs signed messages to webhook URLs, one attempt at a time per call."""

    def __init__(self, timeout: float, allowed: Sequence[webhooks.Network] = ()) -> None:
        self.timeout = timeout
        self.allowed = tuple(allowed)
        # No proxies from the environment (they would connect to the name, not the checked
        # address), no redirects, no cookies kept between receivers.
        self.client = httpx.AsyncClient(
            follow_redirects=False, trust_env=False, timeout=timeout,
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            headers={"user-agent": "petstore-webhooks/1"})

    async def close(self) -> None:
        """Close every connection the client holds."""
        await self.client.aclose()

    async def send(self, url: str, headers: dict[str, str], body: bytes) -> webhooks.Outcome:
        """One attempt: how it went (never raises for the receiver's or the network's
        failures, nor for a refused address, to which nothing is sent)."""
        started = time.perf_counter()

        def took() -> float:
            return (time.perf_counter() - started) * 1000

        try:
            outcome = await asyncio.wait_for(self._send(url, headers, body), self.timeout)
        except TimeoutError:
            return webhooks.Outcome(None, error=f"no answer within {self.timeout:g} s",
                                    duration_ms=took())
        except (WebhookUrlNotAllowed, InvalidParameter) as exc:
            return webhooks.Outcome(None, error=exc.message, duration_ms=took())
        except httpx.HTTPError as exc:
            text = str(exc) or type(exc).__name__
            return webhooks.Outcome(None, error=f"{type(exc).__name__}: {text}"[:300],
                                    duration_ms=took())
        except OSError as exc:
            return webhooks.Outcome(None, error=f"{type(exc).__name__}: {exc}"[:300],
                                    duration_ms=took())
        return webhooks.Outcome(outcome.status, outcome.response, outcome.retry_after,
                                None, took())

    async def _send(self, url: str, headers: dict[str, str],
                    body: bytes) -> webhooks.Outcome:
        target = webhooks.check_url(url)
        resolved = await self._resolve(target)
        address = webhooks.addresses(target, self.allowed, lambda host, port: resolved)[0]
        original = httpx.URL(url)
        direct = original.copy_with(host=str(address))
        sent = dict(headers)
        sent["host"] = original.netloc.decode("ascii")
        extensions = {"sni_hostname": target.host} if target.scheme == "https" else {}
        async with self.client.stream("POST", direct, content=body, headers=sent,
                                      extensions=extensions) as answer:
            kept = bytearray()
            async for chunk in answer.aiter_raw():
                kept += chunk
                if len(kept) >= webhooks.RESPONSE_KEPT:
                    break
            text = bytes(kept[:webhooks.RESPONSE_KEPT]).decode("utf-8", "replace")
            return webhooks.Outcome(answer.status_code, text,
                                    answer.headers.get("retry-after"))

    @staticmethod
    async def _resolve(target: webhooks.Target) -> list[str]:
        """The addresses of the target's host now (none to look up for an address)."""
        literal = webhooks.literal_address(target.host)
        if literal is not None:
            return [str(literal)]
        found = await asyncio.get_running_loop().getaddrinfo(
            target.host, target.port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(str(info[4][0]) for info in found))


def send_now(url: str, headers: dict[str, str], body: bytes, timeout: float,
             allowed: Sequence[webhooks.Network]) -> webhooks.Outcome:
    """One attempt from a thread that runs no event loop (a handler, the CLI)."""

    async def attempt() -> webhooks.Outcome:
        sender = Sender(timeout, allowed)
        try:
            return await sender.send(url, headers, body)
        finally:
            await sender.close()

    return asyncio.run(attempt())
