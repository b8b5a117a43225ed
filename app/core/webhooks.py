"""Webhooks (D28, D39): the rules, with no network code. The web wing's deliverer
(app/web/deliverer.py) and its sender (app/outbound.py) carry them out.

- Endpoints: a URL (http or https, no userinfo, at most 2,048 characters) whose host may
  only be a global address, or one inside PETSTORE_WEBHOOK_ALLOWED_NETWORKS
  (app/core/webhook_urls.py), checked at creation and at every attempt; the types it
  wants (of TYPES; every order's type when none, as before the pets had any); a secret,
  `whsec_` and the base64 of 32 random bytes, shown once. Each belongs to the API key
  that made it; a key sees only its own, at most MAX_PER_KEY of them. The operator (key
  None) sees all.
- Messages: `{"type", "timestamp", "data"}`, data the order or the pet as v2 answers it,
  signed by the Standard Webhooks scheme (the standardwebhooks package); during a
  rotation's grace, with both secrets. The type is the kind of the order's or pet's last
  change, which the store records with the change itself (an order's: placed, shipped,
  completed, cancelled, or "changed" for any other change, such as an import or a hand
  edit; a pet's: PET_CHANGE_KIND's), so a message's type and its data are read together;
  a pet's crossing is the endpoint's own, from what it last read of the pet
  (message_type).
  `webhook-id` names one change of one order or pet: its id and the feed position of the
  change, the same on every retry.
- Order: an endpoint's place is in both feeds at once (records.Place): the changes of
  orders and pets come in the order they were committed.
- Retries: the Standard Webhooks schedule (SCHEDULE), `Retry-After` honoured when longer;
  after the last, the endpoint is disabled with its reason, its place in the feed kept.
"""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import functools
import re
import secrets as random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from standardwebhooks.webhooks import Webhook

from app.core import feed, names, webhook_urls
from app.core.errors import (
    InvalidParameter,
    WebhookEndpointNotFound,
)
from app.core.orders import format_time, format_unix_time
from app.core.paging import seal, unseal
from app.core.storage import Store
from app.core.storage.pet_feed_statements import PET_CHANGE_KINDS
from app.core.storage.records import Change, WebhookAttempt, WebhookEndpoint

ORDER_TYPES = ("order.placed", "order.shipped", "order.completed", "order.cancelled",
               "order.changed")
PET_TYPES = tuple(f"pet.{kind}" for kind in PET_CHANGE_KINDS)  # D39
TYPES = ORDER_TYPES + PET_TYPES
PING = "ping"
MAX_PER_KEY = 16
DESCRIPTION_MAX = 500
RESPONSE_KEPT = 1024  # characters of an answer the attempts log keeps
GRACE_DEFAULT = 86_400  # seconds the secret before a rotation keeps signing
GRACE_MAX = 7 * 86_400
# Seconds before each attempt of one message, after the failure of the one before: the
# Standard Webhooks schedule (at once, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h).
SCHEDULE = (0, 5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400)
RETRY_AFTER_MAX = 86_400
DELIVERIES_LIMIT_DEFAULT = 50
DELIVERIES_LIMIT_MAX = 500
_DELIVERIES = "deliveries"  # the first value of a deliveries cursor

def check_types(types: Any) -> tuple[str, ...]:
    """The message types an endpoint asks for, without repeats, in TYPES' order (empty:
    every order's type, wanted() says); InvalidParameter naming an unknown one."""
    if types is None:
        return ()
    if not isinstance(types, list) or not all(isinstance(t, str) for t in types):
        raise InvalidParameter("types", "type", {"type": "array"})
    unknown = [t for t in types if t not in TYPES]
    if unknown:
        raise InvalidParameter("types", "unknown_type", {"type": unknown[0], "enum": TYPES})
    return tuple(t for t in TYPES if t in types)


def _description(description: Any) -> str:
    if description is None:
        return ""
    if not isinstance(description, str) or len(description) > DESCRIPTION_MAX:
        raise InvalidParameter("description", "maxLength", {"maxLength": DESCRIPTION_MAX})
    return names.readable(description, "description")  # D37


# messages ----------------------------------------------------------------------------


CROSSINGS = frozenset({"out_of_stock", "back_in_stock", "withdrawn", "restored"})


def message_type(change: Change) -> str:
    """The message type of a change: order. or pet., and the kind the store recorded with
    it; for a pet that the endpoint has read before, a crossing as the deliverer reads it
    (D39): withdrawn or restored, out of stock or back in stock from what the endpoint
    last read, whatever changed in between, and no crossing where it read the same on
    both sides (a pet sold out and restocked between two reads is changed)."""
    kind = change.kind
    if change.seen is not None and change.state is not None:
        (orderable, withdrawn), (was_orderable, was_withdrawn) = change.state, change.seen
        if withdrawn != was_withdrawn:
            kind = "withdrawn" if withdrawn else "restored"
        elif orderable != was_orderable:
            kind = "back_in_stock" if orderable else "out_of_stock"
        elif kind in CROSSINGS:
            kind = "changed"
    return f"{change.of}.{kind}"


def webhook_id(change: Change) -> str:
    """The webhook-id of a change: the same on every retry, another for each change
    (msg_{order}_{position}, as since 2.3.0, or msg_pet_{pet}_{position})."""
    subject = "" if change.of == "order" else f"{change.of}_"
    return f"msg_{subject}{change.item_id}_{change.position}"


def feeds(endpoint: WebhookEndpoint) -> tuple[str, ...]:
    """The feeds whose changes the endpoint wants some of ("order", "pet"): a deliverer
    reads only those (an endpoint of the orders alone reads no pet, whatever a sale does to
    the pets, and one of the pets alone none of the sale's orders)."""
    if not endpoint.types:
        return ("order",)
    return tuple(feed for feed in ("order", "pet")
                 if any(t.startswith(f"{feed}.") for t in endpoint.types))


def wanted(endpoint: WebhookEndpoint, change: Change) -> bool:
    """Whether the endpoint asked for this change's type. One that named none gets every
    order's type, as before pets had any (D39): a receiver written for 2.4.0 is sent no
    type it does not know."""
    if not endpoint.types:
        return change.of == "order"
    return message_type(change) in endpoint.types


def message(type: str, data: str, now: float) -> bytes:
    """A message's body: its type, when it was made (ISO 8601 UTC) and its data (JSON)."""
    moment = format_unix_time(now)
    return b'{"type":%s,"timestamp":%s,"data":%s}' % (
        orjson.dumps(type), orjson.dumps(moment), data.encode())


def ping(endpoint: WebhookEndpoint, now: float) -> tuple[str, bytes]:
    """A test message's webhook-id and body."""
    data = orjson.dumps({"endpointId": endpoint.id}).decode()
    return f"msg_ping_{random.token_hex(8)}", message(PING, data, now)


def signing_secrets(endpoint: WebhookEndpoint, now: float) -> list[str]:
    """The secrets that sign a message now: the endpoint's, and during a rotation's grace
    the one before it."""
    found = [endpoint.secret]
    if endpoint.previous_secret and (endpoint.previous_until or 0) > now:
        found.append(endpoint.previous_secret)
    return found


def signed_headers(endpoint: WebhookEndpoint, msg_id: str, body: bytes,
                   now: float) -> dict[str, str]:
    """The Standard Webhooks headers of a message sent now: webhook-id, webhook-timestamp
    and webhook-signature (one signature a signing secret, separated by spaces)."""
    moment = dt.datetime.fromtimestamp(int(now), dt.UTC)
    text = body.decode()
    signatures = [_signer(secret).sign(msg_id, moment, text)
                  for secret in signing_secrets(endpoint, now)]
    return {"webhook-id": msg_id, "webhook-timestamp": str(int(now)),
            "webhook-signature": " ".join(signatures),
            "content-type": "application/json"}


@functools.lru_cache(maxsize=1024)
def _signer(secret: str) -> Webhook:
    """The signer of a secret, made once (it decodes the secret's base64): a deliverer
    signs a thousand messages a second with the secrets of a few endpoints."""
    return Webhook(secret)


def new_secret() -> str:
    """A new signing secret: whsec_ and the base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(random.token_bytes(32)).decode()


# retries -----------------------------------------------------------------------------


def retry_after(header: str | None, now: float) -> float | None:
    """Seconds a Retry-After header asks to wait (delay-seconds or an HTTP date), at most a
    day; None without a readable one."""
    if not header:
        return None
    text = header.strip()
    if text.isdigit():
        return float(min(int(text), RETRY_AFTER_MAX))
    try:
        moment = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return max(0.0, min(moment.timestamp() - now, RETRY_AFTER_MAX))


def next_attempt(failures: int, waited: float | None = None) -> float | None:
    """Seconds until the next attempt of a message that has failed `failures` times, by
    the schedule, or longer when the answer's Retry-After asked (waited); None when the
    schedule is spent (the endpoint is then disabled)."""
    if failures >= len(SCHEDULE):
        return None
    return max(float(SCHEDULE[failures]), waited or 0.0)


@dataclass(frozen=True)
class Outcome:
    """What one attempt came to: the answer's status (None when there was none), the
    first RESPONSE_KEPT characters of its body, its Retry-After, the error, and its
    duration in milliseconds."""

    status: int | None
    response: str = ""
    retry_after: str | None = None
    error: str | None = None
    duration_ms: float = 0.0

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    @property
    def gone(self) -> bool:
        """410: the receiver says the endpoint is gone; it is disabled at once."""
        return self.status == 410

    def failure(self) -> str:
        """Why the attempt failed, in a few words."""
        if self.error:
            return self.error
        if self.status is not None and 300 <= self.status < 400:
            return f"answered {self.status} (redirects are not followed)"
        return f"answered {self.status}"


# the endpoints' rules ------------------------------------------------------------------


def view(endpoint: WebhookEndpoint) -> dict[str, Any]:
    """An endpoint as the API and the CLI show it (never its secret)."""
    shown: dict[str, Any] = {
        "id": endpoint.id, "url": endpoint.url, "types": list(endpoint.types),
        "description": endpoint.description, "enabled": endpoint.enabled,
        "createdAt": endpoint.created_at,
    }
    if endpoint.disabled_reason and not endpoint.enabled:
        shown["disabledReason"] = endpoint.disabled_reason
    if endpoint.attempt:
        shown["failingAttempts"] = endpoint.attempt
        if endpoint.next_attempt_at is not None:
            shown["nextAttemptAt"] = format_time(
                dt.datetime.fromtimestamp(endpoint.next_attempt_at, dt.UTC))
    if endpoint.previous_secret and endpoint.previous_until:
        shown["previousSecretUntil"] = format_time(
            dt.datetime.fromtimestamp(endpoint.previous_until, dt.UTC))
    return shown


def attempt_view(attempt: WebhookAttempt) -> dict[str, Any]:
    """An attempt as the API and the CLI show it."""
    shown: dict[str, Any] = {
        "id": attempt.id, "webhookId": attempt.webhook_id, "type": attempt.type,
        "attempt": attempt.attempt, "durationMs": round(attempt.duration_ms, 1),
        "response": attempt.response, "attemptedAt": attempt.attempted_at,
    }
    if attempt.status is not None:
        shown["status"] = attempt.status
    if attempt.error:
        shown["error"] = attempt.error
    return shown


def _now() -> str:
    return format_time(dt.datetime.now(dt.UTC))


def find(store: Store, key_id: int | None, endpoint_id: int) -> WebhookEndpoint:
    """The endpoint, if the key may see it (the operator, None, sees all)."""
    endpoint = store.get_webhook_endpoint(endpoint_id)
    if endpoint is None or (key_id is not None and endpoint.api_key_id != key_id):
        raise WebhookEndpointNotFound(endpoint_id)
    return endpoint


def endpoints(store: Store, key_id: int | None) -> list[WebhookEndpoint]:
    """The endpoints the key made (every one for the operator, None), by id."""
    return store.list_webhook_endpoints(key_id)


def create(store: Store, key_id: int | None, url: Any, types: Any = None,
           description: Any = None, allowed: Sequence[webhook_urls.Network] = (),
           resolve: webhook_urls.Resolver = webhook_urls.system_resolver,
           ) -> tuple[WebhookEndpoint, str]:
    """A new endpoint of the key, and its secret (shown this once). It receives the
    changes committed from now on."""
    target = webhook_urls.check_url(url)
    chosen = check_types(types)
    text = _description(description)
    webhook_urls.addresses(target, allowed, resolve)
    secret = new_secret()
    # After every change committed so far: the orders and pets at the revision's position
    # are before (position, "pet", the largest id). A key has at most MAX_PER_KEY; the
    # operator's (no key) are not counted.
    endpoint = store.create_webhook_endpoint(
        api_key_id=key_id, url=url, types=chosen, description=text, secret=secret,
        place=(store.revision(), "pet", ID_MAX), now=_now(), at_most=MAX_PER_KEY)
    return endpoint, secret


def update(store: Store, key_id: int | None, endpoint_id: int, changes: dict[str, Any],
           allowed: Sequence[webhook_urls.Network] = (),
           resolve: webhook_urls.Resolver = webhook_urls.system_resolver,
           now: float | None = None) -> WebhookEndpoint:
    """Change an endpoint's url, types, description or enabled. Enabling a disabled one
    goes on from its place in the feed, at once: nothing is skipped."""
    endpoint = find(store, key_id, endpoint_id)
    unknown = sorted(set(changes) - {"url", "types", "description", "enabled"})
    if unknown:
        raise InvalidParameter(unknown[0], "additionalProperties",
                               {"known": ["url", "types", "description", "enabled"]})
    stored: dict[str, Any] = {}
    if "url" in changes:
        webhook_urls.addresses(webhook_urls.check_url(changes["url"]), allowed, resolve)
        stored["url"] = changes["url"]
    if "types" in changes:
        stored["types"] = check_types(changes["types"])
    if "description" in changes:
        stored["description"] = _description(changes["description"])
    if "enabled" in changes:
        if not isinstance(changes["enabled"], bool):
            raise InvalidParameter("enabled", "type", {"type": "boolean"})
        if changes["enabled"] and not endpoint.enabled:
            stored.update(enabled=True, disabled_reason=None, attempt=0, next_attempt_at=None)
        elif not changes["enabled"] and endpoint.enabled:
            stored.update(enabled=False, disabled_reason="disabled by its owner")
    updated = store.update_webhook_endpoint(endpoint.id, stored)
    if updated is None:
        raise WebhookEndpointNotFound(endpoint_id)
    return updated


def delete(store: Store, key_id: int | None, endpoint_id: int) -> None:
    """Remove the endpoint and its log of attempts."""
    find(store, key_id, endpoint_id)
    store.delete_webhook_endpoint(endpoint_id)


def rotate(store: Store, key_id: int | None, endpoint_id: int, grace: Any = GRACE_DEFAULT,
           now: float | None = None) -> tuple[WebhookEndpoint, str]:
    """Give the endpoint a new secret; the one it had keeps signing beside it for grace
    seconds (0: stops now). The endpoint and the new secret (shown this once)."""
    if (not isinstance(grace, int) or isinstance(grace, bool)
            or not 0 <= grace <= GRACE_MAX):
        raise InvalidParameter("graceSeconds", "type",
                               {"type": "integer", "minimum": 0, "maximum": GRACE_MAX})
    endpoint = find(store, key_id, endpoint_id)
    secret = new_secret()
    moment = dt.datetime.now(dt.UTC).timestamp() if now is None else now
    updated = store.update_webhook_endpoint(endpoint.id, {
        "secret": secret, "previous_secret": endpoint.secret,
        "previous_until": moment + grace})
    if updated is None:
        raise WebhookEndpointNotFound(endpoint_id)
    return updated, secret


def renew_secret(store: Store, key_id: int | None,
                 endpoint_id: int) -> tuple[WebhookEndpoint, str]:
    """Give the endpoint a new secret in place of its current one, leaving the old one of a
    rotation signing beside it as before: what the console's rotation does when its form is
    sent again, so that the secret its last answer shows is the one that signs."""
    endpoint = find(store, key_id, endpoint_id)
    secret = new_secret()
    updated = store.update_webhook_endpoint(endpoint.id, {"secret": secret})
    if updated is None:
        raise WebhookEndpointNotFound(endpoint_id)
    return updated, secret


def replay(store: Store, key_id: int | None, endpoint_id: int,
           after: Any) -> WebhookEndpoint:
    """Deliver again every change after a cursor of either feed (from the beginning without
    one): the endpoint's place in the feeds moves there (one of the orders' feed: after
    that order, the pets of its position still to come; one of the pets' feed: after that
    pet), its retry state is cleared."""
    endpoint = find(store, key_id, endpoint_id)
    if after is not None and not (isinstance(after, str) and 0 < len(after) <= 1024):
        raise InvalidParameter("after", "type", {"type": "string"})
    try:
        kind, position, item_id = (feed.resume_point(store, after) if after
                                   else (feed.ORDERS, -1, 0))
    except InvalidParameter:
        raise InvalidParameter("after", "cursor_edited") from None
    store.forget_webhook_pets(endpoint.id)  # sent again with their last change's kind
    updated = store.update_webhook_endpoint(endpoint.id, {
        "position": position, "place_of": "order" if kind == feed.ORDERS else "pet",
        "order_id": item_id, "attempt": 0, "next_attempt_at": None})
    if updated is None:
        raise WebhookEndpointNotFound(endpoint_id)
    return updated


# webhook_id's: msg_{order}_{position}, msg_pet_{pet}_{position}
MESSAGE_ID = re.compile(r"msg_(?:pet_)?[0-9]+_([0-9]+)\Z")
ID_MAX = 2**63 - 1
LAG_COUNTED = 1000  # changes counted of an endpoint's lag; past it, "at least"


def lag(store: Store, endpoint: WebhookEndpoint) -> int:
    """How many orders and pets have a change the endpoint has not had yet (of the types
    it wants), counted up to LAG_COUNTED: its lag, as the console shows it (the worker
    that holds it keeps the seconds, petstore_webhook_lag_seconds)."""
    changes = store.changes_after(endpoint.place, LAG_COUNTED, feeds(endpoint), endpoint.id)
    return sum(1 for change in changes if wanted(endpoint, change))


def replay_since(store: Store, key_id: int | None, endpoint_id: int,
                 moment: str) -> WebhookEndpoint | None:
    """Deliver again every message first attempted to the endpoint at or after moment
    (a stored time), and what followed: the endpoint goes on from the earliest change
    such an attempt sent (whatever came of it, so a receiver that answered 2xx wrongly
    is sent it again). None, and nothing changes, when no message was attempted since."""
    endpoint = find(store, key_id, endpoint_id)
    earliest: int | None = None
    before = None
    while True:  # newest first, back to the moment: the attempts kept since then
        found = store.webhook_attempts(endpoint.id, before, DELIVERIES_LIMIT_MAX)
        for attempt in found:
            if attempt.attempted_at < moment:
                found = []
                break
            matched = MESSAGE_ID.match(attempt.webhook_id)
            if matched:
                position = int(matched.group(1))
                earliest = position if earliest is None else min(earliest, position)
        if len(found) < DELIVERIES_LIMIT_MAX:
            break
        before = found[-1].id
    if earliest is None:
        return None
    store.forget_webhook_pets(endpoint.id)
    updated = store.update_webhook_endpoint(endpoint.id, {
        "position": earliest - 1, "place_of": "pet", "order_id": ID_MAX, "attempt": 0,
        "next_attempt_at": None})
    if updated is None:
        raise WebhookEndpointNotFound(endpoint_id)
    return updated


def deliveries(store: Store, key_id: int | None, endpoint_id: int,
               cursor: str | None = None,
               limit: int = DELIVERIES_LIMIT_DEFAULT) -> tuple[list[WebhookAttempt], str | None]:
    """One page of the endpoint's attempts, newest first, and the cursor of the next page
    (None at the end)."""
    endpoint = find(store, key_id, endpoint_id)
    if not 1 <= limit <= DELIVERIES_LIMIT_MAX:
        raise InvalidParameter("limit", "type", {"type": "integer", "minimum": 1,
                                                 "maximum": DELIVERIES_LIMIT_MAX})
    before = None
    if cursor:
        edited = InvalidParameter("cursor", "cursor_edited")
        values = unseal(cursor, edited)
        if (len(values) != 3 or values[0] != _DELIVERIES or values[1] != endpoint.id
                or not isinstance(values[2], int)):
            raise edited
        before = values[2]
    found = store.webhook_attempts(endpoint.id, before, limit + 1)
    following = (seal([_DELIVERIES, endpoint.id, found[limit - 1].id])
                 if len(found) > limit else None)
    return found[:limit], following


def prune(store: Store, days: int, now: dt.datetime | None = None) -> int:
    """Forget the attempts older than days (of 86,400 seconds, whatever the machine's clock
    does in summer time); how many went."""
    moment = time.time() if now is None else now.timestamp()
    return store.purge_webhook_attempts(format_unix_time(moment - days * 86_400))


def test_result(msg_id: str, outcome: Outcome) -> dict[str, Any]:
    """How a test message went, as the API and the CLI show it."""
    shown: dict[str, Any] = {"delivered": outcome.delivered,
                             "durationMs": round(outcome.duration_ms, 1), "webhookId": msg_id}
    if outcome.status is not None:
        shown["status"] = outcome.status
    if not outcome.delivered:
        shown["error"] = outcome.failure()
    return shown
