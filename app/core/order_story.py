"""An order's story (docs/console.md, "An order's page"): what happened to it, step by step,
read from what the store already records, and saying plainly what it does not record.

The steps follow the state machine of app.core.orders (placed, then shipped and completed,
or cancelled), which is also their order in time. Each says when, by whom (an API key by
its name and id, never its secret, or a console user) and from which address, where the
store holds it:

- placed: the placing's idempotency key (D23) holds the key and the time, for KEYS_KEPT;
  an order placed before that, or imported, has neither.
- shipped: the order's shipDate is the date it shipped, as the shipper gave it (today by
  default); the console's audit log holds the user, the address and the moment of a ship
  from the console, for PETSTORE_CONSOLE_AUDIT_DAYS. The API and the CLI record no one.
- completed: the audit log, for a completion from the console; nothing else.
- cancelled: the order's own row holds when, and the key or the console user (D2, D35);
  the audit log the address of a cancel from the console.

The API records no client's address anywhere, so an API step's address is always said to
be unrecorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.core.storage import Store
from app.core.storage.console_statements import AuditEntry
from app.core.storage.story_statements import OrderRecord

API_ADDRESS = "the API does not record a client's address"


@dataclass(frozen=True)
class Actor:
    """Who took a step: an API key (kind "key") or a console user (kind "user"), by id,
    with its name as the store holds it now (None: no longer held, or none given)."""

    kind: str
    id: int | None
    name: str | None


@dataclass(frozen=True)
class Step:
    """One step of an order's story: what (placed, shipped, completed, cancelled); when
    (RFC 3339 text, None when not recorded); the order's ship date, for a shipping; who
    and from which address, where recorded; and a plain sentence for each thing the store
    does not record."""

    what: str
    at: str | None = None
    ship_date: str | None = None
    by: Actor | None = None
    address: str | None = None
    unrecorded: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Story:
    """An order as its page shows it: its fields, its version (the one its actions carry,
    D25), its pet's name, and its steps in time order."""

    order: dict[str, Any]
    version: int
    pet_name: str | None
    steps: list[Step]


def _key(store: Store, key_id: int) -> Actor:
    found = store.get_key(key_id)
    return Actor("key", key_id, found.name if found is not None and found.name else None)


def _user(store: Store, user_id: int | None, name: str | None = None) -> Actor:
    found = store.console_user_by_id(user_id) if user_id is not None else None
    return Actor("user", user_id, found.name if found is not None else name)


def _placed(store: Store, record: OrderRecord) -> Step:
    if record.placed_by_key is None:
        return Step("placed", unrecorded=[
            "When it was placed, and by which API key: the store keeps that for 24 hours "
            "after a placing (with its idempotency key), and not for an imported order.",
            API_ADDRESS])
    return Step("placed", record.placed_at, by=_key(store, record.placed_by_key),
                unrecorded=[API_ADDRESS])


def _console_step(what: str, act: AuditEntry | None, ship_date: str | None = None) -> Step:
    """A shipping or a completion: the console's, from its audit line, or else the API's
    or the CLI's, of which nothing more is recorded."""
    if act is not None:
        # The audit line names its user as the user was named then: no id.
        return Step(what, act.at, ship_date, Actor("user", None, act.user_name),
                    act.address, [] if act.address else ["The address it came from."])
    return Step(what, None, ship_date, unrecorded=[
        ("When, " if what == "completed" else "")
        + "by whom and from which address: the API and the CLI do not record it, and the "
          "console's audit log (which does) keeps it for a set number of days."])


def _cancelled(store: Store, record: OrderRecord, act: AuditEntry | None) -> Step:
    if record.cancelled_by_user is not None:
        by = _user(store, record.cancelled_by_user, act.user_name if act else None)
        address = act.address if act is not None else None
        return Step("cancelled", record.cancelled_at, by=by, address=address,
                    unrecorded=[] if address else [
                        "The address it came from: the console's audit log, which records "
                        "it, keeps it for a set number of days."])
    if record.cancelled_by_key is not None:
        return Step("cancelled", record.cancelled_at, by=_key(store, record.cancelled_by_key),
                    unrecorded=[API_ADDRESS])
    return Step("cancelled", record.cancelled_at, unrecorded=[
        *([] if record.cancelled_at else ["When it was cancelled."]),
        "By whom and from which address: neither an API key nor a console user cancelled "
        "it (the CLI, or an import, which record no one)."])


def tell(store: Store, order_id: int) -> Story | None:
    """The order's story, or None when the store holds no such order."""
    record = store.order_record(order_id)
    if record is None:
        return None
    order = record.order
    acts: dict[str, AuditEntry] = {}
    for act in store.order_acts(order_id):  # oldest first: each act's first line
        acts.setdefault(act.action, act)
    steps = [_placed(store, record)]
    if order["status"] == "shipped":
        steps.append(_console_step("shipped", acts.get("ship"), order.get("shipDate")))
        if order["complete"]:
            steps.append(_console_step("completed", acts.get("complete")))
    elif order["status"] == "cancelled":
        steps.append(_cancelled(store, record, acts.get("cancel")))
    pet = order.get("petId")
    name = store.pet_names([pet]).get(pet) if pet is not None else None
    return Story(order, record.version, name, steps)
