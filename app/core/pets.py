"""The catalogue's rules (D32-D34): a pet, its stock and what orders hold of it, and the
inventory, for the API (v1's reads, v2's catalogue) and the CLI alike.

A pet has a name and, optionally, a category, tags, photo URLs and a stock. Its stock is
either not tracked (absent: orders are never refused for it) or a number of units, of
which pending orders hold `reserved`; `available` is what is left to order. Its status is
derived, never set, so that it cannot disagree with the orders:

    withdrawn                          -> withdrawn (takes no new order; the console
                                          can restore it, and the rows below apply again)
    stock not tracked                  -> available
    available > 0                      -> available
    available = 0, reserved > 0        -> pending   (none left; some held by pending orders)
    available = 0, reserved = 0        -> sold

What orders hold is kept by the database itself, for every path that changes an order or a
pet (docs/house/stock.md): placing holds, cancelling releases, shipping takes the units out
of the stock, and nothing can hold more than the stock has. The rules here check what a
request may ask and say, in the domain's exceptions, why one is refused.

Nothing here knows HTTP.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson

from app.core import names, paging
from app.core.errors import (
    IdempotencyKeyInUse,
    InvalidParameter,
    PetNotFound,
    PetNotWithdrawn,
)
from app.core.orders import INT64_MAX, InvalidOrder, fingerprint, utc_now
from app.core.problems import BODY
from app.core.storage import Store
from app.core.storage.records import PET_STATUSES, STOCK_MAX, PetQuery, PetWrite

__all__ = ["PET_STATUSES", "PetQuery", "PetWrite"]

log = logging.getLogger("petstore.stock")

PET_FIELDS = ("id", "name")  # v1's pet (released 1.0.0)
WRITABLE = ("name", "category", "tags", "photoUrls", "stock")  # addPet's body, a patch's
IMPORT_FIELDS = ("id", *WRITABLE)
NAME_MAX = 200
CATEGORY_MAX = 100
TAG_MAX = 50
TAGS_MAX = 20
PHOTO_URLS_MAX = 20
PHOTO_URL_MAX = 2000
REASON_MAX = 200
# The store column of each writable field.
COLUMNS = {"name": "name", "category": "category", "tags": "tags",
           "photoUrls": "photo_urls", "stock": "stock"}
# A pet write under an idempotency key made by the operator (the CLI): no API key's id is
# 0, so the operator's keys never meet a client's.
OPERATOR = 0


# reading ---------------------------------------------------------------------------------

def get(store: Store, pet_id: int) -> dict[str, Any]:
    """The pet with this id as v1 gives it ({id, name}); raises PetNotFound."""
    pet = store.get_pet(pet_id)
    if pet is None:
        raise PetNotFound(pet_id)
    return pet


def get_versioned(store: Store, pet_id: int) -> tuple[dict[str, Any], int]:
    """The pet with this id as getPet answers it, and its version (its strong ETag),
    read together; raises PetNotFound."""
    found = store.get_versioned_pet(pet_id)
    if found is None:
        raise PetNotFound(pet_id)
    return found


def get_json(store: Store, pet_id: int) -> tuple[bytes, int]:
    """The pet as get_versioned gives it, as JSON bytes built by the database (no dict,
    no encoding), and its version; raises PetNotFound."""
    found = store.pet_json(pet_id)
    if found is None:
        raise PetNotFound(pet_id)
    return found[0].encode(), found[1]


def version(store: Store, pet_id: int) -> int | None:
    """The pet's version, or None when there is no such pet."""
    return store.pet_version(pet_id)


# checking what a request asks -----------------------------------------------------------
# A name, a category and each tag are text a person reads: names.readable's rule (D37).

def _name(value: Any) -> str:
    if value is None:
        raise InvalidParameter("name", "null_name")
    if not isinstance(value, str):
        raise InvalidParameter("name", "type", {"type": "string"})
    if not value.strip():
        raise InvalidParameter("name", "minLength", {"minLength": 1})
    if len(value) > NAME_MAX:
        raise InvalidParameter("name", "maxLength", {"maxLength": NAME_MAX})
    return names.readable(value, "name")


def _category(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidParameter("category", "type", {"type": "string"})
    if not value:
        raise InvalidParameter("category", "minLength", {"minLength": 1})
    if len(value) > CATEGORY_MAX:
        raise InvalidParameter("category", "maxLength", {"maxLength": CATEGORY_MAX})
    return names.readable(value, "category")


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidParameter("tags", "type", {"type": "array"})
    if len(value) > TAGS_MAX:
        raise InvalidParameter("tags", "maxItems", {"maxItems": TAGS_MAX})
    for tag in value:
        if not isinstance(tag, str):
            raise InvalidParameter("tags", "type", {"type": "array"})
        if not tag or len(tag) > TAG_MAX:
            raise InvalidParameter("tags", "tag_length", {"maxLength": TAG_MAX})
        names.readable(tag, "tags")
    if len(set(value)) != len(value):
        raise InvalidParameter("tags", "uniqueItems")
    return list(value)


def _photo_urls(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidParameter("photoUrls", "type", {"type": "array"})
    if len(value) > PHOTO_URLS_MAX:
        raise InvalidParameter("photoUrls", "maxItems", {"maxItems": PHOTO_URLS_MAX})
    for url in value:
        if not isinstance(url, str) or len(url) > PHOTO_URL_MAX:
            raise InvalidParameter("photoUrls", "photo_url", {"maxLength": PHOTO_URL_MAX})
        if any(c.isspace() or ord(c) < 32 for c in url):
            raise InvalidParameter("photoUrls", "photo_url", {"maxLength": PHOTO_URL_MAX})
        try:
            parts = urlsplit(url)
        except ValueError:
            raise InvalidParameter("photoUrls", "photo_url",
                                   {"maxLength": PHOTO_URL_MAX}) from None
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise InvalidParameter("photoUrls", "photo_url", {"maxLength": PHOTO_URL_MAX})
    return list(value)


def _whole(value: Any, name: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidParameter(name, "type", {"type": "integer", "minimum": low,
                                              "maximum": high})
    return value


def _stock(value: Any) -> int | None:
    return None if value is None else _whole(value, "stock", 0, STOCK_MAX)


CHECKS = {"name": _name, "category": _category, "tags": _tags, "photoUrls": _photo_urls,
          "stock": _stock}


def _object(body: Any, known: tuple[str, ...]) -> dict[str, Any]:
    """A request body that is a JSON object of only the members known (D22: any other,
    the read-only ones included, is refused naming it)."""
    if not isinstance(body, dict):
        raise InvalidParameter(BODY, "type", {"type": "object"})
    unknown = [member for member in body if member not in known]
    if unknown:
        raise InvalidParameter(unknown[0], "additionalProperties", {"known": list(known)})
    return body


def new_pet(body: Any) -> dict[str, Any]:
    """An addPet body (name required; category, tags, photoUrls, stock optional), checked,
    as the pet to store: absent and null members left out, lists always there. Raises
    InvalidParameter naming the member at fault."""
    body = _object(body, WRITABLE)
    if "name" not in body:
        raise InvalidParameter("name", "required")
    pet: dict[str, Any] = {}
    for field in WRITABLE:
        value = CHECKS[field](body.get(field))
        if value is not None:
            pet[field] = value
    return pet


def changes(patch: Any) -> dict[str, Any]:
    """A JSON merge patch of a pet (RFC 7396) as the store's columns to set: a member
    given sets its field, null removes it (category; stock: its stock is then not
    tracked; tags and photoUrls become empty; name cannot be removed). Raises
    InvalidParameter naming the member at fault."""
    patch = _object(patch, WRITABLE)
    return {COLUMNS[field]: CHECKS[field](value) for field, value in patch.items()}


# writing --------------------------------------------------------------------------------

class Claims:
    """The idempotency keys this process is writing pets under right now: a second request
    with one of them, while the first is carried out, is IdempotencyKeyInUse at once (as
    orders.Placing does for placing, D23). Across processes and hosts the store's
    transaction decides."""

    def __init__(self) -> None:
        self._keys: set[tuple[int, str]] = set()
        self._lock = threading.Lock()

    def claim(self, api_key_id: int, key: str) -> tuple[int, str]:
        claim = (api_key_id, key)
        with self._lock:
            if claim in self._keys:
                raise IdempotencyKeyInUse()
            self._keys.add(claim)
        return claim

    def release(self, claim: tuple[int, str]) -> None:
        with self._lock:
            self._keys.discard(claim)


CLAIMS = Claims()


def _fingerprint(operation: str, body: dict[str, Any], pet_id: int | None = None) -> str:
    """What identifies a pet write under a key: the operation, the pet it is about and its
    parsed body. An order's fingerprint is of its body alone (orders.fingerprint), which
    has none of these members: a key used for one operation is reused by any other."""
    return fingerprint({"operation": operation, "petId": pet_id, "body": body})


def add(store: Store, body: dict[str, Any], api_key_id: int, key: str) -> PetWrite:
    """Add the pet an addPet body describes under an Idempotency-Key (D23, D32), or replay
    the key's first answer (replayed=True). The same key with another body, or used before
    for another request (placing an order, say), is IdempotencyKeyReused; a key in use by
    a request being carried out, IdempotencyKeyInUse. A body the rules refuse keeps no
    key."""
    pet = new_pet(body)
    claim = CLAIMS.claim(api_key_id, key)
    try:
        return store.add_pet(pet, api_key_id, key, _fingerprint("addPet", body), utc_now())
    finally:
        CLAIMS.release(claim)


def update(store: Store, pet_id: int, patch: dict[str, Any],
           version: int | None = None) -> PetWrite:
    """Apply a JSON merge patch (RFC 7396) of name, category, tags, photoUrls and stock,
    only from that version when one is named (If-Match, D25). Raises InvalidParameter,
    PetNotFound, PreconditionFailed, or StockBelowReserved (a stock below what pending
    orders hold)."""
    return store.update_pet(pet_id, changes(patch), version)


def adjust(store: Store, pet_id: int, delta: Any, reason: Any, api_key_id: int,
           key: str) -> PetWrite:
    """Add delta units to the pet's stock (a receipt of goods; a negative delta, a
    write-off), with no read first, under an Idempotency-Key: a retry answers the first
    result and changes nothing. Raises InvalidParameter (delta 0 or not a whole number,
    reason too long), PetNotFound, StockNotTracked, StockBelowReserved (below what pending
    orders hold, or below 0), and the key's errors as add does."""
    if delta == 0 and isinstance(delta, int) and not isinstance(delta, bool):
        raise InvalidParameter("delta", "nonzero")
    _whole(delta, "delta", -STOCK_MAX, STOCK_MAX)
    if reason is not None and (not isinstance(reason, str) or len(reason) > REASON_MAX):
        raise InvalidParameter("reason", "maxLength", {"maxLength": REASON_MAX})
    body = {"delta": delta, "reason": reason}
    claim = CLAIMS.claim(api_key_id, key)
    try:
        written = store.adjust_stock(pet_id, delta, api_key_id, key,
                                     _fingerprint("adjustStock", body, pet_id), utc_now())
    finally:
        CLAIMS.release(claim)
    if not written.replayed:
        log.info("stock of pet %d adjusted by %+d (key %d): %s", pet_id, delta, api_key_id,
                 reason or "no reason given")
    return written


def withdraw(store: Store, pet_id: int) -> None:
    """Withdraw the pet from the catalogue (D32): it stays (orders name it), takes no new
    order, and its pending orders can still be shipped or cancelled. Again: nothing
    changes. Raises PetNotFound."""
    if not store.withdraw_pet(pet_id):
        raise PetNotFound(pet_id)


def restore(store: Store, pet_id: int) -> None:
    """Bring a withdrawn pet back into the catalogue: it takes new orders again, and its
    stock and the units its pending orders hold are as they are now (kept, and moved by
    its orders and adjustments, while it was withdrawn), so that its available units and
    status follow from them again, and the inventory counts it as available (D32, D34).
    The console's rule alone: the API has no restore, and its released documents are as
    they were. Raises PetNotFound, and PetNotWithdrawn for a pet in the catalogue."""
    if not store.restore_pet(pet_id):
        raise PetNotWithdrawn(pet_id)


# the list ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Page:
    """One page of pets: each as its JSON text, and the next page's cursor (None on the
    last)."""

    pets: list[str]
    next: str | None


NUL = "\x00"


def pet_query(status: Iterable[str] | None = None, tag: Iterable[str] | None = None,
              category: str | None = None) -> PetQuery:
    """The filters of a list, checked and in one canonical form: status (any of; none,
    every pet but the withdrawn ones), tag (any of), category."""
    statuses = tuple(sorted(set(status or ())))
    if any(s not in PET_STATUSES for s in statuses):
        raise InvalidParameter("status", "enum", {"enum": PET_STATUSES, "item": True})
    tags = tuple(sorted(set(tag or ())))
    if any(not isinstance(t, str) or not t or len(t) > TAG_MAX for t in tags):
        raise InvalidParameter("tag", "tag_length", {"maxLength": TAG_MAX})
    if category is not None and (not category or len(category) > CATEGORY_MAX):
        raise InvalidParameter("category", "maxLength", {"maxLength": CATEGORY_MAX})
    # A NUL is in no name (D37 refuses it, and PostgreSQL's text cannot hold one: the
    # query would fail there, a 500); other characters D37 refuses may be in a name kept
    # from before it, which a filter still finds.
    if any(NUL in t for t in tags):
        raise InvalidParameter("tag", names.RULE)
    if category is not None and NUL in category:
        raise InvalidParameter("category", names.RULE)
    return PetQuery(statuses, tags, category)


def _made_for(query: PetQuery) -> str:
    """The fingerprint a pets cursor is bound to: its filters, and that it is of pets (an
    orders cursor is never one)."""
    return paging.fingerprint_of(["pets", query.statuses, query.tags, query.category])


def page(store: Store, query: PetQuery, limit: int = paging.LIMIT_DEFAULT,
         cursor: str | None = None) -> Page:
    """One page of the pets the query selects, by id, after the cursor's (cursor pages as
    the orders', D18: an edited cursor, or one of other filters, is InvalidParameter
    naming cursor)."""
    paging.check_limit(limit)
    after = None
    if cursor:
        (after,) = paging.unbind_cursor(cursor, _made_for(query), 1, "cursor_other_pet_query")
        if not isinstance(after, int) or isinstance(after, bool):
            raise InvalidParameter("cursor", "cursor_edited")
    rows = store.page_pets(query, after, limit + 1)
    if len(rows) <= limit:
        return Page([row[0] for row in rows], None)
    return Page([row[0] for row in rows[:limit]],
                paging.bound_cursor(_made_for(query), rows[limit - 1][1]))


def walk(store: Store, query: PetQuery) -> Iterator[str]:
    """Every pet the query selects, by id, each as its JSON text, a page at a time."""
    cursor = None
    while True:
        current = page(store, query, paging.LIMIT_MAX, cursor)
        yield from current.pets
        if current.next is None:
            return
        cursor = current.next


# the inventory and its check ------------------------------------------------------------

def inventory(store: Store) -> dict[str, dict[str, int]]:
    """The inventory (D34), one moment's figures, read from what the store keeps: units of
    orders by status, and the stock of the pets whose stock is tracked (onHand, reserved,
    and available, which leaves withdrawn pets out)."""
    return _shaped(store.inventory())


def _shaped(figures: dict[str, int]) -> dict[str, dict[str, int]]:
    return {"orders": {"pending": figures["pending_units"],
                       "shipped": figures["shipped_units"],
                       "cancelled": figures["cancelled_units"]},
            "stock": {"onHand": figures["stock_on_hand"],
                      "reserved": figures["stock_reserved"],
                      "available": figures["stock_available"]}}


@dataclass(frozen=True)
class Checked:
    """What `petstore pets check` found: each pet whose reservation differs from what its
    pending orders hold, as (id, reserved, held); and each inventory figure the store
    keeps that differs from the one counted anew, as (section, name, kept, counted)."""

    reservations: list[tuple[int, int, int]]
    figures: list[tuple[str, str, int, int]]

    @property
    def true(self) -> bool:
        return not self.reservations and not self.figures


def check(store: Store) -> Checked:
    """Count every reservation and the inventory anew from the orders and the pets, and
    say where what the store keeps differs (D33). A scan: for the operator, never a
    request."""
    kept, counted = _shaped(store.inventory()), _shaped(store.inventory_counted())
    figures = [(section, name, kept[section][name], counted[section][name])
               for section in kept for name in kept[section]
               if kept[section][name] != counted[section][name]]
    return Checked(store.reservations_differing(), figures)


# imports --------------------------------------------------------------------------------

def pet_from_row(row: Any) -> dict[str, Any]:
    """Validate one row to import: an optional id, a name, and the optional category, tags,
    photoUrls and stock (a CSV cell of tags or photoUrls is a JSON array, or values
    separated by |). Raises InvalidOrder with a message naming the field."""
    if not isinstance(row, dict):
        raise InvalidOrder(f"each pet must be an object, got {type(row).__name__}")
    unknown = sorted(set(row) - set(IMPORT_FIELDS))
    if unknown:
        raise InvalidOrder(f"unknown field(s) {', '.join(unknown)}; the fields are "
                           f"{', '.join(IMPORT_FIELDS)}")
    pet: dict[str, Any] = {}
    if row.get("id") not in (None, ""):
        pet_id = row["id"]
        if isinstance(pet_id, str) and pet_id.strip().isascii() and pet_id.strip().isdigit():
            pet_id = int(pet_id.strip())
        valid = isinstance(pet_id, int) and not isinstance(pet_id, bool)
        if not valid or not 1 <= pet_id <= INT64_MAX:
            raise InvalidOrder(
                f"id must be a whole number from 1 to {INT64_MAX}, got {row['id']!r}")
        pet["id"] = pet_id
    values = {field: row.get(field) for field in WRITABLE}
    if isinstance(values["name"], str):
        values["name"] = values["name"].strip()
    if values["category"] == "":
        values["category"] = None
    for field in ("tags", "photoUrls"):
        values[field] = _listed(values[field])
    if isinstance(values["stock"], str):
        text = values["stock"].strip()
        values["stock"] = int(text) if text.isascii() and text.isdigit() else (
            text or None)
    try:
        checked = new_pet(values)
    except InvalidParameter as exc:
        raise InvalidOrder(exc.sentence) from None
    return {**pet, **checked}


def _listed(value: Any) -> Any:
    """A list from an import's cell: as it is, or a JSON array, or values separated by |."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text:
        return None
    if text.startswith("["):
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    return [part.strip() for part in text.split("|")]
