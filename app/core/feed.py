"""The feeds of changed orders (D26) and of changed pets (D39): what a client keeping a
mirror of the orders, or a storefront keeping one of the catalogue, asks for, "every order
(pet) changed since I last looked", in the order of the changes. Both are read alike; each
names its own kind in its cursors, so that one feed's cursor is refused by the other.

Each order (pet) carries the position of its last change (the stores give it in commit order,
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
from collections.abc import Callable
from dataclasses import dataclass

from app.core.errors import InvalidParameter, ResyncRequired
from app.core.paging import seal, unseal
from app.core.storage import Store
from app.core.storage.records import Changes

LIMIT_DEFAULT = 100
LIMIT_MAX = 1000
FOLLOW_SECONDS = 0.2  # how often `petstore orders changes --follow` asks again when idle
ORDERS = "changes"  # first value of a cursor of the orders' feed: a page cursor is not one
PETS = "pet-changes"  # and of the pets' feed


@dataclass(frozen=True)
class Feed:
    """One page of a feed: the changed orders or pets (each as its JSON text), the cursor
    to ask with next (always one; the same position when nothing changed), and the
    revision the page was read at (a waiting request waits for a later one)."""

    items: list[str]
    next: str
    revision: int


def _era(changes: Changes, position: int) -> str:
    """The era of the database that a position falls in."""
    firsts = [first for first, _ in changes.eras]
    return changes.eras[max(bisect.bisect_right(firsts, position) - 1, 0)][1]


def cursor(read: Changes, position: int, order_id: int, kind: str = ORDERS) -> str:
    """The cursor of a feed (ORDERS or PETS) that goes on after this position and order
    (pet), in the database read."""
    return seal([kind, _era(read, position), position, order_id])


def _position(after: str, *kinds: str) -> tuple[str, str, int, int]:
    """The feed, era, position and id a cursor of one of these feeds carries, if it is
    intact."""
    edited = InvalidParameter("after", "cursor_edited")
    values = unseal(after, edited)
    if (len(values) != 4 or values[0] not in kinds or not isinstance(values[1], str)
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in values[2:])):
        raise edited
    return values[0], values[1], values[2], values[3]


def _given_here(read: Changes, era: str, position: int) -> None:
    """ResyncRequired unless this database, as read, could have given a cursor of that era
    at that position (D26): not another database's, nor one from past a restored backup."""
    if position > read.revision or _era(read, position) != era:
        raise ResyncRequired()


def _read(store: Store, kind: str) -> Callable[[tuple[int, int] | None, int], Changes]:
    return store.order_changes if kind == ORDERS else store.pet_changes


def resume_point(store: Store, after: str) -> tuple[str, int, int]:
    """The feed (ORDERS or PETS) and the (position, id) a cursor of either goes on after,
    if this database gave it as it is now: InvalidParameter for an edited one,
    ResyncRequired for another database's (D26). A webhook endpoint's replay starts there
    (D28, D39)."""
    kind, era, position, item_id = _position(after, ORDERS, PETS)
    _given_here(_read(store, kind)((position, item_id), 1), era, position)
    return kind, position, item_id


def changes(store: Store, after: str | None = None, limit: int = LIMIT_DEFAULT,
            kind: str = ORDERS) -> Feed:
    """The orders (pets, with kind PETS) changed after the cursor (from the beginning
    without one), up to limit, in the order of their last change, and the cursor to ask
    with next."""
    if not 1 <= limit <= LIMIT_MAX:
        raise InvalidParameter("limit", "type",
                               {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX})
    if after:
        _, era, position, item_id = _position(after, kind)
        read = _read(store, kind)((position, item_id), limit)
        _given_here(read, era, position)
    else:
        read = _read(store, kind)(None, limit)
    if read.rows:
        _, position, item_id = read.rows[-1]
        following = cursor(read, position, item_id, kind)
    else:
        # From the beginning: before every position (orders and pets held before their
        # feed existed are all at position 0).
        following = after or cursor(read, -1, 0, kind)
    return Feed([row[0] for row in read.rows], following, read.revision)


def latest(store: Store, kind: str = ORDERS) -> str:
    """A cursor after every change made so far: following it gives only later changes (the
    console's board starts there, D35)."""
    read = _read(store, kind)(None, 1)
    return cursor(read, read.revision, 2**63 - 1, kind)
