"""The exceptions of the domain. Code below the handlers raises these and knows nothing of
HTTP; app.web.errors is the one place that turns them (and every other error) into the
Error body with its status (after sqlite-utils' NotFoundError, translated only by its CLI).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.core import problems


class PetstoreError(Exception):
    """Base of the domain's exceptions; its message is safe to show a client. param names
    the one field of the request at fault, as the client sent it, when there is one."""

    param: str | None = None

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class OrderNotFound(PetstoreError):
    def __init__(self, order_id: int) -> None:
        super().__init__(f"No order has the id {order_id}.")
        self.order_id = order_id


class OrderAlreadyShipped(PetstoreError):
    def __init__(self, order_id: int) -> None:
        super().__init__(
            f"Order {order_id} has already shipped and can no longer be cancelled."
        )
        self.order_id = order_id


class OrderCancelled(PetstoreError):
    def __init__(self, order_id: int, action: str) -> None:
        super().__init__(f"Order {order_id} is cancelled and cannot be {action}.")
        self.order_id = order_id


class OrderNotShipped(PetstoreError):
    def __init__(self, order_id: int) -> None:
        super().__init__(f"Order {order_id} has not shipped yet, so it cannot be completed.")
        self.order_id = order_id


class PreconditionFailed(PetstoreError):
    """If-Match named another version of the order (or, with thing="Pet", of the pet) than
    its current one (D25, D32). order_id is the id of whichever it is."""

    def __init__(self, order_id: int, version: int, thing: str = "Order") -> None:
        super().__init__(f"{thing} {order_id} has changed since that version was read: its "
                         "current ETag is in the ETag header. Read it again, then retry.")
        self.order_id = order_id
        self.version = version


class IdempotencyKeyReused(PetstoreError):
    """An Idempotency-Key that came before with another request: another body, or another
    operation (a key that placed an order cannot add a pet, D23, D32)."""

    param = "Idempotency-Key"

    def __init__(self, what: str = "order") -> None:
        body = "request body" if what == "order" else "request"
        super().__init__(f"This Idempotency-Key was used before with another {body}; use a "
                         f"new key for a new {what}.")


class IdempotencyKeyInUse(PetstoreError):
    def __init__(self) -> None:
        super().__init__("A request with this Idempotency-Key is still being carried out; "
                         "retry after it.")


class DuplicateOrder(PetstoreError):
    def __init__(self, order_id: int) -> None:
        super().__init__(f"An order with the id {order_id} exists already.")
        self.order_id = order_id


class PetNotFound(PetstoreError):
    def __init__(self, pet_id: int) -> None:
        super().__init__(f"No pet has the id {pet_id}.")
        self.pet_id = pet_id


class DuplicatePet(PetstoreError):
    def __init__(self, pet_id: int) -> None:
        super().__init__(f"A pet with the id {pet_id} exists already.")
        self.pet_id = pet_id


class OutOfStock(PetstoreError):
    """A placing asks for more units of a tracked pet than are available (D33): nothing is
    stored and the idempotency key is not kept."""

    param = "quantity"

    def __init__(self, pet_id: int, requested: int, available: int) -> None:
        if available > 0:
            super().__init__(f"Only {available} {_units(available)} of pet {pet_id} "
                             f"{_are(available)} available, fewer than the {requested} "
                             f"asked for; order at most {available}.")
        else:
            super().__init__(f"No units of pet {pet_id} are available now; the order asked "
                             f"for {requested} {_units(requested)}.")
        self.pet_id = pet_id
        self.requested = requested
        self.available = available


class PetWithdrawn(PetstoreError):
    """A placing names a pet withdrawn from the catalogue, which takes no new order (D32)."""

    param = "petId"

    def __init__(self, pet_id: int) -> None:
        super().__init__(f"Pet {pet_id} has been withdrawn from the catalogue and takes no "
                         "new order.")
        self.pet_id = pet_id


class PetNotWithdrawn(PetstoreError):
    """A restore names a pet that is in the catalogue: there is nothing to bring back. The
    console's alone; the API has no restore (docs/console.md, "Pets and their stock")."""

    def __init__(self, pet_id: int) -> None:
        super().__init__(f"Pet {pet_id} is in the catalogue, not withdrawn: there is "
                         "nothing to restore.")
        self.pet_id = pet_id


class StockNotTracked(PetstoreError):
    """An adjustment of the stock of a pet whose stock is not tracked (D32): set one with
    an update first."""

    def __init__(self, pet_id: int) -> None:
        super().__init__(f"The stock of pet {pet_id} is not tracked, so it cannot be "
                         "adjusted; set its stock first.")
        self.pet_id = pet_id


class StockBelowReserved(PetstoreError):
    """A stock set, or adjusted, below the units pending orders hold (or below 0, D32).
    param is the field at fault: stock for an update, delta for an adjustment."""

    def __init__(self, pet_id: int, stock: int, reserved: int, param: str = "stock") -> None:
        if stock < 0:
            text = f"The stock of pet {pet_id} cannot go below 0 (it would be {stock})."
        else:
            text = (f"Pending orders hold {reserved} {_units(reserved)} of pet {pet_id}, so "
                    f"its stock cannot be {stock}; it must be at least {reserved}.")
        super().__init__(text)
        self.pet_id = pet_id
        self.stock = stock
        self.reserved = reserved
        self.param = param


class StockShortfall(PetstoreError):
    """An import whose pending orders would hold more units of a tracked pet than its stock
    has (D33): nothing is imported. shortfall is how many units are missing; 0 when the
    import as a whole fits but a row holds the units before a later row releases them."""

    def __init__(self, pet_id: int, shortfall: int) -> None:
        if shortfall > 0:
            text = (f"The pending orders would hold {shortfall} {_units(shortfall)} of pet "
                    f"{pet_id} more than its stock has; nothing was imported.")
        else:
            text = (f"A row holds units of pet {pet_id} before a later row releases them, "
                    "and the stock does not cover both at once; put the rows that release "
                    "units first. Nothing was imported.")
        super().__init__(text)
        self.pet_id = pet_id
        self.shortfall = shortfall


def _units(count: int) -> str:
    return "unit" if count == 1 else "units"


def _are(count: int) -> str:
    return "is" if count == 1 else "are"


class DuplicateKey(PetstoreError):
    """An imported key whose id or digest the store holds already (the message says which)."""


class StoreUnavailable(PetstoreError):
    """The database cannot answer now (locked past the busy timeout, read-only, full...)."""


class NotReady(PetstoreError):
    """The instance cannot serve now; the message names the check that failed."""

    def __init__(self, failed: str) -> None:
        super().__init__(f"Not ready: {failed}.")


class InvalidParameter(PetstoreError):
    """A value the rules refuse (a cursor that was edited, a date-time without an offset, a
    malformed Idempotency-Key). name is the field's name as the client sent it
    (shipDateFrom, cursor, Idempotency-Key), rule names the rule of app.core.problems it
    broke, and the message is that rule's predicate ("must be ..."); the sentence puts the
    two together. Each edge says it its way (a CLI names its option in front of the
    predicate)."""

    def __init__(self, name: str, rule: str, facts: Mapping[str, Any] | None = None) -> None:
        super().__init__(problems.predicate(rule, facts))
        self.name = self.param = name
        self.rule = rule

    @property
    def sentence(self) -> str:
        """The whole sentence, the field's name first."""
        return f"{self.name} {self.message}"


class PetNotInCatalogue(PetstoreError):
    """placeOrder named a pet the shop's catalogue does not hold, while it holds some:
    a shop that keeps a catalogue sells only its pets. param is the field at fault."""

    param = "petId"

    def __init__(self, pet_id: int) -> None:
        super().__init__(problems.sentence("petId", "unknown_pet", {"petId": pet_id}))
        self.pet_id = pet_id


class ResyncRequired(PetstoreError):
    """A feed cursor this database could not have given as it is now (D26): it comes from
    another database, or from after the point a backup restored this one to."""

    def __init__(self) -> None:
        super().__init__("This cursor was not given by this database as it is now (it comes "
                         "from another database, or from before a restore of a backup): "
                         "start again without `after` and rebuild your copy of the orders.")


class WebhookEndpointNotFound(PetstoreError):
    """No webhook endpoint of this key has the id (another key's is not seen, D28)."""

    def __init__(self, endpoint_id: int) -> None:
        super().__init__(f"No webhook endpoint has the id {endpoint_id}.")
        self.endpoint_id = endpoint_id


class WebhookUrlNotAllowed(PetstoreError):
    """A webhook URL whose host is, or resolves to, an address the service may not call
    (D28's SSRF rules): 422 webhook_url_not_allowed, naming the url in param."""

    param = "url"


class WebhookEndpointLimitReached(PetstoreError):
    """A key that has the most webhook endpoints a key may have (D28)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"This API key has {limit} webhook endpoints already, the most a "
                         "key may have; delete one first.")


# the console (D35) -------------------------------------------------------------------------
# Raised by the console's pages and the CLI's `users`, which say them in their own ways;
# never by an API request.


class DuplicateUser(PetstoreError):
    def __init__(self, name: str) -> None:
        super().__init__(f"A console user named {name} exists already.")
        self.name = name


class UserNotFound(PetstoreError):
    def __init__(self, name: str) -> None:
        super().__init__(f"No console user is named {name}.")
        self.name = name


class InvalidUserName(PetstoreError):
    def __init__(self) -> None:
        super().__init__("A user's name is 1 to 64 letters, digits, dots, dashes, "
                         "underscores or @.")


class InvalidRole(PetstoreError):
    def __init__(self, role: str) -> None:
        super().__init__(f"A console user's role is owner or staff, not {role[:32]!r}.")


class UserRefused(PetstoreError):
    """An act on a console user that D38's rules refuse (disabling oneself, or the last
    enabled owner; resetting one's own second factor here): the message says why."""


class PasswordRefused(PetstoreError):
    """A new password that D35's rules refuse; the message says which rule."""


class SignInFailed(PetstoreError):
    """A wrong name, password or code: one message for all, so that none tells which."""

    def __init__(self) -> None:
        super().__init__("That name and password do not match a console user who may sign "
                         "in.")


class WrongCode(PetstoreError):
    def __init__(self, message: str = "That code is not the current one of your "
                 "authenticator (or it was used already); try the next one.") -> None:
        super().__init__(message)


class WrongRecoveryCode(WrongCode):
    """A recovery code that is none of the user's unspent ones (D38): one message for a
    spent code and a wrong one alike."""

    def __init__(self) -> None:
        super().__init__("That is not one of your recovery codes, or it was used already; "
                         "each works once.")


class SignInThrottled(PetstoreError):
    """Too many failed sign-ins for the account or the address (D35): wait retry_after
    seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"Too many failed sign-ins; try again in {retry_after} seconds.")
        self.retry_after = retry_after
