"""The order rules, as plain functions over a store: one state machine for the API (v1, v2)
and the CLI alike (D2, D3, D22-D25).

(none)  --place----> pending (under an idempotency key: a repeat replays the first answer)
pending --cancel---> cancelled (again: unchanged, a retry is safe, D3)
shipped --cancel---> refused, unchanged (order_already_shipped)
pending --ship-----> shipped (again: unchanged); cancelled --ship--> refused (order_cancelled)
shipped --complete-> shipped and complete (again: unchanged); pending --complete--> refused
                     (order_not_shipped); cancelled --complete--> refused (order_cancelled)

Each move of an existing order may name the version it expects (If-Match, D25): when the
order is at another version, nothing changes and PreconditionFailed says which is current.
An unknown order is OrderNotFound whatever version is named.

Nothing here knows HTTP: it raises the domain's exceptions from app.core.errors.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from app.core.errors import (
    IdempotencyKeyInUse,
    InvalidParameter,
    OrderAlreadyShipped,
    OrderCancelled,
    OrderNotFound,
    OrderNotShipped,
    PetstoreError,
    PreconditionFailed,
)
from app.core.storage import Store
from app.core.storage.records import ORDER_STATUSES, Placed, Transition

log = logging.getLogger("petstore.orders")

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
ORDER_FIELDS = ("id", "petId", "quantity", "shipDate", "complete", "status")


def utc_now() -> str:
    """The current time as an ISO 8601 UTC timestamp, the form every stored time takes."""
    return format_time(dt.datetime.now(dt.UTC))


def format_time(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def format_unix_time(seconds: float) -> str:
    """A Unix time as format_time writes a moment, made without a datetime (a deliverer
    writes two for each of a thousand messages a second)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def get_versioned(store: Store, order_id: int) -> tuple[dict[str, Any], int]:
    """The order with this id and its version, read together; raises OrderNotFound."""
    found = store.get_versioned_order(order_id)
    if found is None:
        raise OrderNotFound(order_id)
    return found


def _found(result: Transition, order_id: int, version: int | None) -> Transition:
    """The outcome of a move, once the order is known to exist and, when a version was
    named, to have been at it."""
    if result.status is None:
        raise OrderNotFound(order_id)
    if not result.changed and version is not None and result.version != version:
        raise PreconditionFailed(order_id, int(result.version or 0))
    return result


def cancel(store: Store, order_id: int, key_id: int | None,
           version: int | None = None, user_id: int | None = None) -> Transition:
    """Cancel a pending order; an already-cancelled one is left as it is. The order
    records who cancelled it: the API's key, or the console's user (D2, D35).

    Raises OrderNotFound for an unknown id, OrderAlreadyShipped for a shipped order, and
    PreconditionFailed when a version is named and the order is at another.
    """
    result = _found(store.cancel_order(order_id, key_id, utc_now(), version, user_id),
                    order_id, version)
    if result.status == "shipped":
        raise OrderAlreadyShipped(order_id)
    return result


def ship(store: Store, order_id: int, ship_date: str | None = None,
         version: int | None = None) -> Transition:
    """Mark a pending order shipped on ship_date (now by default); one already shipped is
    left as it is. Raises OrderNotFound, OrderCancelled, or PreconditionFailed."""
    result = _found(store.ship_order(order_id, ship_date or utc_now(), version), order_id,
                    version)
    if result.status == "cancelled":
        raise OrderCancelled(order_id, "shipped")
    return result


def complete(store: Store, order_id: int, version: int | None = None) -> Transition:
    """Mark a shipped order complete; one already complete is left as it is. Raises
    OrderNotFound, OrderNotShipped (pending), OrderCancelled, or PreconditionFailed."""
    result = _found(store.complete_order(order_id, version), order_id, version)
    if result.status == "cancelled":
        raise OrderCancelled(order_id, "completed")
    if result.status == "pending":
        raise OrderNotShipped(order_id)
    return result


# D23: idempotency keys live at least 24 hours; each process that places orders forgets
# older ones once an hour.
KEYS_KEPT = dt.timedelta(hours=24)
PURGE_EVERY = 3600.0


IDEMPOTENCY_KEY = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX = 255
IDEMPOTENCY_KEY_PURPOSE = (
    "send a key of your own making with each new order, such as a UUID (1 to 255 printable "
    "ASCII characters), so that a retry with the same key places the order only once")


def idempotency_key(header: str | None) -> str:
    """The key of an Idempotency-Key header (draft-ietf-httpapi-idempotency-key-header): 1 to
    255 printable ASCII characters, bare or quoted as an RFC 8941 string. Raises
    InvalidParameter saying which rule the header broke: missing (None), empty, not
    printable ASCII, too long."""
    if header is None:
        raise InvalidParameter(IDEMPOTENCY_KEY, "required", {"purpose": IDEMPOTENCY_KEY_PURPOSE})
    quoted = len(header) > 2 and header[0] == header[-1] == '"'
    key = header[1:-1] if quoted else header
    if not key:
        raise InvalidParameter(IDEMPOTENCY_KEY, "minLength",
                               {"minLength": 1, "maxLength": IDEMPOTENCY_KEY_MAX,
                                "what": "printable ASCII characters"})
    if not key.isascii() or not key.isprintable():
        raise InvalidParameter(IDEMPOTENCY_KEY, "printable_ascii",
                               {"minLength": 1, "maxLength": IDEMPOTENCY_KEY_MAX})
    if len(key) > IDEMPOTENCY_KEY_MAX:
        raise InvalidParameter(IDEMPOTENCY_KEY, "too_long",
                               {"maxLength": IDEMPOTENCY_KEY_MAX,
                                "what": "printable ASCII characters"})
    return key


def fingerprint(body: dict[str, Any]) -> str:
    """What identifies a placing request: its parsed body, whatever its members' order or
    spacing (D23)."""
    return hashlib.sha256(orjson.dumps(body, option=orjson.OPT_SORT_KEYS)).hexdigest()


class Placing:
    """The idempotency keys this process is placing orders under right now: a second
    request with one of them, while the first is carried out, is IdempotencyKeyInUse at
    once (D23). Across processes and hosts the store's transaction decides."""

    def __init__(self) -> None:
        self._keys: set[tuple[int, str]] = set()
        self._lock = threading.Lock()
        # The pid whose thread forgets old keys (forget_old_keys): none yet. (Not a number
        # that stands for none: a server in a container may well be process 1.)
        self._janitor: int | None = None

    def place(self, store: Store, body: dict[str, Any], api_key_id: int,
              key: str) -> Placed:
        """Place the order the body describes (petId, quantity, shipDate, already checked
        against the document), or replay the key's first answer.

        A shop that keeps a pets catalogue (one pet or more) takes orders only for its pets,
        so that no order is placed that nobody can fill: a petId it does not hold is
        PetNotInCatalogue, and the key is kept for nothing. With no catalogue, any petId is
        taken; imports (the operator's, with history) are not held to it. A replay answers
        as first answered, whatever the catalogue holds now."""
        claim = (api_key_id, key)
        with self._lock:
            if claim in self._keys:
                raise IdempotencyKeyInUse()
            self._keys.add(claim)
        try:
            new = {"petId": body["petId"], "quantity": body["quantity"]}
            if body.get("shipDate") is not None:
                new["shipDate"] = body_time(body["shipDate"])
            placed = store.place_order(new, api_key_id, key, fingerprint(body), utc_now(),
                                       catalogue_pets_only=True)
        finally:
            with self._lock:
                self._keys.discard(claim)
        if self._janitor != os.getpid():  # one per process; a forked worker has none
            self._janitor = os.getpid()
            threading.Thread(target=forget_old_keys, args=(store,), daemon=True,
                             name="petstore-idempotency-keys").start()
        return placed


def body_time(text: Any) -> str:
    """A request body's shipDate (placing an order or shipping one), as stored; raises
    InvalidParameter. The document's format has taken it already; what is left to refuse is
    a date-time that UTC cannot hold."""
    try:
        return parse_time(text)
    except InvalidOrder:
        raise InvalidParameter("shipDate", "date_time_range") from None


def forget_old_keys(store: Store, every: float = PURGE_EVERY,
                    stop: threading.Event | None = None) -> None:
    """Forget the idempotency keys older than KEYS_KEPT, now and every PURGE_EVERY seconds,
    until stop is set (for ever without one, as Placing runs it): run from a thread of its
    own, off every request's path."""
    def purge() -> int:  # in seconds since the epoch, which no machine's time zone enters
        return store.purge_idempotency_keys(
            format_unix_time(time.time() - KEYS_KEPT.total_seconds()))

    purge_periodically(store, purge, "idempotency keys", every, stop)


def purge_periodically(store: Store, purge: Callable[[], int], what: str, every: float,
                       stop: threading.Event | None = None) -> None:
    """Call purge (which forgets what is old and says how many went) now and every
    `every` seconds, until stop is set (for ever without one): the body of a janitor's
    thread. A failure is logged, never raised, so the thread lives on to the next round;
    the thread's connection is closed after each round."""
    while stop is None or not stop.is_set():
        try:
            gone = purge()
            if gone:
                log.info("forgot %d old %s", gone, what)
        except PetstoreError as exc:
            log.warning("could not forget old %s: %s", what, exc.message)
        except Exception:  # never let the thread die: the next round tries again
            log.exception("could not forget old %s", what)
        finally:
            store.close()  # this thread's connection, if the store keeps one
        if stop is None:
            time.sleep(every)
        else:
            stop.wait(every)


class InvalidOrder(ValueError):
    """A row to import is not a valid order; the message says which field and why."""


def parse_time(text: Any, field: str = "shipDate") -> str:
    """An ISO 8601 date-time with a time-zone offset, normalised to UTC."""
    if not isinstance(text, str):
        raise InvalidOrder(f"{field} must be a date-time string, got {text!r}")
    try:
        moment = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidOrder(
            f"{field} must be an ISO 8601 date-time such as 2026-05-01T10:00:00Z, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        raise InvalidOrder(f"{field} needs a time-zone offset (Z or +01:00), got {text!r}")
    try:
        return format_time(moment)
    except OverflowError:  # 0001-01-01T00:00:00+01:00 is before the year 1 in UTC
        raise InvalidOrder(f"{field} must fall between the years 1 and 9999 in UTC, "
                           f"got {text!r}") from None


def _integer(row: dict[str, Any], field: str, low: int, high: int) -> int | None:
    value = row.get(field)
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidOrder(f"{field} must be a whole number, got {value!r}")
    if isinstance(value, str):
        text = value.strip()
        if not text.isascii() or not text.lstrip("-").isdigit():
            raise InvalidOrder(f"{field} must be a whole number, got {value!r}")
        value = int(text)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise InvalidOrder(f"{field} must be a whole number, got {value!r}")
    if not low <= value <= high:
        raise InvalidOrder(f"{field} must be between {low} and {high}, got {value}")
    return value


def _boolean(value: Any) -> bool:
    if value is None or value == "":
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in {"true", "false", "1", "0"}:
        return value.strip().lower() in {"true", "1"}
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidOrder(f"complete must be true or false, got {value!r}")


def order_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """Validate one row to import (API field names) and return it as an order to store.

    id is optional (the store assigns one); status defaults to pending; shipDate needs a
    time-zone offset. Unknown fields are refused, so that a misspelt column is not lost.
    """
    if not isinstance(row, dict):
        raise InvalidOrder(f"each order must be an object, got {type(row).__name__}")
    unknown = sorted(set(row) - set(ORDER_FIELDS))
    if unknown:
        raise InvalidOrder(
            f"unknown field(s) {', '.join(unknown)}; the fields are {', '.join(ORDER_FIELDS)}"
        )
    order: dict[str, Any] = {}
    order_id = _integer(row, "id", 1, INT64_MAX)
    if order_id is not None:
        order["id"] = order_id
    pet_id = _integer(row, "petId", INT64_MIN, INT64_MAX)
    if pet_id is not None:
        order["petId"] = pet_id
    quantity = _integer(row, "quantity", 1, INT32_MAX)
    if quantity is not None:
        order["quantity"] = quantity
    if row.get("shipDate") not in (None, ""):
        order["shipDate"] = parse_time(row["shipDate"])
    order["complete"] = _boolean(row.get("complete"))
    status = row.get("status") or "pending"
    if status not in ORDER_STATUSES:
        raise InvalidOrder(f"status must be one of {', '.join(ORDER_STATUSES)}, got {status!r}")
    order["status"] = status
    return order
