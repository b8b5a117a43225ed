"""The order list as served: encoded once per revision of the orders, with its ETag.

The list is the one response whose cost grows with the shop. Its JSON is built by the
store and kept here, keyed by the store's revision, which every change to the orders
raises (from this worker, another worker or the CLI): a list is read and encoded once per
change, and a request whose If-None-Match holds the current ETag is answered 304 after
reading the revision alone.
"""

from __future__ import annotations

import threading

from app.storage import Store


def etag(version: str, revision: int) -> str:
    """The list's weak ETag: the service's version (the encoding may change with it) and
    the orders' revision."""
    return f'W/"{version}-{revision}"'


def matches(if_none_match: str, tag: str) -> bool:
    """Whether an If-None-Match value matches tag, by RFC 9110's weak comparison."""
    opaque = tag.removeprefix("W/")
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == opaque:
            return True
    return False


class ListCache:
    """The encoded list of the newest revision a worker has served, if it fits max_bytes.

    Handlers run in several threads: the entry is one tuple, replaced whole.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entry: tuple[int, bytes] | None = None
        self._lock = threading.Lock()

    def current(self, store: Store) -> tuple[int, bytes]:
        """(revision, body) of the orders as they are now."""
        revision = store.revision()
        entry = self._entry
        if entry is not None and entry[0] == revision:
            return entry
        # One thread reads and encodes; the others, asking for the same revision, wait
        # for it rather than read the same rows again.
        with self._lock:
            entry = self._entry
            if entry is not None and entry[0] >= revision:
                return entry
            entry = store.orders_json()
            if len(entry[1]) <= self.max_bytes:
                self._entry = entry
        return entry
