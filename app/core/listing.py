"""The order list as served: encoded once per revision of the orders while it fits the
cache, streamed in pages when it does not.

The list is the one response whose cost grows with the shop. Its JSON is built by the
store and kept here, keyed by the store's revision, which every change to the orders
raises (from this worker, another worker or the CLI): a list is read and encoded once per
change, and never served after a change. A list too large for the cache is read and sent
a page at a time, so that a worker's memory stays flat however many orders there are.
"""

from __future__ import annotations

from collections.abc import Iterator

from app.core.storage import Store

PAGE_ORDERS = 10_000  # orders per piece of a streamed list: about 1 MB of JSON
# More than one order's JSON can take (three 19-digit numbers, a date-time and a status
# come to about 170 bytes): a list of more orders than max_bytes / ORDER_BYTES_AT_MOST
# may not fit the cache, and is streamed.
ORDER_BYTES_AT_MOST = 256


class ListCache:
    """The encoded list of the newest revision a worker has served, if it fits max_bytes.

    Handlers run in several threads: the entry is one tuple, replaced whole. Threads that
    miss at once after a change each read the list; none serves an older one.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entry: tuple[int, bytes] | None = None
        self._too_large: int | None = None  # a revision known to be streamed

    def current(self, store: Store) -> tuple[int, bytes | Iterator[bytes]]:
        """(revision, body) of the orders as they are now: the body whole, or in pieces
        when the list may not fit the cache."""
        entry = self._entry
        revision = store.revision()
        if entry is not None and entry[0] == revision:
            return entry
        if (revision == self._too_large
                or store.count_orders() * ORDER_BYTES_AT_MOST > self.max_bytes):
            self._too_large = revision
            return store.orders_json_pages(PAGE_ORDERS)
        entry = store.orders_json()
        if len(entry[1]) <= self.max_bytes:
            self._entry = entry
        return entry
