"""Sending one webhook message (D28), with aiohttp's client: the one outbound
HTTP client of the service, used by the web wing's deliverer (on its event loop) and for
the test message of the CLI, the API and the console (send_test). It stands between them
and the core, which imports no HTTP client (import-linter's layers in pyproject.toml).
aiohttp, not httpx: httpx scans its whole pool with a poll() per idle connection and tries
to import trio on every request, which under a thousand messages a second cost the
deliverer most of its CPU; aiohttp has a C parser and no anyio layer (docs/performance.md,
`python -m bench.webhooks`).

Every attempt resolves the URL's host again, checks every address it gets against the
rules of app.core.webhooks (address_allowed), and connects to the address it checked: the
request goes to a URL holding that address, with the original `Host` header and, for
https, the original name for TLS (`server_hostname`, which the certificate is also checked
against). So a name that resolves to a public address when checked and to 127.0.0.1 a
moment later (DNS rebinding) cannot steer a message inside. Redirects are not followed: a
3xx is a failed attempt. Each attempt has a timeout of its own, connecting and reading the
answer included; only the first RESPONSE_KEPT bytes of an answer are read.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import time
from collections.abc import Sequence
from urllib.parse import quote, urlsplit

import aiohttp
from yarl import URL

from app.core import webhook_urls, webhooks
from app.core.errors import InvalidParameter, WebhookUrlNotAllowed
from app.core.orders import utc_now
from app.core.storage import Store
from app.core.storage.records import WebhookEndpoint

USER_AGENT = "petstore-webhooks/1"
_ASCII = "".join(map(chr, range(33, 127)))  # kept as they are in a path or query


class Sender:
    """POSTs signed messages to webhook URLs, one attempt at a time per call. Made on the
    event loop it sends from."""

    def __init__(self, timeout: float, allowed: Sequence[webhook_urls.Network] = ()) -> None:
        self.timeout = timeout
        self.allowed = tuple(allowed)
        # No proxies from the environment (they would connect to the name, not the checked
        # address), no redirects (per request), no cookies kept between receivers, the
        # answer's bytes as sent (the attempts log keeps their start).
        self.client = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=1000),
            trust_env=False, cookie_jar=aiohttp.DummyCookieJar(), auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=timeout),
            headers={"user-agent": USER_AGENT})

    async def close(self) -> None:
        """Close every connection the client holds."""
        await self.client.close()

    async def send(self, url: str, headers: dict[str, str], body: bytes) -> webhooks.Outcome:
        """One attempt: how it went (never raises for the receiver's or the network's
        failures, nor for a refused address, to which nothing is sent)."""
        started = time.perf_counter()

        def took() -> float:
            return (time.perf_counter() - started) * 1000

        try:
            async with asyncio.timeout(self.timeout):  # the name's lookup included
                outcome = await self._send(url, headers, body)
        except TimeoutError:
            return webhooks.Outcome(None, error=f"no answer within {self.timeout:g} s",
                                    duration_ms=took())
        except (WebhookUrlNotAllowed, InvalidParameter) as exc:
            return webhooks.Outcome(None, error=exc.message, duration_ms=took())
        except (aiohttp.ClientError, OSError) as exc:
            text = str(exc) or type(exc).__name__
            return webhooks.Outcome(None, error=f"{type(exc).__name__}: {text}"[:300],
                                    duration_ms=took())
        return webhooks.Outcome(outcome.status, outcome.response, outcome.retry_after,
                                None, took())

    async def _send(self, url: str, headers: dict[str, str],
                    body: bytes) -> webhooks.Outcome:
        target = _target(url)
        resolved = await self._resolve(target)
        address = webhook_urls.addresses(target, self.allowed, lambda host, port: resolved)[0]
        sent = dict(headers)
        sent["host"] = _host(url)
        async with self.client.post(
                _direct(url, address), data=body, headers=sent, allow_redirects=False,
                server_hostname=target.host if target.scheme == "https" else None) as answer:
            kept = bytearray()
            while len(kept) < webhooks.RESPONSE_KEPT:
                chunk = await answer.content.readany()
                if not chunk:
                    break
                kept += chunk
            text = bytes(kept[:webhooks.RESPONSE_KEPT]).decode("utf-8", "replace")
            return webhooks.Outcome(answer.status, text, answer.headers.get("retry-after"))

    @staticmethod
    async def _resolve(target: webhook_urls.Target) -> list[str]:
        """The addresses of the target's host now (none to look up for an address)."""
        literal = webhook_urls.literal_address(target.host)
        if literal is not None:
            return [str(literal)]
        found = await asyncio.get_running_loop().getaddrinfo(
            target.host, target.port, type=socket.SOCK_STREAM)
        return list(dict.fromkeys(str(info[4][0]) for info in found))
# What a URL comes to is worked out once: a deliverer sends a thousand messages a second to
# the URLs of a few endpoints. (The address is resolved and checked at every attempt.)
_target = functools.lru_cache(maxsize=1024)(webhook_urls.check_url)


@functools.lru_cache(maxsize=1024)
def _host(url: str) -> str:
    """The Host header of a URL: its name as IDNA, and its port if one is given."""
    return URL(url).raw_authority


@functools.lru_cache(maxsize=1024)
def _direct(url: str, address: webhook_urls.Address) -> URL:
    """The URL with its host replaced by the checked address, its path and query sent as
    the integrator wrote them (a %2F stays %2F; only what is not ASCII is percent-encoded,
    as a URL on the wire must be)."""
    parts = urlsplit(url)
    host = f"[{address}]" if address.version == 6 else str(address)
    port = f":{parts.port}" if parts.port is not None else ""
    target = quote(parts.path or "/", safe=_ASCII)
    if parts.query:
        target += "?" + quote(parts.query, safe=_ASCII)
    return URL(f"{parts.scheme}://{host}{port}{target}", encoded=True)


def send_now(url: str, headers: dict[str, str], body: bytes, timeout: float,
             allowed: Sequence[webhook_urls.Network]) -> webhooks.Outcome:
    """One attempt from a thread that runs no event loop (a handler, the CLI)."""

    async def attempt() -> webhooks.Outcome:
        sender = Sender(timeout, allowed)
        try:
            return await sender.send(url, headers, body)
        finally:
            await sender.close()

    return asyncio.run(attempt())


def send_test(store: Store, endpoint: WebhookEndpoint, timeout: float,
              allowed: Sequence[webhook_urls.Network]) -> tuple[str, webhooks.Outcome]:
    """A signed ping to the endpoint, sent now from a thread that runs no event loop (the
    API's handler, the CLI, the console), and recorded in its attempts log: its
    webhook-id and how it went."""
    now = time.time()
    msg_id, body = webhooks.ping(endpoint, now)
    outcome = send_now(endpoint.url, webhooks.signed_headers(endpoint, msg_id, body, now),
                       body, timeout, allowed)
    store.record_webhook_attempt(
        endpoint_id=endpoint.id, webhook_id=msg_id, type=webhooks.PING, attempt=1,
        status=outcome.status, duration_ms=outcome.duration_ms, response=outcome.response,
        error=None if outcome.delivered else outcome.failure(), now=utc_now())
    return msg_id, outcome
