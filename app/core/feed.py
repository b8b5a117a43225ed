"""The feed of changed orders (D26): what a client keeping a mirror of the orders
asks for, "every order changed since I last looked", in the order of the changes.

Each order carries the position of its last change (the stores give it in commit order,
from any host and by any path), so the feed is a range of an index: the orders after the
cursor's (position, id), each once, in its current state. A client that follows `next`
from no cursor sees every order, and every later change.

The cursor is sealed like the list's page cursors (paging.seal): an edited one is refused
(400 naming `after`). It carries the era of its position: each start of the service begins
an era at a position of its own, so a cursor from another database, or from after the
point a backup restored this database to, names an era this database does not have at
that position (or a position it has not reached), and is refused with ResyncRequired.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from app.core.errors import InvalidParameter, ResyncRequired
from app.core.paging import seal, unseal
from app.core.storage import Store
from app.core.storage.records import Changes

LIMIT_DEFAULT = 100
LIMIT_MAX = 1000
FOLLOW_SECONDS = 0.2  # how often `petstore orders changes --follow` asks again when idle
_KIND = "changes"  # first value of a feed cursor: a page cursor is not one


@dataclass(frozen=True)
class Feed:
    """One page of the feed: the changed orders (each as its JSON text), the cursor to
    ask with next (always one; the same position when nothing changed), and the revision
    the page was read at (a waiting request waits for a later one)."""

    orders: list[str]
    next: str
    revision: int


def _era(changes: Changes, position: int) -> str:
    """The era of the database that a position falls in."""
    firsts = [first for first, _ in changes.eras]
    return changes.eras[max(bisect.bisect_right(firsts, position) - 1, 0)][1]


def cursor(read: Changes, position: int, order_id: int) -> str:
    """The cursor that goes on after this position and order, in the database read."""
    return seal([_KIND, _era(read, position), position, order_id])


def _position(after: str) -> tuple[str, int, int]:
    """The era, position and id a cursor carries, if it is intact."""
    edited = InvalidParameter("after", "cursor_edited")
    values = unseal(after, edited)
    if (len(values) != 4 or values[0] != _KIND or not isinstance(values[1], str)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in values[2:])):
        raise edited
    return values[1], values[2], values[3]


def resume_point(store: Store, after: str) -> tuple[int, int]:
    """The (position, id) a cursor goes on after, if this database gave it as it is now:
    InvalidParameter for an edited one, ResyncRequired for another database's (D26). A
    webhook endpoint's replay starts there (D28)."""
    era, position, order_id = _position(after)
    read = store.order_changes((position, order_id), 1)
    if position > read.revision or _era(read, position) != era:
        raise ResyncRequired()
    return position, order_id


def changes(store: Store, after: str | None = None, limit: int = LIMIT_DEFAULT) -> Feed:
    """The orders changed after the cursor (from the beginning without one), up to limit,
    in the order of their last change, and the cursor to ask with next."""
    if not 1 <= limit <= LIMIT_MAX:
        raise InvalidParameter("limit", "type",
                               {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX})
    since = _position(after) if after else None
    read = store.order_changes(since[1:] if since else None, limit)
    if since is not None:
        era, position, _ = since
        if position > read.revision or _era(read, position) != era:
            raise ResyncRequired()
    if read.rows:
        _, position, order_id = read.rows[-1]
        following = cursor(read, position, order_id)
    else:
        # From the beginning: before every position (orders held before the feed existed
        # are all at position 0).
        following = after or cursor(read, -1, 0)
    return Feed([row[0] for row in read.rows], following, read.revision)


def latest(store: Store) -> str:
    """A cursor after every change made so far: following it gives only later changes (the
    console's board starts there, D35)."""
    read = store.order_changes(None, 1)
    return cursor(read, read.revision, 2**63 - 1)
