"""What the SQLite and PostgreSQL stores say alike about webhooks (D28), written
once: the schema of migration 9 and the Store's webhook methods (WebhookStatements). Each
store gives the placeholder, how a claim passes over rows another transaction holds, and
three ways to run SQL (a read, one write, several writes in one transaction)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from app.core.errors import WebhookEndpointLimitReached
from app.core.storage.pet_feed_statements import ORDERABLE
from app.core.storage.records import Attempted, Change, Place, WebhookAttempt, WebhookEndpoint

NONE = "CAST(NULL AS INTEGER)"  # an order's columns where a pet's have its state (D39)

# D28 (migration 9 of both stores): webhooks. Each order records the kind of its last
# change (placed, shipped, completed, cancelled; "changed" for any other: an import, a
# hand edit), so that a message's type is the change that put the order where it is: the
# service's own writes name it, and each store's trigger writes "changed" for an UPDATE
# that leaves it as it was. The endpoints, each with its place in the feed, its lease and
# its retry state; and the log of attempts. Times that are compared (leases, retries, a
# rotated secret's grace) are Unix times; the others ISO 8601 text, as everywhere.
WEBHOOK_SCHEMA = (
    "ALTER TABLE orders ADD COLUMN last_change TEXT NOT NULL DEFAULT 'changed'",
    "CREATE TABLE webhook_endpoints ("
    " id {id},"
    " api_key_id BIGINT,"
    " url TEXT NOT NULL,"
    " types TEXT NOT NULL DEFAULT '',"
    " description TEXT NOT NULL DEFAULT '',"
    " enabled INTEGER NOT NULL DEFAULT 1,"
    " disabled_reason TEXT,"
    " secret TEXT NOT NULL,"
    " previous_secret TEXT,"
    " previous_until DOUBLE PRECISION,"
    " position BIGINT NOT NULL,"
    " order_id BIGINT NOT NULL,"
    " lease_owner TEXT,"
    " lease_until DOUBLE PRECISION,"
    " attempt INTEGER NOT NULL DEFAULT 0,"
    " next_attempt_at DOUBLE PRECISION,"
    " created_at TEXT NOT NULL)",
    "CREATE INDEX idx_webhook_endpoints_api_key_id ON webhook_endpoints (api_key_id, id)",
    "CREATE TABLE webhook_attempts ("
    " id {id},"
    " endpoint_id BIGINT NOT NULL,"
    " webhook_id TEXT NOT NULL,"
    " type TEXT NOT NULL,"
    " attempt INTEGER NOT NULL,"
    " status INTEGER,"
    " duration_ms DOUBLE PRECISION NOT NULL,"
    " response TEXT NOT NULL,"
    " error TEXT,"
    " attempted_at TEXT NOT NULL)",
    "CREATE INDEX idx_webhook_attempts_endpoint_id ON webhook_attempts (endpoint_id, id)",
    "CREATE INDEX idx_webhook_attempts_attempted_at ON webhook_attempts (attempted_at)",
)
ENDPOINT_COLUMNS = ("id, api_key_id, url, types, description, enabled, disabled_reason, "
                    "secret, previous_secret, previous_until, position, order_id, "
                    "lease_owner, lease_until, attempt, next_attempt_at, created_at, place_of")
ATTEMPT_COLUMNS = ("id, endpoint_id, webhook_id, type, attempt, status, duration_ms, "
                   "response, error, attempted_at")
# What update_webhook_endpoint may set, and nothing else.
ENDPOINT_EDITABLE = frozenset({"url", "types", "description", "enabled", "disabled_reason",
                               "secret", "previous_secret", "previous_until", "position",
                               "place_of", "order_id", "attempt", "next_attempt_at"})


def endpoint_of(row: tuple[Any, ...]) -> WebhookEndpoint:
    """A row of ENDPOINT_COLUMNS as a WebhookEndpoint."""
    values = list(row)
    values[3] = tuple(t for t in str(values[3]).split(",") if t)
    values[5] = bool(values[5])
    return WebhookEndpoint(*values)


def _stored(changes: dict[str, Any]) -> dict[str, Any]:
    """Endpoint fields as their columns hold them (types comma-separated, enabled 0 or 1)."""
    stored = dict(changes)
    if "types" in stored:
        stored["types"] = ",".join(stored["types"])
    if "enabled" in stored:
        stored["enabled"] = int(bool(stored["enabled"]))
    return stored


class WebhookStatements:
    """The Store's webhook methods (D28), the same SQL in both databases. A store gives
    PARAM, SKIP_LOCKED (what makes a claim pass over rows another transaction holds),
    KEY_LOCK (a statement that makes one key's transactions take turns, if they do not),
    _rows (a read), _write_rows (one write statement in a transaction of its own,
    returning the rows its RETURNING clause gives) and _write_batch (several in one)."""

    PARAM: ClassVar[str]
    SKIP_LOCKED: ClassVar[str]
    KEY_LOCK: ClassVar[str | None]
    ORDER_JSON: ClassVar[str]
    PET_JSON: ClassVar[str]

    def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _write_rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """Run one write statement in a transaction of its own; the rows it returns."""
        raise NotImplementedError

    def _write_batch(self, statements: Sequence[tuple[str, tuple[Any, ...]]]
                     ) -> list[list[tuple[Any, ...]]]:
        """Run write statements in one transaction; the rows each returns."""
        raise NotImplementedError

    def create_webhook_endpoint(self, *, api_key_id: int | None, url: str,
                                types: Sequence[str], description: str, secret: str,
                                place: Place, now: str,
                                at_most: int | None = None) -> WebhookEndpoint:
        """Store a new endpoint, enabled, at that place in the feed, and return it; with
        at_most, only while its key has fewer endpoints than that (else
        WebhookEndpointLimitReached), counted and added in one transaction in which the
        key's creates take turns, so that concurrent creates never pass the limit."""
        p = self.PARAM
        values = (api_key_id, url, ",".join(types), description, secret, *place, now)
        insert = ("INSERT INTO webhook_endpoints (api_key_id, url, types, description, "
                  "secret, position, place_of, order_id, created_at) ")
        if at_most is None or api_key_id is None:
            rows = self._write_rows(
                f"{insert}VALUES ({p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}) "
                f"RETURNING {ENDPOINT_COLUMNS}", values)
            return endpoint_of(rows[0])
        statements: list[tuple[str, tuple[Any, ...]]] = []
        if self.KEY_LOCK is not None:
            statements.append((self.KEY_LOCK, (api_key_id,)))
        statements.append((
            f"{insert}SELECT {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p}, {p} WHERE (SELECT count(*) "
            f"FROM webhook_endpoints WHERE api_key_id = {p}) < {p} "
            f"RETURNING {ENDPOINT_COLUMNS}", (*values, api_key_id, at_most)))
        rows = self._write_batch(statements)[-1]
        if not rows:
            raise WebhookEndpointLimitReached(at_most)
        return endpoint_of(rows[0])

    def list_webhook_endpoints(self, api_key_id: int | None = None) -> list[WebhookEndpoint]:
        """The endpoints a key made (every endpoint, when api_key_id is None), by id."""
        if api_key_id is None:
            rows = self._rows(f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints ORDER BY id")
        else:
            rows = self._rows(f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints "
                              f"WHERE api_key_id = {self.PARAM} ORDER BY id", (api_key_id,))
        return [endpoint_of(row) for row in rows]

    def get_webhook_endpoint(self, endpoint_id: int) -> WebhookEndpoint | None:
        """The endpoint with this id, or None."""
        rows = self._rows(f"SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints "
                          f"WHERE id = {self.PARAM}", (endpoint_id,))
        return endpoint_of(rows[0]) if rows else None

    def update_webhook_endpoint(self, endpoint_id: int,
                                changes: dict[str, Any]) -> WebhookEndpoint | None:
        """Set some of the endpoint's fields (those of ENDPOINT_EDITABLE); the endpoint as
        it is now, or None when there is none."""
        unknown = set(changes) - ENDPOINT_EDITABLE
        if unknown:
            raise ValueError(f"not editable: {', '.join(sorted(unknown))}")
        if not changes:
            return self.get_webhook_endpoint(endpoint_id)
        stored = _stored(changes)
        assignments = ", ".join(f"{name} = {self.PARAM}" for name in stored)
        rows = self._write_rows(
            f"UPDATE webhook_endpoints SET {assignments} WHERE id = {self.PARAM} "
            f"RETURNING {ENDPOINT_COLUMNS}", (*stored.values(), endpoint_id))
        return endpoint_of(rows[0]) if rows else None

    def delete_webhook_endpoint(self, endpoint_id: int) -> bool:
        """Remove the endpoint, its attempts and what it read of the pets; whether there
        was one."""
        p = self.PARAM
        self._write_rows(f"DELETE FROM webhook_attempts WHERE endpoint_id = {p} "
                         "RETURNING id", (endpoint_id,))
        self.forget_webhook_pets(endpoint_id)
        return bool(self._write_rows(f"DELETE FROM webhook_endpoints WHERE id = {p} "
                                     "RETURNING id", (endpoint_id,)))

    def claim_webhook_endpoints(self, owner: str, now: float, until: float,
                                limit: int) -> list[WebhookEndpoint]:
        """Lease up to limit enabled endpoints whose lease is free or ran out (and renew
        those owner holds) to owner until the given Unix time, in one statement: of
        concurrent claims on any number of hosts, each endpoint goes to one."""
        p = self.PARAM
        rows = self._write_rows(
            f"UPDATE webhook_endpoints SET lease_owner = {p}, lease_until = {p} "
            "WHERE id IN (SELECT id FROM webhook_endpoints WHERE enabled = 1 AND "
            f"(lease_owner IS NULL OR lease_until < {p} OR lease_owner = {p}) "
            f"ORDER BY id LIMIT {p}{self.SKIP_LOCKED}) "
            f"AND (lease_owner IS NULL OR lease_until < {p} OR lease_owner = {p}) "
            f"RETURNING {ENDPOINT_COLUMNS}",
            (owner, until, now, owner, limit, now, owner))
        return sorted((endpoint_of(row) for row in rows), key=lambda e: e.id)

    def release_webhook_leases(self, owner: str) -> None:
        """Give up every lease owner holds."""
        self._write_rows("UPDATE webhook_endpoints SET lease_owner = NULL, lease_until = NULL "
                         f"WHERE lease_owner = {self.PARAM} RETURNING id", (owner,))

    def _still_at(self, since: Place | None) -> tuple[str, tuple[Any, ...]]:
        """A condition that the endpoint's place is still since (none without it): a
        replay that moved it while an attempt was in flight is not undone by its record."""
        if since is None:
            return "", ()
        p = self.PARAM
        return f" AND position = {p} AND place_of = {p} AND order_id = {p}", since

    def _delivered(self, endpoint_id: int, owner: str, place: Place,
                   since: Place | None = None) -> tuple[str, tuple[Any, ...]]:
        p = self.PARAM
        still, at = self._still_at(since)
        # "order" sorts before "pet" as text, as Place's tuples do.
        return (f"UPDATE webhook_endpoints SET position = {p}, place_of = {p}, order_id = {p}, "
                f"attempt = 0, next_attempt_at = NULL WHERE id = {p} AND lease_owner = {p} "
                f"AND (position, place_of, order_id) < ({p}, {p}, {p}){still} "
                f"RETURNING {ENDPOINT_COLUMNS}",
                (*place, endpoint_id, owner, *place, *at))

    def _failed(self, endpoint_id: int, owner: str, attempt: int, next_attempt_at: float | None,
                disabled_reason: str | None, since: Place | None = None
                ) -> tuple[str, tuple[Any, ...]]:
        p = self.PARAM
        enabled = "0" if disabled_reason else "enabled"
        # A retry's time is for the change that failed; a disable holds wherever the place.
        still, at = self._still_at(None if disabled_reason else since)
        return (f"UPDATE webhook_endpoints SET attempt = {p}, next_attempt_at = {p}, "
                f"enabled = {enabled}, disabled_reason = coalesce({p}, disabled_reason) "
                f"WHERE id = {p} AND lease_owner = {p}{still} RETURNING {ENDPOINT_COLUMNS}",
                (attempt, next_attempt_at, disabled_reason, endpoint_id, owner, *at))

    def _attempt(self, *, endpoint_id: int, webhook_id: str, type: str, attempt: int,
                 status: int | None, duration_ms: float, response: str, error: str | None,
                 now: str) -> tuple[str, tuple[Any, ...]]:
        p = self.PARAM
        return ("INSERT INTO webhook_attempts (endpoint_id, webhook_id, type, attempt, status, "
                f"duration_ms, response, error, attempted_at) VALUES ({p}, {p}, {p}, {p}, {p}, "
                f"{p}, {p}, {p}, {p}) RETURNING id",
                (endpoint_id, webhook_id, type, attempt, status, duration_ms, response, error,
                 now))

    def webhook_delivered(self, endpoint_id: int, owner: str, place: Place,
                          since: Place | None = None,
                          seen: Sequence[tuple[int, bool, bool]] = ()) -> bool:
        """The change at the place reached the endpoint (or it need not): move its place
        in the feeds there, forward only, clear its retry state and remember the pets of
        seen as read (id, orderable, withdrawn); only while owner holds its lease, and
        with since, only while its place is still there. Whether it did."""
        if not seen:
            return bool(self._write_rows(*self._delivered(endpoint_id, owner, place, since)))
        results = self._write_batch([self._delivered(endpoint_id, owner, place, since),
                                     *self._remember(endpoint_id, owner, place, seen)])
        return bool(results[0])

    def webhook_failed(self, endpoint_id: int, owner: str, attempt: int,
                       next_attempt_at: float | None, disabled_reason: str | None) -> bool:
        """An attempt failed: record how many have, and when the next one is; or, with a
        reason, disable the endpoint (its place in the feed kept). Only while owner holds
        its lease; whether it does."""
        return bool(self._write_rows(*self._failed(endpoint_id, owner, attempt,
                                                   next_attempt_at, disabled_reason)))

    def webhook_attempted(self, owner: str, attempts: Sequence[Attempted]
                          ) -> list[WebhookEndpoint | None]:
        """Record attempts, of any endpoints, and what follows from each, in one
        transaction (one commit for all: a deliverer records together the attempts its
        endpoints made meanwhile). For each, the endpoint as it is after (so that its next
        message needs no read of it), or None where owner no longer held its lease, or its
        place was no longer the attempt's since (a replay moved it meanwhile)."""
        statements = []
        outcomes = []  # the index of each attempt's consequence among the statements
        for done in attempts:
            endpoint_id = done.record["endpoint_id"]
            statements.append(self._attempt(**done.record))
            outcomes.append(len(statements))
            statements.append(
                self._delivered(endpoint_id, owner, done.delivered, done.since)
                if done.delivered else
                self._failed(endpoint_id, owner, done.record["attempt"],
                             done.next_attempt_at, done.disabled_reason, done.since))
            if done.delivered:
                statements += self._remember(endpoint_id, owner, done.delivered, done.seen)
        results = self._write_batch(statements)
        return [endpoint_of(results[index][0]) if results[index] else None
                for index in outcomes]

    def changes_after(self, place: Place, limit: int,
                      feeds: Sequence[str] = ("order", "pet"),
                      endpoint_id: int | None = None) -> list[Change]:
        """Up to limit changes of orders and pets (of the feeds named) after the place, in
        the order of their last change (D26, D39; at one position, orders before pets),
        each with the kind of that change (D28); a pet's with its state, and what the
        endpoint endpoint_id last read of it. One statement, so one snapshot: a change
        committed between two reads could be passed by the place unsent. Up to limit of
        each feed, each a range of its (position, id) index, merged."""
        p = self.PARAM
        position, of, item_id = place
        # The orders after the place: past its order at its position, or past its position
        # when it is among the pets already; the pets: from its position on, or past its
        # pet there.
        past_item = (f"({{t}}.position, {{t}}.id) > ({p}, {p})", (position, item_id))
        orders, pets = ((past_item, (f"{{t}}.position >= {p}", (position,)))
                        if of == "order" else
                        ((f"{{t}}.position > {p}", (position,)), past_item))
        parts: list[str] = []
        params: list[Any] = []
        if "order" in feeds:
            parts.append(
                f"SELECT * FROM (SELECT {self.ORDER_JSON} AS data, position, id, last_change, "
                f"'order' AS feed, {NONE} AS orderable, {NONE} AS gone, {NONE} AS "
                f"seen_orderable, {NONE} AS seen_gone FROM orders "
                f"WHERE {orders[0].format(t='orders')} "
                "ORDER BY position, id "
                f"LIMIT {p}) AS o")
            params += [*orders[1], limit]
        if "pet" in feeds:
            parts.append(
                f"SELECT * FROM (SELECT {self.PET_JSON} AS data, pets.position, pets.id, "
                f"pets.last_change, 'pet' AS feed, CASE WHEN {ORDERABLE} THEN 1 ELSE 0 END "
                "AS orderable, CASE WHEN pets.withdrawn THEN 1 ELSE 0 END AS gone, "
                "seen.was_orderable AS seen_orderable, seen.was_withdrawn AS seen_gone "
                "FROM pets LEFT JOIN webhook_pets_seen seen ON seen.endpoint_id = "
                f"{p} AND seen.pet_id = pets.id WHERE {pets[0].format(t='pets')} "
                f"ORDER BY pets.position, pets.id LIMIT {p}) AS pt")
            params += [-1 if endpoint_id is None else endpoint_id, *pets[1], limit]
        if not parts:
            return []
        found = [Change(str(r[0]), int(r[1]), int(r[2]), str(r[3]), str(r[4]),
                        None if r[5] is None else (bool(r[5]), bool(r[6])),
                        None if r[7] is None else (bool(r[7]), bool(r[8])))
                 for r in self._rows(" UNION ALL ".join(parts), tuple(params))]
        return sorted(found, key=lambda change: change.place)[:limit]

    def _remember(self, endpoint_id: int, owner: str, place: Place,
                  seen: Sequence[tuple[int, bool, bool]]) -> list[tuple[str, tuple[Any, ...]]]:
        """The statements that keep what the endpoint read of these pets (D39), each only
        while owner holds it and its place is the one just written (a write that did not
        move it, a lost lease or a replay, remembers nothing)."""
        p = self.PARAM
        return [(f"INSERT INTO webhook_pets_seen (endpoint_id, pet_id, was_orderable, "
                 "was_withdrawn) "
                 f"SELECT {p}, {p}, {p}, {p} WHERE EXISTS (SELECT 1 FROM webhook_endpoints "
                 f"WHERE id = {p} AND lease_owner = {p} AND position = {p} AND place_of = {p} "
                 f"AND order_id = {p}) ON CONFLICT (endpoint_id, pet_id) DO UPDATE SET "
                 "was_orderable = excluded.was_orderable, was_withdrawn = excluded.was_withdrawn "
                 "RETURNING 1",
                 (endpoint_id, pet_id, int(orderable), int(withdrawn), endpoint_id, owner,
                  *place))
                for pet_id, orderable, withdrawn in seen]

    def forget_webhook_pets(self, endpoint_id: int) -> None:
        """Forget what the endpoint read of every pet: a replay sends them again with the
        kind of their last change."""
        self._write_rows(f"DELETE FROM webhook_pets_seen WHERE endpoint_id = {self.PARAM} "
                         "RETURNING 1", (endpoint_id,))

    def record_webhook_attempt(self, *, endpoint_id: int, webhook_id: str, type: str,
                               attempt: int, status: int | None, duration_ms: float,
                               response: str, error: str | None, now: str) -> None:
        """Add an attempt to the endpoint's log."""
        self._write_rows(*self._attempt(
            endpoint_id=endpoint_id, webhook_id=webhook_id, type=type, attempt=attempt,
            status=status, duration_ms=duration_ms, response=response, error=error, now=now))

    def webhook_attempts(self, endpoint_id: int, before: int | None,
                         limit: int) -> list[WebhookAttempt]:
        """Up to limit attempts of the endpoint, newest first, before the attempt id given
        (keyset: from the newest without one)."""
        p = self.PARAM
        where = f"endpoint_id = {p}" + (f" AND id < {p}" if before is not None else "")
        params = (endpoint_id, before) if before is not None else (endpoint_id,)
        rows = self._rows(f"SELECT {ATTEMPT_COLUMNS} FROM webhook_attempts WHERE {where} "
                          f"ORDER BY id DESC LIMIT {p}", (*params, limit))
        return [WebhookAttempt(*row) for row in rows]

    def purge_webhook_attempts(self, before: str) -> int:
        """Forget the attempts made before this time (ISO 8601 UTC); how many went."""
        return len(self._write_rows(f"DELETE FROM webhook_attempts WHERE attempted_at < "
                                    f"{self.PARAM} RETURNING id", (before,)))
