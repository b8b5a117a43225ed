"""How the text of a setting is read (app.core.config's table names one reader a setting):
each returns the value, or raises ValueError with what was expected, which the table
turns into a SettingsError naming the variable. Also the readers other modules share:
what kind of store a PETSTORE_DATABASE names, that URL without its password, and a Host
as PETSTORE_CONSOLE_HOSTS and the console's guard read it (D36)."""

from __future__ import annotations

import ipaddress
import re


def boolean(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ValueError(f"expected true or false, got {text!r}")


def store_kind(database: str) -> tuple[str, str]:
    """("sqlite", path) or ("postgresql", url) for a PETSTORE_DATABASE value: a plain path or
    sqlite:///path is a SQLite file (sqlite:////abs/path for an absolute one, as in
    SQLAlchemy); postgresql:// or postgres:// is a PostgreSQL database."""
    scheme, sep, rest = database.partition("://")
    if not sep or "/" in scheme or "\\" in scheme:
        return "sqlite", database
    if scheme == "sqlite":
        if not rest.startswith("/") or rest == "/":
            raise ValueError("a SQLite URL is sqlite:///relative/path or sqlite:////absolute/path")
        return "sqlite", rest[1:]
    if scheme in ("postgresql", "postgres"):
        return "postgresql", database
    raise ValueError(f"unknown database scheme {scheme}://; use a file path, sqlite:///path "
                     "or postgresql://user:password@host:5432/dbname")


def redacted(database: str) -> str:
    """The database as it may be printed or logged: a URL's password replaced by ***,
    whether in its user part or its query (?password=)."""
    scheme, sep, rest = database.partition("://")
    if not sep:
        return database
    credentials, at, place = rest.rpartition("@")
    if at and ":" in credentials:
        rest = f"{credentials.split(':', 1)[0]}:***@{place}"
    return f"{scheme}://" + re.sub(r"([?&]password=)[^&]*", r"\1***", rest)


def database(text: str) -> str:
    store_kind(text)  # refuses an unknown scheme here, not at the first request
    return text


def busy_timeout(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 1000:
        raise ValueError("must be between 0 and 1000 milliseconds")
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError("must be a whole number of at least 1")
    return value


def non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be a whole number of at least 0")
    return value


def on_error(text: str) -> str:
    if text not in ("fallback", "closed"):
        raise ValueError("must be fallback or closed")
    return text


def log_format(text: str) -> str:
    if text not in ("json", "text"):
        raise ValueError("must be json or text")
    return text


def gzip_level(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 9:
        raise ValueError("must be a whole number from 0 (off) to 9")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise ValueError("must be a number of seconds above 0")
    return value


def non_negative_float(text: str) -> float:
    value = float(text)
    if value < 0:
        raise ValueError("must not be negative")
    return value


LOG_LEVELS = ("debug", "info", "warning", "error")


def log_level(text: str) -> str:
    level = text.strip().lower()
    if level not in LOG_LEVELS:
        raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
    return level


def bind(text: str) -> str:
    """gunicorn's forms: HOST:PORT, [IPv6]:PORT, or unix:PATH."""
    if text.startswith("unix:"):
        if len(text) == len("unix:"):
            raise ValueError("unix: needs a socket path, as in unix:/run/petstore.sock")
        return text
    host, colon, port = text.rpartition(":")
    if not colon or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError("must be HOST:PORT (127.0.0.1:8080, [::1]:8080, 0.0.0.0:80) or "
                         "unix:PATH, with a port from 0 to 65535")
    if host.startswith("["):
        if not host.endswith("]"):
            raise ValueError("an IPv6 address is written in brackets, as in [::1]:8080")
        ipaddress.IPv6Address(host[1:-1])
    return text


def networks(text: str) -> str:
    """Comma-separated addresses or networks (10.0.0.0/8), or *."""
    for entry in (entry.strip() for entry in text.split(",")):
        if entry and entry != "*":
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is not an address or a network (such as "
                                 "10.0.0.0/8); list them comma-separated, or use *") from None
    return text


def split_host(text: str) -> tuple[str, str] | None:
    """A Host header's name and port, the name in lower case without a trailing dot (an
    IPv6 address keeps its brackets): ("shop.example", "443"), ("[::1]", ""); None for
    text that is no host."""
    text = text.strip().lower()
    if text.startswith("["):
        name, bracket, port = text.partition("]")
        if not bracket or (port and not port.startswith(":")):
            return None
        try:  # as a browser writes it: [0:0::1] is [::1]
            name = f"[{ipaddress.IPv6Address(name[1:]).compressed}]"
        except ValueError:
            return None
        port = port[1:]
    else:
        name, _, port = text.partition(":")
    name = name[:-1] if name.endswith(".") else name
    if not re.fullmatch(r"[a-z0-9._-]+|\[[0-9a-f:.]+\]", name) or not (
            port == "" or (port.isascii() and port.isdigit() and len(port) <= 5)):
        return None
    return name, port


def hosts(text: str) -> str:
    """Comma-separated host names or addresses (IPv6 in brackets), without ports."""
    for entry in (entry.strip() for entry in text.split(",")):
        found = split_host(entry) if entry else ("", "")
        if found is None or found[1]:
            raise ValueError(f"{entry!r} is not a host name: list the names the console is "
                             "reached by, comma-separated, without a port, as in "
                             "shop.example,localhost,[::1]")
    return text


def origins(text: str) -> str:
    """Comma-separated origins (scheme://host[:port], no path), or *."""
    for entry in (entry.strip() for entry in text.split(",")):
        if entry and entry != "*" and not re.fullmatch(r"https?://[^/\s?#]+", entry):
            raise ValueError(f"{entry!r} is not an origin: write scheme://host[:port], as "
                             "in https://shop.example.com, with no path")
    return text


def storage(text: str) -> str:
    if "://" not in text:
        raise ValueError("must be a storage URL: memory:// or redis://host:6379/0")
    return text
