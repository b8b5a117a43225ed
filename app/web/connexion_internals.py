"""Every reach into Connexion's internals, in one place (Connexion 3.3, pinned in
pyproject.toml to the range the tests have passed on: an upgrade is a conscious step that
starts by reading this module).

Each piece names the Connexion behaviour or issue that forces it:

- Scope keys. Connexion keeps an operation's routing result in
  ``scope["extensions"]["connexion_routing"]``, no public API, and its router works on a
  shallow copy of the scope. (share_extensions, routed_operation, routed_base_path)
- Path parameters. The router's ``int`` convertor (``[+-]?[0-9]+``) answers 404 for
  ``abc`` (spec-first/connexion#770) and turns ``005`` into 5, and its coercion uses
  ``int()``, which accepts ``+5``, ``5_0`` and Unicode digits, against D7. (SegmentConvertor,
  StrictRoutingMiddleware, StrictURIParser; the AsyncApp's own router compiles its routes
  with the same process-wide convertors.)
- Mount order. The operations API sits at base path "" (D16); Starlette tries mounts in
  the order added, and a Mount("") first matches every path. (_specific_first)
- Slash redirects. Starlette's router redirects a trailing slash; D7 wants 404.
- Validation messages. Connexion's are jsonschema's messages (and dumps), which
  app.web.validation puts in our words; and it deep-copies each parameter's definition and
  builds a validator on every request. (ParameterValidator, JSONBodyValidator: the
  private names of Connexion's left, `_parse` and `_validate`, are the methods its
  AbstractRequestBodyValidator leaves for a custom body validator to write, and the
  `_schema` and `_required` it keeps for one to read.)
- Response validation. Connexion's finds an answer's operation by its router's scope
  keys, so it checks only the handlers' answers; ours is asked by operation id, wherever
  the answer was made. (ResponseChecks)
- Per-request setup. The request validator builds a URI parser and a parameter validator
  for every request (PreparedRequestValidation builds them once per operation, from the
  operation and validator_map Connexion hands its constructor, not from its private
  attributes). The AsyncApp also rebuilds an operation's decorator chain on every request
  (AsyncOperation.fn); no public hook reaches it, so it stays (D40, D42). Both costs
  are among what spec-first/connexion#2045 ("performance tanked after upgrading to 3.x")
  and spec-first/connexion#2077 (FlaskApp against AsyncApp) report.
- The document server runs Starlette's router over every mount for every request, a
  tenth of a small request's cost. (SpecificFirstSwaggerUIMiddleware)
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterator
from typing import Any

import starlette.convertors
from connexion.datastructures import MediaTypeDict
from connexion.exceptions import BadRequestProblem
from connexion.json_schema import Draft4RequestValidator, resolve_refs
from connexion.middleware.request_validation import (
    RequestValidationAPI,
    RequestValidationMiddleware,
    RequestValidationOperation,
)
from connexion.middleware.response_validation import (
    ResponseValidationMiddleware,
    ResponseValidationOperation,
)
from connexion.middleware.routing import RoutingMiddleware
from connexion.middleware.swagger_ui import SwaggerUIMiddleware
from connexion.uri_parsing import OpenAPIURIParser
from connexion.utils import is_null, is_nullable
from connexion.validators import VALIDATOR_MAP as CONNEXION_VALIDATORS
from connexion.validators import JSONRequestBodyValidator
from connexion.validators import ParameterValidator as ConnexionParameterValidator
from connexion.validators.parameter import draft4_format_checker
from jsonschema import Draft4Validator, ValidationError
from starlette.datastructures import Headers
from starlette.routing import Mount, Router
from starlette.types import ASGIApp, Receive, Scope, Send

from app.web import bodies, validation

# At most 100 digits: int() refuses a text of over 4,300 (a 500), and no int64 has 20.
CANONICAL_INTEGER = re.compile(r"-?(?:0|[1-9][0-9]{0,99})\Z")

# scope keys ------------------------------------------------------------------------------

ROUTING = "connexion_routing"
CONTEXT = "connexion_context"


def share_extensions(scope: Scope) -> None:
    """Create scope["extensions"] before Connexion's router copies the scope (shallowly,
    ``scope.copy()`` in RoutingOperation), so that the copy shares the dict Connexion adds
    its routing and security context to, and outer middleware can read them."""
    scope.setdefault("extensions", {})


def routed_operation(scope: Scope) -> str | None:
    """The resolved operation id (``app.web.handlers.orders.list_orders``) Connexion's
    router matched the request to, or None."""
    return ((scope.get("extensions") or {}).get(ROUTING) or {}).get("operation_id")


def routed_base_path(scope: Scope) -> str | None:
    """The base path of the API the router matched the request to ("/v1", "")."""
    return ((scope.get("extensions") or {}).get(ROUTING) or {}).get("api_base_path")


# path parameters and routing -------------------------------------------------------------


class SegmentConvertor(starlette.convertors.Convertor[str]):
    """Matches any one path segment and keeps it as text, for StrictURIParser to judge."""

    regex = "[^/]+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return str(value)


class RestConvertor(starlette.convertors.PathConvertor):
    """The rest of a path after a Mount's base path, whatever characters it holds.
    Starlette's is `.*`, which stops at a newline (%0A): no base path matched such a path,
    so an id holding one was answered 404 "nothing at this path" where its operation
    answers 400 (D7), without a deprecated operation's Deprecation and Sunset (D13)."""

    regex = "(?s:.*)"


class StrictRoutingMiddleware(RoutingMiddleware):
    """Connexion's router with integer segments routed as text and no slash redirects
    (a trailing slash is 404 not_found, D7)."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        # Connexion registers its own "int" convertor in the line above; ours replaces it
        # before any route is compiled, and the Mounts of add_api take the rest of a path
        # with RestConvertor.
        starlette.convertors.register_url_convertor("int", SegmentConvertor())
        starlette.convertors.register_url_convertor("path", RestConvertor())
        self.router.redirect_slashes = False

    def add_api(self, *args: Any, **kwargs: Any) -> None:
        super().add_api(*args, **kwargs)
        _specific_first(self.router)
        _no_slash_redirects(self.router)
        _whole_paths(self.router)


def _specific_first(router: Router) -> None:
    """Try mounts most specific first: the operations API sits at base path "" (D16), and
    a Mount("") tried first matches every path, so /v1 requests would reach the handlers
    without their operation."""
    router.routes.sort(key=lambda route: -len(getattr(route, "path", "")))


def _routers(router: Router) -> Iterator[Router]:
    """router and the routers of its Mounts, all the way down."""
    yield router
    for route in router.routes:
        inner = getattr(route, "app", None)
        if isinstance(route, Mount) and inner is not None:
            inner_router = getattr(inner, "router", inner)
            if isinstance(inner_router, Router):
                yield from _routers(inner_router)


def _no_slash_redirects(router: Router) -> None:
    for each in _routers(router):
        each.redirect_slashes = False


def _whole_paths(router: Router) -> None:
    """Match each route against the whole path: Starlette ends its patterns with `$`,
    which also matches before a last newline, so /v1/store/orders%0A would be routed as the
    list. With RestConvertor, a newline inside a path parameter is that parameter's 400,
    and one anywhere else is 404 not_found (D7)."""
    for each in _routers(router):
        for route in each.routes:
            pattern = getattr(route, "path_regex", None)
            if isinstance(pattern, re.Pattern) and pattern.pattern.endswith("$"):
                route.path_regex = re.compile(  # type: ignore[attr-defined]
                    pattern.pattern[:-1] + r"\Z", pattern.flags)


class StrictURIParser(OpenAPIURIParser):
    """Converts integer path parameters only when written as canonical decimals; anything
    else stays a string and fails validation with 400 (D7)."""

    def resolve_path(self, path_data: dict[str, Any]) -> dict[str, Any]:
        resolved = {}
        strict = {}
        for name, value in path_data.items():
            schema = self.param_schemas.get(name) or {}
            if schema.get("type") == "integer" and isinstance(value, str):
                strict[name] = int(value) if CANONICAL_INTEGER.match(value) else value
            else:
                resolved[name] = value
        resolved = super().resolve_path(resolved) if resolved else {}
        resolved.update(strict)
        return resolved


# id of a parameter's definition -> (the definition, its validator)
_VALIDATORS: dict[int, tuple[dict[str, Any], Draft4Validator]] = {}


class ParameterValidator(ConnexionParameterValidator):
    """Connexion's parameter validation with our sentences, naming the parameter
    (app.web.validation; Connexion's are jsonschema's messages).

    Connexion deep-copies each parameter's definition and builds a jsonschema validator
    for it on every request; here each parameter's validator is built once."""

    @staticmethod
    def validate_parameter(
        parameter_type: str, value: Any, param: dict[str, Any], param_name: str | None = None
    ) -> str | None:
        """None when the value is valid; else raises validation.FieldProblem."""
        if is_nullable(param) and is_null(value):
            return None
        if value is None:
            if param.get("required"):
                raise validation.parameter_problem(None, param, value)
            return None
        try:
            ParameterValidator.validator(param).validate(value)
        except ValidationError as error:
            raise validation.parameter_problem(error, param, value) from None
        return None

    def validate_request(self, request: Any) -> None:
        """Connexion's checks in Connexion's order, each raising validation.FieldProblem."""
        if self.strict_validation:
            declared = [p["name"] for p in self.parameters.get("query", [])]
            allowed = {*declared, *self.security_query_params}
            extra = [name for name in request.query_params if name not in allowed]
            if extra:
                raise validation.unknown_query_problem(extra, declared)
        for kind, check in (("query", self.validate_query_parameter),
                            ("path", self.validate_path_parameter),
                            ("header", self.validate_header_parameter),
                            ("cookie", self.validate_cookie_parameter)):
            for param in self.parameters.get(kind, []):
                check(param, request)

    @staticmethod
    def validator(param: dict[str, Any]) -> Draft4Validator:
        """The jsonschema validator of a parameter's schema, built once."""
        # Keyed by identity: an operation's parameter definitions live as long as the app.
        entry = _VALIDATORS.get(id(param))
        if entry is None or entry[0] is not param:
            schema = copy.deepcopy(param.get("schema", param))
            entry = (param, Draft4Validator(schema, format_checker=draft4_format_checker))
            _VALIDATORS[id(param)] = entry
        return entry[1]


class JSONBodyValidator(JSONRequestBodyValidator):
    """Connexion's JSON body validation with our sentences (app.web.validation): a body
    missing, not JSON, or failing its schema, the member at fault named. Its jsonschema
    validator is built once (`compiled`; Connexion's `_validator` property builds one at
    every use, and our _validate reads `compiled` instead); one JSONBodyValidator serves all
    requests of an operation (PreparedRequestValidation). `_parse` and `_validate` are the
    two methods Connexion's AbstractRequestBodyValidator leaves for a custom validator of
    `validator_map` to write: its own extension points, overridden as it means them to be."""

    @functools.cached_property
    def compiled(self) -> Any:
        """The jsonschema validator of this body's schema, built at first use."""
        return self.validator_for(self._schema)

    @staticmethod
    def validator_for(schema: dict[str, Any]) -> Any:
        """The jsonschema validator Connexion's JSON body validation uses for a schema."""
        return Draft4RequestValidator(schema, format_checker=Draft4Validator.FORMAT_CHECKER)

    async def wrap_receive(self, receive: Receive, *, scope: Scope) -> Any:
        length = Headers(scope=scope).get("content-length", "0")
        if (self._required and self._schema.get("default") is None
                and (not length.isdigit() or not int(length))):
            raise validation.whole_body_problem("required")
        return await super().wrap_receive(receive, scope=scope)

    async def _parse(self, stream: Any, scope: Scope) -> Any:
        try:
            return await super()._parse(stream, scope)
        # json.loads' message, with its line and column; or a body nested past the
        # interpreter's recursion limit.
        except (BadRequestProblem, RecursionError):
            raise validation.whole_body_problem("not_json") from None

    def _validate(self, body: Any) -> dict[str, Any] | None:
        if not self._nullable and body is None:
            raise validation.whole_body_problem("required")
        try:
            self.compiled.validate(body)
        except ValidationError as error:
            raise validation.body_problem(error) from None
        return None


VALIDATOR_MAP = {
    "parameter": ParameterValidator,
    "body": MediaTypeDict({**CONNEXION_VALIDATORS["body"], "*/*json": JSONBodyValidator}),
}


class ResponseChecks(ResponseValidationMiddleware):
    """Connexion's response validation, asked for by operation id wherever the answer was
    made: Connexion's own finds the operation by its router's scope keys and so checks
    only what the handlers answer, not what a layer before the router answers. The APIs
    are registered here by Connexion as with its own (validate_responses per API)."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        self.checked: dict[str, ResponseValidationOperation] = {}

    def add_api(self, *args: Any, **kwargs: Any) -> Any:
        api = super().add_api(*args, **kwargs)
        # RoutedAPI.operations: operation id -> the operation's validation, or next_app
        # itself where the API's responses are not validated.
        self.checked.update((operation_id, operation)
                            for operation_id, operation in api.operations.items()
                            if isinstance(operation, ResponseValidationOperation))
        return api

    async def checking(self, operation_id: str, scope: Scope, send: Send) -> Send:
        """send, checking the answer against the operation's responses as Connexion's
        response validation does; send itself where the operation's are not validated.
        Connexion builds its checking send inside ResponseValidationOperation.__call__ and
        hands it to the next app: a copy whose next app hands it back takes it as it is."""
        operation = self.checked.get(operation_id)
        if operation is None:
            return send
        taken: list[Send] = []

        async def take(_scope: Scope, _receive: Receive, checking: Send) -> None:
            taken.append(checking)

        probe = copy.copy(operation)
        probe.next_app = take
        await probe(scope, _no_receive, send)
        return taken[0]


async def _no_receive() -> Any:
    raise RuntimeError("a response check reads no request")


class SpecificFirstSwaggerUIMiddleware(SwaggerUIMiddleware):
    """Connexion's document and UI server, with its mounts tried most specific first
    (see _specific_first): otherwise /v1/openapi.json and /v1/ui/ are hidden.

    Requests for any other path (all of the API's) go straight on: Starlette's router would
    try every route of every mount before handing them on, a tenth of a small request's
    cost."""

    def __init__(self, app: ASGIApp) -> None:
        super().__init__(app)
        self.served: tuple[str, ...] = ()  # path prefixes of the document server's routes

    def add_api(self, *args: Any, **kwargs: Any) -> None:
        super().add_api(*args, **kwargs)
        _specific_first(self.router)
        self.served = tuple(
            mount.path + route.path
            for mount in self.router.routes if isinstance(mount, Mount)
            for route in getattr(mount.app, "routes", ()))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith(self.served):
            await self.app(scope, receive, send)
            return
        await super().__call__(scope, receive, send)


class PreparedRequestValidation(RequestValidationOperation):
    """The body read within its limit (bodies.py, D22), then Connexion's request
    validation of one operation, in Connexion's order, with its
    validators made on first use, not for every request: the parameter validator (and the
    URI parser it holds), a good part of what Connexion costs a small request, and for
    each media type the body validator, whose jsonschema validator Connexion also builds
    anew for every request (docs/performance.md has both costs). All of them depend
    only on the operation (and the media type); none keeps anything of a request."""

    def __init__(self, next_app: ASGIApp, *, operation: Any, strict_validation: bool = False,
                 validator_map: dict[str, Any] | None = None) -> None:
        super().__init__(next_app, operation=operation, strict_validation=strict_validation,
                         validator_map=validator_map)
        # What Connexion's __init__ keeps under private names, kept here as it takes them.
        self.operation = operation
        self.validators = {**CONNEXION_VALIDATORS, **(validator_map or {})}
        self.parameters: Any = None
        self.bodies: dict[tuple[str, str], Any] = {}  # (media type, encoding) -> validator

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # The body first, within its limit (D22): a body too large is refused before any
        # parameter is looked at.
        scope, receive = await bodies.bounded(scope, receive)
        operation = self.operation
        if self.parameters is None:
            self.parameters = self.validators["parameter"](
                operation.parameters,
                uri_parser=operation.uri_parser_class(operation.parameters,
                                                      operation.body_definition()),
                strict_validation=self.strict_validation,
                security_query_params=self.security_query_params,
            )
        self.parameters.validate(scope)
        if operation.request_body:
            mime_type, encoding = self.extract_content_type(scope["headers"])
            self.validate_mime_type(mime_type)
            if (mime_type, encoding) not in self.bodies:
                self.bodies[mime_type, encoding] = self._body_validator(mime_type, encoding)
            validator = self.bodies[mime_type, encoding]
            if validator is not None:
                receive, scope = await validator.wrap_receive(receive, scope=scope)
        await self.next_app(scope, receive, send)

    def _body_validator(self, mime_type: str, encoding: str) -> Any:
        """The body validator Connexion's RequestValidationOperation makes for a media
        type, or None where it validates nothing (no schema, or no validator for it)."""
        operation = self.operation
        schema = operation.body_schema(mime_type)
        if not schema:
            return None
        try:
            validator_class = self.validators["body"][mime_type]
        except KeyError:
            return None
        return validator_class(
            schema=schema,
            required=operation.request_body.get("required", False),
            nullable=is_nullable(operation.body_definition(mime_type)),
            encoding=encoding,
            strict_validation=self.strict_validation,
            uri_parser=operation.uri_parser_class(operation.parameters,
                                                  operation.body_definition()),
        )


class PreparedRequestValidationAPI(RequestValidationAPI):
    def make_operation(self, operation: Any) -> RequestValidationOperation:
        return PreparedRequestValidation(self.next_app, operation=operation,
                                         strict_validation=self.strict_validation,
                                         validator_map=self.validator_map)


class PreparedRequestValidationMiddleware(RequestValidationMiddleware):
    api_cls = PreparedRequestValidationAPI


def resolved(document: dict[str, Any]) -> dict[str, Any]:
    """A copy of an OpenAPI document with every $ref replaced by what it names, as
    Connexion's Specification resolves it before building its validators."""
    found: dict[str, Any] = resolve_refs(document)
    return found
