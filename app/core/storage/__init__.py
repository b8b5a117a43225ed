"""The store interface (a Protocol) and open_store(settings).

Every method returns plain dicts or the dataclasses of records.py, never driver rows: the
SQLite store (sqlite.py) and the PostgreSQL store (postgres.py) implement the same Protocol
and pass the same storage suite; the SQL they have in common (reads, the conditional
writes, key updates) is written once, in statements.py. Nothing above this package knows
which store it has, and nothing outside it writes SQL.
Orders come back in the API's field names, with absent values left out, never null.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

from app.core.config import Settings
from app.core.setting_values import store_kind
from app.core.storage.console_statements import ConsoleStore
from app.core.storage.day_statements import DaysStore
from app.core.storage.records import (
    ApiKey,
    Attempted,
    Change,
    Changes,
    OrderQuery,
    PetQuery,
    PetWrite,
    Place,
    Placed,
    Position,
    Transition,
    WebhookAttempt,
    WebhookEndpoint,
)
from app.core.storage.sqlite import SQLiteStore
from app.core.storage.story_statements import StoryStore


class Store(ConsoleStore, DaysStore, StoryStore, Protocol):
    """What the order rules, the API, the CLI and the console need from a database (the
    console's methods are ConsoleStore's, console_statements.py)."""

    local: bool
    """Whether a small read is answered on this machine without a network round trip
    (a SQLite file), so that it may be made on an event loop thread."""

    def migrate(self) -> int:
        """Create or upgrade the schema; return the schema version now in force."""
        ...

    def list_orders(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every order (or those with one status), by id, in the API's field names."""
        ...

    def get_order(self, order_id: int) -> dict[str, Any] | None:
        """The order with this id, in the API's field names, or None."""
        ...

    def page_orders(self, query: OrderQuery, after: Position | None,
                    limit: int) -> list[tuple[str, str | None, int, int]]:
        """Up to limit orders the query selects, in its sort, after the position (keyset,
        never OFFSET), as (the order's JSON, its shipDate, its id, its version) in page
        order."""
        ...

    def revision(self) -> int:
        """A number that every change to the orders or the pets raises, from any process
        or host (answers kept about either are keyed on it)."""
        ...

    def order_changes(self, after: tuple[int, int] | None, limit: int) -> Changes:
        """Up to limit orders changed after the position (position, id), or from the
        beginning, in the order of their last change (D26), with the revision and the
        eras, all read in one snapshot."""
        ...

    def pet_changes(self, after: tuple[int, int] | None, limit: int) -> Changes:
        """Up to limit pets changed after the position (position, id), or from the
        beginning, in the order of their last change (D39), each as getPet answers it,
        with the revision and the eras, all read in one snapshot."""
        ...

    def begin_era(self, era: str) -> int:
        """Take a position and begin the era there, as each start of the service does
        (D26); return the position."""
        ...

    def orders_json(self) -> tuple[int, bytes]:
        """Every order as the JSON array list_orders would give, and the revision it is
        of, read in one transaction."""
        ...

    def orders_json_pages(self, page_size: int) -> tuple[int, Iterator[bytes]]:
        """Every order as orders_json gives them, in pieces of page_size orders, and the
        revision they are of, all read in one transaction held until the pieces run out
        or are closed. The pieces may be taken in any thread, one at a time."""
        ...

    def count_orders(self) -> int:
        """How many orders the store holds, whatever their status."""
        ...

    def count_by_status(self) -> dict[str, int]:
        """How many orders each status holds (every status present, 0 where none)."""
        ...

    def cancel_order(self, order_id: int, key_id: int | None, now: str,
                     version: int | None = None, user_id: int | None = None) -> Transition:
        """Cancel the order if it is pending (and at version, when given), in one
        conditional write, recording when and by which key (or console user, D35). Of many
        concurrent calls, exactly one reports changed."""
        ...

    def ship_order(self, order_id: int, ship_date: str,
                   version: int | None = None) -> Transition:
        """Mark the order shipped on ship_date if it is pending (and at version, when
        given), in one conditional write."""
        ...

    def complete_order(self, order_id: int, version: int | None = None) -> Transition:
        """Mark the order complete if it is shipped and not yet complete (and at version,
        when given), in one conditional write."""
        ...

    def get_versioned_order(self, order_id: int) -> tuple[dict[str, Any], int] | None:
        """The order with this id and its version (D25), read together, or None."""
        ...

    def order_version(self, order_id: int) -> int | None:
        """The order's version (D25), or None when there is no such order."""
        ...

    def place_order(self, new: dict[str, Any], api_key_id: int, idempotency_key: str,
                    fingerprint: str, now: str, catalogue_pets_only: bool = False) -> Placed:
        """Place a pending order (petId, quantity, shipDate) under an idempotency key, both
        in one transaction; or, when the key placed one before, replay that first answer.
        Raises IdempotencyKeyReused when the key came with another request (fingerprint).
        With catalogue_pets_only, a new order (not a replay) for a pet the pets table does
        not hold, while it holds some, raises PetNotInCatalogue and keeps nothing, the key
        included, so that the corrected request may use the same key. Likewise a new order
        for a withdrawn pet (PetWithdrawn), or for more units of a tracked pet than are
        available (OutOfStock, D33); one placed holds its units in its transaction.
        Of concurrent calls with one key, on any number of hosts, exactly one places."""
        ...

    def purge_idempotency_keys(self, before: str) -> int:
        """Forget the idempotency keys made before this time; how many went."""
        ...

    def import_orders(self, orders: Iterable[dict[str, Any]], upsert: bool = False) -> int:
        """Insert (or with upsert, replace) the orders in one transaction; all or nothing.

        Raises DuplicateOrder when an id exists already and upsert is false, and
        StockShortfall when pending orders would hold more units of a tracked pet than
        its stock has (D33).
        """
        ...

    def list_pets(self) -> list[dict[str, Any]]:
        """Every pet, by id: {"id", "name"} (v1's pets, released 1.0.0)."""
        ...

    def get_pet(self, pet_id: int) -> dict[str, Any] | None:
        """The pet with this id as v1 gives it ({"id", "name"}), or None."""
        ...

    def import_pets(self, pets: Iterable[dict[str, Any]], upsert: bool = False) -> int:
        """Insert (or with upsert, update) pets (id, name, category, tags, photoUrls,
        stock) in one transaction; all or nothing.

        Raises DuplicatePet when an id exists already and upsert is false, and
        StockBelowReserved for a stock below what the pet's pending orders hold.
        """
        ...

    # the catalogue and its stock (D32-D34) ----------------------------------------------

    def get_versioned_pet(self, pet_id: int) -> tuple[dict[str, Any], int] | None:
        """The pet as getPet answers it (D32) and its version, read together, or None."""
        ...

    def pet_json(self, pet_id: int) -> tuple[str, int] | None:
        """The pet as getPet answers it, as JSON text, and its version, or None."""
        ...

    def pet_version(self, pet_id: int) -> int | None:
        """The pet's version, or None when there is no such pet."""
        ...

    def page_pets(self, query: PetQuery, after: int | None,
                  limit: int) -> list[tuple[str, int]]:
        """Up to limit pets the query selects, by id, after that id (keyset), as (the
        pet's JSON, its id)."""
        ...

    def add_pet(self, pet: dict[str, Any], api_key_id: int, idempotency_key: str,
                fingerprint: str, now: str) -> PetWrite:
        """Add a pet under an idempotency key, both in one transaction; or replay the
        key's first answer (IdempotencyKeyReused for another request's key)."""
        ...

    def update_pet(self, pet_id: int, changes: dict[str, Any],
                   version: int | None = None) -> PetWrite:
        """Set some of name, category, tags, photo_urls, stock in one conditional write
        (only from version, when given). Raises PetNotFound, PreconditionFailed,
        StockBelowReserved."""
        ...

    def adjust_stock(self, pet_id: int, delta: int, api_key_id: int, idempotency_key: str,
                     fingerprint: str, now: str) -> PetWrite:
        """Add delta units to a tracked pet's stock under an idempotency key, or replay the
        key's first answer. Raises PetNotFound, StockNotTracked, StockBelowReserved, or
        InvalidParameter (delta past the most a stock holds)."""
        ...

    def withdraw_pet(self, pet_id: int) -> bool:
        """Mark the pet withdrawn (again: nothing changes); whether there is such a pet."""
        ...

    def restore_pet(self, pet_id: int) -> bool:
        """Bring a withdrawn pet back into the catalogue, its stock and reservation as they
        are; whether it was withdrawn (one that was not is left as it is). Raises
        PetNotFound."""
        ...

    def inventory(self) -> dict[str, int]:
        """The inventory's figures as the store keeps them (D34), in one statement."""
        ...

    def inventory_counted(self) -> dict[str, int]:
        """The inventory's figures counted anew from every order and pet (a scan)."""
        ...

    def reservations_differing(self) -> list[tuple[int, int, int]]:
        """Every pet whose reservation differs from what its pending orders hold, as (id,
        reserved, held)."""
        ...

    def create_key(
        self,
        *,
        digest: str,
        prefix: str,
        name: str,
        plan: str,
        per_minute: int | None,
        per_day: int | None,
        now: str,
        scope: str = "write",
        expires_at: str | None = None,
    ) -> ApiKey:
        """Store a new key by its SHA-256 digest and return it."""
        ...

    def find_key(self, digest: str) -> ApiKey | None:
        """The key whose full digest this is, now or (after a rotation) before; revoked,
        expired or past its grace alike. None when there is none."""
        ...

    def key_digests(self) -> set[str]:
        """Every digest that may open a key: each unrevoked key's, and the one before its
        last rotation (whose grace check_key judges)."""
        ...

    def get_key(self, key_id: int) -> ApiKey | None:
        """The key with this id, or None."""
        ...

    def list_keys(self) -> list[ApiKey]:
        """Every key, by id."""
        ...

    def revoke_key(self, key_id: int, now: str) -> ApiKey | None:
        """Mark the key revoked (once; a second call keeps the first time) and return it."""
        ...

    def set_plan(
        self, key_id: int, plan: str, per_minute: int | None, per_day: int | None
    ) -> ApiKey | None:
        """Move the key to another plan (enterprise keys carry their own numbers)."""
        ...

    def ban_key(self, key_id: int, until: str) -> ApiKey | None:
        """Ban the key until the given time (ISO 8601 UTC)."""
        ...

    def unban_key(self, key_id: int) -> ApiKey | None:
        """Lift the key's ban, if any."""
        ...

    def set_expiry(self, key_id: int, expires_at: str | None) -> ApiKey | None:
        """Make the key expire at that time (ISO 8601 UTC), or never (None)."""
        ...

    def set_scope(self, key_id: int, scope: str) -> ApiKey | None:
        """Give the key the scope read (GET only) or write (everything)."""
        ...

    def rotate_key(self, key_id: int, digest: str, prefix: str,
                   previous_until: str) -> ApiKey | None:
        """Give the key a new secret (its digest and prefix); the secret it had keeps
        working until previous_until, and one kept from an earlier rotation stops now."""
        ...

    def renew_key_secret(self, key_id: int, digest: str, prefix: str) -> ApiKey | None:
        """Put a new secret (its digest and prefix) in place of the key's current one,
        leaving a rotation's old secret and its grace as they are."""
        ...

    def touch_keys(self, uses: dict[int, str]) -> None:
        """Record when keys were last used (key id -> ISO 8601 UTC), never moving a time
        back: one transaction for all of them."""
        ...

    def import_keys(self, keys: Sequence[ApiKey]) -> int:
        """Store keys exported from another store (digests and metadata, never a secret),
        keeping their ids; all or nothing. Raises DuplicateKey when an id or a digest is
        here already, or twice among them."""
        ...

    # webhooks (D28) -------------------------------------------------------------------

    def create_webhook_endpoint(self, *, api_key_id: int | None, url: str,
                                types: Sequence[str], description: str, secret: str,
                                place: Place, now: str,
                                at_most: int | None = None) -> WebhookEndpoint:
        """Store a new endpoint, enabled, at that place in the feeds, and return it; with
        at_most, only while its key has fewer than that, however many are created at once
        (else WebhookEndpointLimitReached)."""
        ...

    def list_webhook_endpoints(self, api_key_id: int | None = None) -> list[WebhookEndpoint]:
        """The endpoints a key made (every endpoint, when api_key_id is None), by id."""
        ...

    def get_webhook_endpoint(self, endpoint_id: int) -> WebhookEndpoint | None:
        """The endpoint with this id, or None."""
        ...

    def update_webhook_endpoint(self, endpoint_id: int,
                                changes: dict[str, Any]) -> WebhookEndpoint | None:
        """Set some of the endpoint's fields; the endpoint as it is now, or None."""
        ...

    def delete_webhook_endpoint(self, endpoint_id: int) -> bool:
        """Remove the endpoint and its attempts; whether there was one."""
        ...

    def claim_webhook_endpoints(self, owner: str, now: float, until: float,
                                limit: int) -> list[WebhookEndpoint]:
        """Lease up to limit enabled endpoints whose lease is free or ran out (and renew
        those owner holds) to owner until the given Unix time: each goes to one owner."""
        ...

    def release_webhook_leases(self, owner: str) -> None:
        """Give up every lease owner holds."""
        ...

    def webhook_delivered(self, endpoint_id: int, owner: str, place: Place,
                          since: Place | None = None,
                          seen: Sequence[tuple[int, bool, bool]] = ()) -> bool:
        """Move the endpoint's place in the feeds forward to the place (remembering the
        pets of seen as read: id, orderable, withdrawn) and clear
        its retry state, while owner holds its lease (and its place is still since, if
        given); whether it did."""
        ...

    def webhook_failed(self, endpoint_id: int, owner: str, attempt: int,
                       next_attempt_at: float | None, disabled_reason: str | None) -> bool:
        """Record a failed attempt's count and the next one's time, or disable the
        endpoint with a reason, while owner holds its lease; whether it does."""
        ...

    def webhook_attempted(self, owner: str, attempts: Sequence[Attempted]
                          ) -> list[WebhookEndpoint | None]:
        """Record attempts and what follows from each (the place moved, or the failure
        counted) in one transaction, each while owner holds its endpoint's lease; for each,
        the endpoint as it is after, or None where owner no longer held it."""
        ...

    def changes_after(self, place: Place, limit: int,
                      feeds: Sequence[str] = ("order", "pet"),
                      endpoint_id: int | None = None) -> list[Change]:
        """Up to limit changes of orders and pets (of the feeds named: "order", "pet")
        after the place, in the order of their last change (at one position, orders before
        pets), each with the kind of that change, a pet's with its state and what the
        endpoint endpoint_id last read of it; all read in one snapshot."""
        ...

    def forget_webhook_pets(self, endpoint_id: int) -> None:
        """Forget what the endpoint read of every pet (a replay)."""
        ...

    def record_webhook_attempt(self, *, endpoint_id: int, webhook_id: str, type: str,
                               attempt: int, status: int | None, duration_ms: float,
                               response: str, error: str | None, now: str) -> None:
        """Add an attempt to the endpoint's log."""
        ...

    def webhook_attempts(self, endpoint_id: int, before: int | None,
                         limit: int) -> list[WebhookAttempt]:
        """Up to limit attempts of the endpoint, newest first, before an attempt id."""
        ...

    def purge_webhook_attempts(self, before: str) -> int:
        """Forget the attempts made before this time; how many went."""
        ...

    def backup(self, target: str, progress: Callable[[str], None] | None = None) -> None:
        """Copy the live database to target, consistent even while others write; progress,
        if given, gets a line now and then that says how far the copy is."""
        ...

    def check(self) -> dict[str, str]:
        """Facts about the connection for the storage suite and /readyz (durability, lock
        wait); raises StoreUnavailable when the database does not answer."""
        ...

    def close(self) -> None:
        """Close this thread's connection, if the store keeps one per thread."""
        ...

    def dispose(self) -> None:
        """Close every connection the store holds (the end of a process or of a test)."""
        ...


def open_store(settings: Settings, migrate: bool = True) -> Store:
    """Open the store the settings name and (unless told not to) bring its schema up to date."""
    kind, location = store_kind(settings.database)
    store: Store
    if kind == "postgresql":
        # Imported here, not above: psycopg and its pool are loaded only by a process that
        # is configured for PostgreSQL (the CLI and a SQLite service start faster without).
        from app.core.storage.postgres import PostgresStore

        store = PostgresStore.of(location, settings)
    else:
        store = SQLiteStore(location, busy_timeout_ms=settings.busy_timeout_ms)
    if migrate:
        try:
            store.migrate()
        except BaseException:
            store.dispose()
            raise
    return store
