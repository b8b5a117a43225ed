"""What the stores hand back besides plain dicts: keys and the outcome of a conditional
write, and the closed lists (statuses, plans) the schema enforces."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any

ORDER_STATUSES = ("pending", "shipped", "cancelled")
# A pet's status, derived from its stock, the units pending orders hold and whether it was
# withdrawn, so that it can never disagree with the orders (D32).
PET_STATUSES = ("available", "pending", "sold", "withdrawn")
STOCK_MAX = 1_000_000_000  # the most units a pet's stock may hold (D32)
PLANS = ("free", "pro", "business", "enterprise")
SCOPES = ("read", "write")  # D21: read keys may only GET


def _timestamp(moment: str | None) -> float | None:
    """A stored time (ISO 8601 UTC, ending in Z) as a Unix time."""
    if moment is None:
        return None
    return dt.datetime.fromisoformat(moment.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class ApiKey:
    """An API key as stored: never the key itself, only its digest and visible prefix.

    After a rotation (D21) the secret it had is kept as previous_digest until
    previous_until, the end of its grace; a later rotation replaces it. Times are ISO 8601
    UTC text, as every stored time."""

    id: int
    prefix: str
    name: str
    plan: str
    per_minute: int | None
    per_day: int | None
    created_at: str
    revoked_at: str | None
    banned_until: str | None = None
    expires_at: str | None = None
    scope: str = "write"
    last_used_at: str | None = None
    digest: str = ""
    previous_digest: str | None = None
    previous_until: str | None = None

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    @functools.cached_property
    def expires(self) -> float | None:
        """expires_at as a Unix time (read on every request, parsed once)."""
        return _timestamp(self.expires_at)

    @functools.cached_property
    def previous_ends(self) -> float | None:
        """previous_until as a Unix time: when the secret before the last rotation stops."""
        return _timestamp(self.previous_until)

    @functools.cached_property
    def ban_ends(self) -> float | None:
        """banned_until as a Unix time."""
        return _timestamp(self.banned_until)


# A key's fields, in the order the stores read and write them and `keys export` writes them.
KEY_FIELDS = tuple(field.name for field in dataclasses.fields(ApiKey))


@dataclass(frozen=True)
class Transition:
    """The outcome of a conditional write: the order's status afterwards (None when there
    is no such order), whether this very call made the change, and the order's complete
    flag and version afterwards (D25); and the whole order afterwards, as get_order gives
    it, when the store read it with the write (None: read it again), so that an answer
    with the order needs no second read (on PostgreSQL, a pool checkout and a round trip
    fewer)."""

    status: str | None
    changed: bool
    complete: bool = False
    version: int | None = None
    order: dict[str, Any] | None = dataclasses.field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class OrderMove:
    """A conditional change of one order (a cancel, a ship, a complete): the constant
    assignments (SQL of ours), the columns set to values of the caller's, and the condition
    the order must meet, the state it moves from (and its version, for If-Match, D25).
    Kept in parts so that a store may move many orders in one statement."""

    order_id: int
    assignments: str
    values: tuple[tuple[str, Any], ...]
    condition: str
    version: int | None = None

    def statement(self, param: str) -> tuple[str, tuple[Any, ...]]:
        """The UPDATE of this one order, with param the driver's placeholder."""
        assignments = ", ".join((self.assignments, *(f"{column} = {param}"
                                                     for column, _ in self.values)))
        where = f"id = {param} AND {self.condition}"
        params = (*(value for _, value in self.values), self.order_id)
        if self.version is not None:
            where += f" AND version = {param}"
            params = (*params, self.version)
        return (f"UPDATE orders SET {assignments}, version = version + 1 WHERE {where}",
                params)


@dataclass(frozen=True)
class Placed:
    """An order placed under an idempotency key (D23): the order as the first answer gave
    it and its version then, and whether this call replayed that answer (the key had
    placed it before) rather than placing it."""

    order: dict[str, Any]
    version: int
    replayed: bool


@dataclass(frozen=True)
class PetWrite:
    """A pet as a write left it (D32): the pet as getPet gives it, its version then (its
    strong ETag), and whether this call replayed the first answer of its idempotency key
    rather than writing."""

    pet: dict[str, Any]
    version: int
    replayed: bool = False


@dataclass(frozen=True)
class PetQuery:
    """Which pets a list selects (D32): statuses (none: every pet but the withdrawn ones),
    tags (any of them), a category; each tuple sorted and without repeats."""

    statuses: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    category: str | None = None


@dataclass(frozen=True)
class OrderQuery:
    """Which orders a v2 list selects, and in what order (D19). Statuses are
    sorted and without repeats; ship_from (inclusive) and ship_to (exclusive) are written as
    stored times are (UTC, whole seconds, ending in Z), so they compare as text."""

    statuses: tuple[str, ...] = ()
    pet_id: int | None = None
    complete: bool | None = None
    ship_from: str | None = None
    ship_to: str | None = None
    sort: str = "id"  # id, -id, shipDate or -shipDate


@dataclass(frozen=True)
class Position:
    """The sort key of the last order of a page: the next page starts after it. ship_date
    is None for the id sorts, and for an order without a shipDate."""

    ship_date: str | None
    id: int


@dataclass(frozen=True)
class Changes:
    """One read of the feed of changed orders (D26), all in one snapshot: up to
    limit orders changed after a position, as (the order's JSON, its position, its id) in
    the order of their last change; the latest position the database has given (its
    revision); and its eras, (first position, era) by first position."""

    rows: list[tuple[str, int, int]]
    revision: int
    eras: list[tuple[int, str]]


@dataclass(frozen=True)
class WebhookEndpoint:
    """A URL that every change of an order is pushed to (D28), as stored.

    api_key_id is the key that made it (None for one the operator added). types is the
    message types it asked for (empty: every order's type, D39). Its place (position,
    place_of, order_id) is where it is in the feeds of orders and pets at once: every
    change up to it has been delivered, the orders of a position before its pets
    (place_of "order", order_id an order's id; or "pet", order_id a pet's id).
    lease_owner holds it until lease_until (a Unix time): one deliverer across all
    workers and hosts. attempt is how many times the change after its place has failed,
    and next_attempt_at (a Unix time) when it is tried again. The secret signs;
    previous_secret too, until previous_until (a Unix time), after a rotation."""

    id: int
    api_key_id: int | None
    url: str
    types: tuple[str, ...]
    description: str
    enabled: bool
    disabled_reason: str | None
    secret: str
    previous_secret: str | None
    previous_until: float | None
    position: int
    order_id: int
    lease_owner: str | None
    lease_until: float | None
    attempt: int
    next_attempt_at: float | None
    created_at: str
    place_of: str = "order"

    @property
    def place(self) -> Place:
        """Where the endpoint is in the feeds (see above)."""
        return self.position, self.place_of, self.order_id


@dataclass(frozen=True)
class WebhookAttempt:
    """One attempt to deliver a message to an endpoint: the answer's status (None when
    there was none), how long it took, the first 1 KiB of the answer, the error, and when
    (ISO 8601 UTC)."""

    id: int
    endpoint_id: int
    webhook_id: str
    type: str
    attempt: int
    status: int | None
    duration_ms: float
    response: str
    error: str | None
    attempted_at: str


@dataclass(frozen=True)
class Attempted:
    """An attempt to record (the fields of Store.record_webhook_attempt, endpoint_id
    among them) and what follows from it: delivered, the endpoint's place moves to that
    place, and the endpoint remembers the state of the pets of seen as it read them
    (D39); else the failure is counted, with the next attempt's time, or the endpoint
    disabled with a reason. since is the endpoint's place when the attempt began: where it
    has moved since (a replay), the place, retry state and memory are left as they are."""

    record: dict[str, Any]
    delivered: Place | None = None
    next_attempt_at: float | None = None
    disabled_reason: str | None = None
    since: Place | None = None
    seen: tuple[tuple[int, bool, bool], ...] = ()  # pets read: (id, orderable, withdrawn)


# A place in the feeds of orders and pets at once, as a webhook endpoint holds it:
# (position, "order" or "pet", id). Places compare as tuples: at one position the orders
# ("order") come before the pets ("pet").
Place = tuple[int, str, int]


@dataclass(frozen=True)
class Change:
    """The last change of an order (of "order") or a pet (of "pet") as its feed holds it:
    its JSON, its position, its id and the kind of that change (an order's: placed,
    shipped, completed, cancelled, changed; a pet's: created, updated, withdrawn,
    restored, out_of_stock, back_in_stock, changed)."""

    data: str
    position: int
    item_id: int
    kind: str
    of: str = "order"
    # A pet's: whether it takes orders now and whether it is withdrawn (D39); and the same
    # two as the endpoint that reads it last read them (None: it never read this pet).
    state: tuple[bool, bool] | None = None
    seen: tuple[bool, bool] | None = None

    @property
    def place(self) -> Place:
        """The place an endpoint moves to once this change is delivered."""
        return self.position, self.of, self.item_id
