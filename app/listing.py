"""The order list as served, encoded once per revision of the orders.

The list is the one response whose cost grows with the shop. Its JSON is built by the
store and kept here, keyed by the store's revision, which every change to the orders
raises (from this worker, another worker or the CLI): a list is read and encoded once per
change, and never served after a change.
"""

from __future__ import annotations

from app.storage import Store


class ListCache:
    """The encoded list of the newest revision a worker has served, if it fits max_bytes.

    Handlers run in several threads: the entry is one tuple, replaced whole. Threads that
    miss at once after a change each read the list; none serves an older one.
    """

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entry: tuple[int, bytes] | None = None

    def current(self, store: Store) -> tuple[int, bytes]:
        """(revision, body) of the orders as they are now."""
        entry = self._entry
        if entry is not None and entry[0] == store.revision():
            return entry
        entry = store.orders_json()
        if len(entry[1]) <= self.max_bytes:
            self._entry = entry
        return entry
