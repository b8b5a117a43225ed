"""The bearer check the YAML names (x-bearerInfoFunc), and how it finds the keyring.

Connexion reads the Authorization header and calls bearer_info with its token; the key is
looked up through the core's Keyring (app.core.keys), cached, since this runs on the event
loop thread (Connexion 3). An expired key is 401 api_key_expired, and a read key calling an
operation the YAML marks `x-scope: write` is 403 insufficient_scope (D21).
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from app.core.keys import KeyCheck, Keyring
from app.core.storage.records import ApiKey
from app.web.connexion_internals import routed_operation
from app.web.errors import ApiKeyExpired, DuplicateAuthorization, InsufficientScope

SCOPE_KEY = "petstore.keyring"
# What the rate-limit middleware found for this request's token (a KeyCheck).
LOOKED_UP = "petstore.key_check"
# Whether the routed operation needs a key of scope write (x-scope: write in the YAML).
NEEDS_WRITE = "petstore.needs_write"


def bearer_info(token: str, request: Any) -> dict[str, Any] | None:
    """Connexion's x-bearerInfoFunc: the token info for a valid key, None otherwise (401
    invalid_api_key); raises ApiKeyExpired (401) and InsufficientScope (403)."""
    scope = request.scope
    # The rate-limit middleware, when on, has looked this very token up already.
    check: KeyCheck = scope[LOOKED_UP] if LOOKED_UP in scope else scope[SCOPE_KEY].check(token)
    key = check.key
    if key is None:
        if check.expired:
            raise ApiKeyExpired()
        return None
    if key.scope != "write" and scope.get(NEEDS_WRITE):
        raise InsufficientScope()
    return key_info(key)


def key_info(key: ApiKey) -> dict[str, Any]:
    """The token info of a valid key, as handlers and the access log read it."""
    return {"sub": key.id, "key_id": key.id, "plan": key.plan, "scope": key.scope}


def authorization_headers(scope: Scope) -> list[bytes]:
    """The values of every Authorization header of the request."""
    return [v for k, v in scope["headers"] if k.lower() == b"authorization"]


def bearer_token(scope: Scope) -> str | None:
    """The bearer token of the request's single Authorization header, if it has one (the
    scheme is case-insensitive, RFC 9110 section 11.1)."""
    values = authorization_headers(scope)
    if len(values) != 1:
        return None
    scheme, _, token = values[0].decode("latin-1").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class KeyringForRequests:
    """Hands the keyring, and whether the routed operation needs a write key, to code that
    only sees the ASGI scope (bearer_info), and refuses a request with several
    Authorization headers (D12) before the security check reads only the first
    of them. Added right after routing."""

    def __init__(self, app: ASGIApp, *, keyring: Keyring,
                 write_operations: frozenset[str]) -> None:
        self.app = app
        self.keyring = keyring
        self.write_operations = write_operations

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            scope[SCOPE_KEY] = self.keyring
            scope[NEEDS_WRITE] = routed_operation(scope) in self.write_operations
            if len(authorization_headers(scope)) > 1:
                raise DuplicateAuthorization()
        await self.app(scope, receive, send)
