"""The one place that turns any error into the Error body.

register_error_handlers() translates every exception that can reach the Connexion app
(its own problems, Starlette's HTTP errors, the domain's exceptions of app.core.errors and
the refusals of the layers below, anything unexpected) into ``{"code", "message",
"status"}`` with the right status and headers. The errors layer of the request path
(app/web/chain.py, Connexion's exception middleware) runs these handlers for whatever any
layer inside it raises: the quotas (QuotaSpent, KeyBanned, QuotasUnknown), the routed
layer (its 404, and Retired past a sunset), the bearer check, validation (the body's limit
among it) and the handlers. None of those layers writes a body. The headers the layers
decided for the answer (the request id, the rate limits, deprecation's) are on the
request's Exchange, and the errors layer (answering.py) writes them on the Error as on
any answer. Two answers are made outside that layer and still take their
Error from here: the server errors layer's 500 (server_error_handler), and a preflight
CORS refuses (answer_of, for the CORS layer, which answers preflights before every other
layer).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any

import orjson
from connexion import AsyncApp
from connexion.exceptions import OAuthResponseProblem, ProblemException, Unauthorized
from connexion.lifecycle import ConnexionRequest, ConnexionResponse
from starlette.exceptions import HTTPException

from app.core.errors import (
    IdempotencyKeyInUse,
    IdempotencyKeyReused,
    InvalidParameter,
    NotReady,
    OrderAlreadyShipped,
    OrderCancelled,
    OrderNotFound,
    OrderNotShipped,
    OutOfStock,
    PetNotFound,
    PetNotInCatalogue,
    PetstoreError,
    PetWithdrawn,
    PreconditionFailed,
    ResyncRequired,
    StockBelowReserved,
    StockNotTracked,
    StoreUnavailable,
    WebhookEndpointLimitReached,
    WebhookEndpointNotFound,
    WebhookUrlNotAllowed,
)
from app.web.access import request_id_of
from app.web.bodies import MAX_BODY_BYTES
from app.web.conditional import order_etag
from app.web.routing import APIS, allowed_methods
from app.web.validation import FieldProblem

log = logging.getLogger("petstore.errors")

RETRY_AFTER_UNAVAILABLE = 1


class DuplicateAuthorization(PetstoreError):
    """A request with several Authorization headers (D12)."""

    param = "Authorization"

    def __init__(self) -> None:
        super().__init__("Send one Authorization header, not several.")


class ApiKeyExpired(PetstoreError):
    """A key past its expiry (D21): 401 api_key_expired."""

    def __init__(self) -> None:
        super().__init__("The API key has expired; ask for a new one.")


class InsufficientScope(PetstoreError):
    """A read key calling an operation that needs write (D21): 403 insufficient_scope."""

    def __init__(self) -> None:
        super().__init__("This API key may only read; this operation needs a key with "
                         "the write scope.")


class QuotaSpent(PetstoreError):
    """A request over its caller's quota (D8): 429 rate_limit_exceeded, with Retry-After."""

    def __init__(self, window: str, retry_after: int) -> None:
        super().__init__(f"Too many requests: the {window} quota is spent. "
                         f"Retry after {retry_after} s.")
        self.retry_after = retry_after


class KeyBanned(PetstoreError):
    """A request of a key banned for repeated requests after 429 answers (D10): 429
    api_key_banned, with Retry-After until the ban ends."""

    def __init__(self, retry_after: int) -> None:
        super().__init__("This API key is banned for repeated requests after 429 answers. "
                         f"Retry after {retry_after} s.")
        self.retry_after = retry_after


class QuotasUnknown(PetstoreError):
    """The caller's windows cannot be known (the quota storage is down and the settings say
    to fail closed, or the caller's key could not be read): 503 service_unavailable."""


class Retired(PetstoreError):
    """An operation called past its sunset (D13): 410 gone."""

    def __init__(self, sunset: float) -> None:
        super().__init__(
            f"This operation was retired on {formatdate(sunset, usegmt=True)}.")


class CorsRefused(PetstoreError):
    """A preflight for a method, header or origin CORS does not allow: 400 invalid_request.
    reason is what Starlette's CORS middleware names ("method", "headers", "origin")."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"CORS does not allow this request's {reason}.")


def error_body(status: int, code: str, message: str, param: str | None = None) -> bytes:
    """The Error object every error response carries, as compact as every other body;
    with param (v2's; v1's keeps its shape) when one field of the request is at fault."""
    if param is None:
        return orjson.dumps({"code": code, "message": message, "status": status})
    return orjson.dumps({"code": code, "message": message, "param": param, "status": status})


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None,
    param: str | None = None,
) -> ConnexionResponse:
    """A ConnexionResponse carrying the Error object."""
    return ConnexionResponse(
        status_code=status,
        mimetype="application/json",
        content_type="application/json",
        body=error_body(status, code, message, param),
        headers=headers or {},
    )


# The base paths of the documents whose Error has `param` (v2 since 2.3.0); v1's answers
# keep their shape (D17).
_PARAM_PATHS = tuple(f"{api.base_path}/" for api in APIS if api.names_params)


def _param(path: str, param: str | None) -> str | None:
    """param, for the documents whose Error has it (path is the request's)."""
    return param if path.startswith(_PARAM_PATHS) else None


UNAVAILABLE_MESSAGE = "The service cannot reach its database right now; retry shortly."


# Only codes the YAML lists (Error.code); any other 4xx answers invalid_request.
_HTTP_CODES = {
    400: ("invalid_request", "The request is not valid."),
    404: ("not_found", "There is nothing at this path."),
    405: ("method_not_allowed", "This path does not support that method."),
    413: ("payload_too_large", f"The request body is larger than {MAX_BODY_BYTES} bytes."),
    415: ("unsupported_media_type", "Send the request body as application/json."),
}


async def _problem(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    """Connexion's own problems: validation (400) and security (401)."""
    status = getattr(exc, "status", 500)
    if isinstance(exc, OAuthResponseProblem):
        return error_response(
            401,
            "invalid_api_key",
            "The API key is not valid (unknown or revoked).",
            {"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    if isinstance(exc, Unauthorized):
        return error_response(
            401,
            "missing_api_key",
            "Send an API key in the Authorization header: Bearer, a space, then the key.",
            {"WWW-Authenticate": "Bearer"},
        )
    if isinstance(exc, FieldProblem):
        return error_response(400, "invalid_request", exc.message,
                              param=_param(request.scope["path"], exc.param))
    if status == 400:  # Connexion's own words are not for clients
        return error_response(400, "invalid_request", "The request is not valid.")
    if status >= 500:
        return await _internal(request, exc)
    code, message = _HTTP_CODES.get(status, ("invalid_request", "The request is not valid."))
    return error_response(status, code, message)


async def _http_exception(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    """Starlette's HTTP errors: unknown routes (404), wrong methods (405), Flask aborts."""
    status = getattr(exc, "status_code", 500)
    if status >= 500:
        return await _internal(request, exc)
    code, message = _HTTP_CODES.get(status, ("invalid_request", "The request is not valid."))
    headers = {}
    allow = (allowed_methods(request.scope["path"])
             or (getattr(exc, "headers", None) or {}).get("Allow"))
    if status == 405 and allow:
        headers["Allow"] = allow
    return error_response(status, code, message, headers)


@dataclass(frozen=True)
class Translation:
    """How a domain exception answers: its status and code, the headers its Error carries
    (made from the exception), its message when not the exception's own, and the warning
    it logs when it is a fault of the service's surroundings rather than of the request."""

    status: int
    code: str
    headers: Callable[[Any], dict[str, str]] = lambda _: {}
    message: Callable[[Any], str] = lambda exc: str(exc.message)
    warning: str | None = None  # a format of the exception's message


def _always(headers: dict[str, str]) -> Callable[[Any], dict[str, str]]:
    return lambda _: headers


_RETRY_SOON = _always({"Retry-After": str(RETRY_AFTER_UNAVAILABLE)})


def _retry_after(exc: QuotaSpent | KeyBanned) -> dict[str, str]:
    return {"Retry-After": str(exc.retry_after)}

# Each domain exception's Error; an exception whose class (or a base of it) is not here is
# a fault of the service, answered 500 (DuplicateOrder and the like, raised by the CLI's
# imports only). A `param` the exception names is given by the documents that have it.
DOMAIN_ERRORS: dict[type[PetstoreError], Translation] = {
    OrderNotFound: Translation(404, "order_not_found"),
    PetNotFound: Translation(404, "pet_not_found"),
    OrderAlreadyShipped: Translation(409, "order_already_shipped"),
    OrderCancelled: Translation(409, "order_cancelled"),
    OrderNotShipped: Translation(409, "order_not_shipped"),
    # RFC 9110 section 13.1.1, D25: with the current ETag, to read the order again by.
    PreconditionFailed: Translation(412, "precondition_failed",
                                    lambda exc: {"ETag": order_etag(exc.version)}),
    ResyncRequired: Translation(410, "resync_required"),  # D26
    IdempotencyKeyReused: Translation(422, "idempotency_key_reused"),
    PetNotInCatalogue: Translation(422, "unknown_pet"),
    OutOfStock: Translation(422, "out_of_stock"),  # D33
    PetWithdrawn: Translation(422, "pet_withdrawn"),  # D32
    StockNotTracked: Translation(409, "stock_not_tracked"),  # D32, D33
    StockBelowReserved: Translation(409, "stock_below_reserved"),
    IdempotencyKeyInUse: Translation(409, "idempotency_key_in_use",
                                     _always({"Retry-After": "1"})),
    WebhookEndpointNotFound: Translation(404, "webhook_endpoint_not_found"),  # D28
    WebhookUrlNotAllowed: Translation(422, "webhook_url_not_allowed"),
    WebhookEndpointLimitReached: Translation(409, "webhook_endpoint_limit_reached"),
    InvalidParameter: Translation(400, "invalid_request", message=lambda exc: exc.sentence),
    # The database's own words are not for clients: they go to the log.
    StoreUnavailable: Translation(503, "service_unavailable", _RETRY_SOON,
                                  lambda _: UNAVAILABLE_MESSAGE, "store unavailable: %s"),
    NotReady: Translation(503, "service_unavailable", _RETRY_SOON, warning="%s"),
    DuplicateAuthorization: Translation(400, "invalid_request"),
    ApiKeyExpired: Translation(401, "api_key_expired",
                               _always({"WWW-Authenticate": 'Bearer error="invalid_token"'})),
    # RFC 6750 section 3.1
    InsufficientScope: Translation(
        403, "insufficient_scope",
        _always({"WWW-Authenticate": 'Bearer error="insufficient_scope"'})),
    # The quotas' refusals (D8-D10): their rate-limit headers are decided on the Exchange,
    # as for every answer the quotas let through.
    QuotaSpent: Translation(429, "rate_limit_exceeded", _retry_after),
    KeyBanned: Translation(429, "api_key_banned", _retry_after),
    QuotasUnknown: Translation(503, "service_unavailable", _RETRY_SOON),
    Retired: Translation(410, "gone"),  # D13, its Deprecation and Sunset on the Exchange
    CorsRefused: Translation(400, "invalid_request"),
}


def translation(kind: type[PetstoreError]) -> Translation | None:
    """The Translation of an exception class, or of its nearest base that has one."""
    return next((DOMAIN_ERRORS[base] for base in kind.__mro__ if base in DOMAIN_ERRORS), None)


def answer_of(exc: PetstoreError, path: str = "") -> ConnexionResponse:
    """The Error answer of a domain exception by DOMAIN_ERRORS, for a request to path (its
    `param` where that request's document has it). The exception handlers answer with it,
    and so does the CORS layer, which answers its preflights outside them. TypeError for
    an exception with no Translation: the handlers answer those 500."""
    found = translation(type(exc))
    if found is None:
        raise TypeError(f"{type(exc).__name__} has no Translation in DOMAIN_ERRORS")
    if found.warning is not None:
        log.warning(found.warning, exc.message)
    return error_response(found.status, found.code, found.message(exc), found.headers(exc),
                          param=_param(path, exc.param))


async def _domain(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    """The domain's exceptions and the layers' refusals, by DOMAIN_ERRORS."""
    if isinstance(exc, PetstoreError) and translation(type(exc)) is not None:
        return answer_of(exc, request.scope["path"])
    return await _internal(request, exc)


async def _internal(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    request_id = request_id_of(request.scope)
    log.error("unexpected error on %s", request.method, exc_info=exc,
              extra={"request_id": request_id})
    return error_response(
        500, "internal_error",
        f"The service failed to handle this request; it was logged as request {request_id}.",
    )


async def server_error_handler(request: ConnexionRequest, exc: Exception) -> ConnexionResponse:
    """Replaces Connexion's ServerErrorMiddleware default, which answers an empty 500
    for errors raised outside the handlers (spec-first/connexion#2059)."""
    return await _internal(request, exc)


def register_error_handlers(app: AsyncApp) -> None:
    """Route every kind of exception to the Error body. The handlers are coroutines: they
    read nothing but the exception and the request, and a refusal (a 429 in a flood of
    them) costs no trip to a thread."""
    app.add_error_handler(ProblemException, _problem)
    app.add_error_handler(HTTPException, _http_exception)
    app.add_error_handler(PetstoreError, _domain)
    app.add_error_handler(Exception, _internal)
