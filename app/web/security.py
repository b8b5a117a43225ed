"""The bearer check the YAML names (x-bearerInfoFunc), over what the caller layer
(caller.py) found for the request's bearer token. An expired key is 401
api_key_expired, and a read key calling an operation the YAML marks `x-scope: write` is
403 insufficient_scope (D21).
"""

from __future__ import annotations

from typing import Any

from connexion.exceptions import OAuthResponseProblem
from connexion.security import NO_VALUE, BearerSecurityHandler
from connexion.utils import get_function_from_name
from starlette.types import Scope

from app.core.storage.records import ApiKey
from app.web.errors import ApiKeyExpired, InsufficientScope
from app.web.exchange import exchange


def bearer_info(token: str, request: Any) -> dict[str, Any] | None:
    """Connexion's x-bearerInfoFunc: the token info for a valid key, None otherwise (401
    invalid_api_key); raises ApiKeyExpired (401), InsufficientScope (403), and
    StoreUnavailable (503) when the caller layer could not read the key."""
    found = exchange(request.scope)
    if found.caller_error is not None:
        raise found.caller_error
    # The caller layer looked up this very token: Connexion reads it from the request's
    # one Authorization header (the routing layer refuses several), as bearer_token does.
    check = found.caller
    key = check.key if check is not None else None
    if key is None:
        if check is not None and check.expired:
            raise ApiKeyExpired()
        return None
    if key.scope != "write" and found.operation is not None and found.operation.writes:
        raise InsufficientScope()
    return key_info(key)


class BearerCheck(BearerSecurityHandler):
    """The bearer check of the documents' bearerAuth scheme, through Connexion's public
    security_map: the function its x-bearerInfoFunc names, called with the token and the
    request. Connexion's own handler asks, on every request, whether that function takes
    `required_scopes` and `request` by reading its signature twice, which costs more than
    the check itself; here the answer is known."""

    def get_fn(self, security_scheme: dict[str, Any], required_scopes: Any) -> Any:
        info = get_function_from_name(security_scheme[self.security_definition_key])

        def verify(request: Any) -> Any:
            scheme, token = self.get_auth_header_value(request)
            if scheme != "bearer":
                return NO_VALUE  # Connexion answers 401: no token
            found = info(token, request)
            if found is None:
                raise OAuthResponseProblem(detail="Provided token is not valid")
            return found

        return verify


SECURITY_MAP = {"bearer": BearerCheck}


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
