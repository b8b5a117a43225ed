"""Where a webhook may be sent (D28): the rules of a URL (http or https, no userinfo, at
most URL_MAX characters) and of the addresses its host is or resolves to (a global address,
or one inside PETSTORE_WEBHOOK_ALLOWED_NETWORKS), checked when an endpoint is created or
changed and again at every attempt (app/outbound.py connects to the address checked). With
no network code of its own but the system's resolver. The rest of the webhooks' rules are
app/core/webhooks.py's."""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from app.core.errors import InvalidParameter, WebhookUrlNotAllowed

URL_MAX = 2048

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]


def networks(text: str) -> tuple[Network, ...]:
    """PETSTORE_WEBHOOK_ALLOWED_NETWORKS as networks (comma-separated; empty: none)."""
    return tuple(ipaddress.ip_network(entry.strip(), strict=False)
                 for entry in text.split(",") if entry.strip() and entry.strip() != "*")


@functools.lru_cache(maxsize=1024)
def literal_address(host: str) -> Address | None:
    """The address a URL's host names when it is an address rather than a name, read as
    a resolver would: every IPv4 form inet_aton takes (`0`, `2130706433`, `127.1`,
    `0x7f.1`), and IPv6 (with or without brackets, without a zone). None for a name.
    (Kept for each host: a deliverer checks its endpoints' at every attempt.)"""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        return ipaddress.ip_address(bare.split("%", 1)[0])
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(bare))
    except OSError:
        return None


def address_allowed(address: Address, allowed: Sequence[Network] = ()) -> bool:
    """Whether a webhook may be sent to this address: a global one (not loopback, private,
    link-local such as 169.254.169.254, multicast, reserved, unspecified, unique-local,
    site-local, shared, nor an IPv4-mapped or other embedded IPv4 address), or one inside
    an allowed network."""
    if any(address in network for network in allowed if network.version == address.version):
        return True
    if isinstance(address, ipaddress.IPv6Address) and (
            address.ipv4_mapped is not None or address.sixtofour is not None
            or address.teredo is not None or address in _NAT64):
        return False  # an IPv4 address in disguise: refused whatever it holds
    # fec0::/10, deprecated (RFC 3879) but still routed inside some networks, which
    # ipaddress counts as global.
    if isinstance(address, ipaddress.IPv6Address) and address.is_site_local:
        return False
    return address.is_global and not (
        address.is_multicast or address.is_reserved or address.is_loopback
        or address.is_link_local or address.is_private or address.is_unspecified)


_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def system_resolver(host: str, port: int) -> list[str]:
    """Every address the system's resolver gives for host (as text)."""
    found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in found))


@dataclass(frozen=True)
class Target:
    """Where a webhook URL points: its scheme, host (a name, or an address's text), port."""

    scheme: str
    host: str
    port: int


def check_url(url: Any) -> Target:
    """The URL's target, if it is a webhook URL at all (http or https, a host, no userinfo,
    at most URL_MAX characters); InvalidParameter (400) naming what is wrong."""
    if not isinstance(url, str) or not url:
        raise InvalidParameter("url", "url_scheme")
    if len(url) > URL_MAX:
        raise InvalidParameter("url", "maxLength", {"maxLength": URL_MAX})
    if any(c.isspace() or ord(c) < 32 for c in url):
        raise InvalidParameter("url", "url_spaces")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidParameter("url", "url_invalid") from None
    if port == 0:  # no service listens there; not the scheme's port either
        raise InvalidParameter("url", "url_invalid")
    if parts.scheme not in ("http", "https"):
        raise InvalidParameter("url", "url_scheme")
    if "@" in parts.netloc:
        raise InvalidParameter("url", "url_userinfo")
    host = parts.hostname or ""
    if not host:
        raise InvalidParameter("url", "url_no_host")
    if parts.fragment:
        raise InvalidParameter("url", "url_fragment")
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    return Target(parts.scheme, host, port)


def addresses(target: Target, allowed: Sequence[Network],
              resolve: Resolver = system_resolver) -> list[Address]:
    """The addresses the target's host stands for, every one of them allowed (D28): the
    address itself for a literal, else what the resolver gives now. WebhookUrlNotAllowed
    when any is refused, or the name does not resolve."""
    literal = literal_address(target.host)
    if literal is not None:
        found = [literal]
    else:
        try:
            found = [ipaddress.ip_address(a.split("%", 1)[0])
                     for a in resolve(target.host, target.port)]
        except (OSError, UnicodeError, ValueError):
            raise WebhookUrlNotAllowed(f"The host {target.host} of the webhook URL does "
                                       "not resolve.") from None
    if not found:
        raise WebhookUrlNotAllowed(f"The host {target.host} of the webhook URL does not "
                                   "resolve.")
    refused = [a for a in found if not address_allowed(a, allowed)]
    if refused:
        raise WebhookUrlNotAllowed(
            f"The webhook URL reaches {refused[0]}, an address that is not public "
            "(loopback, private, link-local, site-local, multicast, reserved, or an IPv4 "
            "address in IPv6 form); the service does not send there.")
    return found
