"""The rules of the contract review: what changed between a base and a revision of an
OpenAPI document, each change named by its oasdiff rule id and level (DESIGN.md D29).

The ids and levels are oasdiff's (checker/rules.go and the messages of its checker), so
that a reviewer can look a finding up where they are documented. A change the table
below has no id for is not reported. The sentences are this project's own.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from app.core.contract.loader import Document, YMap

ERR, WARN, INFO = "ERR", "WARN", "INFO"
SEVERITY = {INFO: 0, WARN: 1, ERR: 2}

#: Every rule the review applies: oasdiff's id and level.
RULES: dict[str, str] = {
    # Paths and operations
    "endpoint-added": INFO,
    "endpoint-deprecated": INFO,
    "endpoint-reactivated": INFO,
    "api-path-removed-without-deprecation": ERR,
    "api-path-removed-with-deprecation": INFO,
    "api-path-removed-before-sunset": ERR,
    "api-path-sunset-parse": ERR,
    "api-removed-without-deprecation": ERR,
    "api-removed-with-deprecation": INFO,
    "api-removed-before-sunset": ERR,
    # Security
    "api-security-added": INFO,
    "api-security-removed": INFO,
    "api-security-scope-added": INFO,
    "api-security-scope-removed": INFO,
    "api-global-security-added": INFO,
    "api-global-security-removed": INFO,
    "api-global-security-scope-added": INFO,
    "api-global-security-scope-removed": INFO,
    # Request parameters
    "new-required-request-parameter": ERR,
    "new-optional-request-parameter": INFO,
    "new-request-path-parameter": ERR,
    "request-parameter-removed": WARN,
    "request-parameter-became-required": ERR,
    "request-parameter-became-optional": INFO,
    "request-parameter-type-changed": ERR,
    "request-parameter-type-generalized": INFO,
    "request-parameter-became-nullable": INFO,
    "request-parameter-became-not-nullable": ERR,
    "request-parameter-became-enum": ERR,
    "request-parameter-enum-value-removed": ERR,
    "request-parameter-enum-value-added": INFO,
    "request-parameter-min-increased": ERR,
    "request-parameter-min-decreased": INFO,
    "request-parameter-min-set": WARN,
    "request-parameter-max-decreased": ERR,
    "request-parameter-max-increased": INFO,
    "request-parameter-max-set": WARN,
    "request-parameter-min-length-increased": ERR,
    "request-parameter-min-length-decreased": INFO,
    "request-parameter-max-length-decreased": ERR,
    "request-parameter-max-length-increased": INFO,
    "request-parameter-max-length-set": WARN,
    "request-parameter-min-items-increased": ERR,
    "request-parameter-min-items-decreased": INFO,
    "request-parameter-min-items-set": WARN,
    "request-parameter-max-items-decreased": ERR,
    "request-parameter-max-items-increased": INFO,
    "request-parameter-pattern-added": WARN,
    "request-parameter-pattern-changed": WARN,
    "request-parameter-pattern-removed": INFO,
    # Request bodies
    "request-body-added-required": ERR,
    "request-body-added-optional": INFO,
    "request-body-removed": ERR,
    "request-body-became-required": ERR,
    "request-body-became-optional": INFO,
    "request-body-media-type-removed": ERR,
    "request-body-media-type-added": INFO,
    "request-body-type-changed": ERR,
    "request-body-type-generalized": INFO,
    "request-body-became-nullable": INFO,
    "request-body-became-not-nullable": ERR,
    "request-body-became-enum": ERR,
    "request-body-enum-value-removed": ERR,
    "request-body-min-increased": ERR,
    "request-body-min-decreased": INFO,
    "request-body-min-set": WARN,
    "request-body-max-decreased": ERR,
    "request-body-max-increased": INFO,
    "request-body-max-set": WARN,
    "request-body-min-length-increased": ERR,
    "request-body-min-length-decreased": INFO,
    "request-body-max-length-decreased": ERR,
    "request-body-max-length-increased": INFO,
    "request-body-max-length-set": WARN,
    "request-body-min-items-increased": ERR,
    "request-body-min-items-set": WARN,
    # Request body properties
    "new-required-request-property": ERR,
    "new-required-request-property-with-default": INFO,
    "new-optional-request-property": INFO,
    "request-property-removed": WARN,
    "request-property-became-required": ERR,
    "request-property-became-required-with-default": INFO,
    "request-property-became-optional": INFO,
    "request-property-type-changed": ERR,
    "request-property-type-generalized": INFO,
    "request-property-became-nullable": INFO,
    "request-property-became-not-nullable": ERR,
    "request-property-became-enum": ERR,
    "request-property-enum-value-removed": ERR,
    "request-property-enum-value-added": INFO,
    "request-property-min-increased": ERR,
    "request-property-min-decreased": INFO,
    "request-property-min-set": WARN,
    "request-property-max-decreased": ERR,
    "request-property-max-increased": INFO,
    "request-property-max-set": WARN,
    "request-property-min-length-increased": ERR,
    "request-property-min-length-decreased": INFO,
    "request-property-max-length-decreased": ERR,
    "request-property-max-length-increased": INFO,
    "request-property-max-length-set": WARN,
    "request-property-min-items-increased": ERR,
    "request-property-min-items-set": WARN,
    "request-property-pattern-added": WARN,
    "request-property-pattern-changed": WARN,
    "request-property-pattern-removed": INFO,
    # Responses
    "response-success-status-removed": ERR,
    "response-success-status-added": INFO,
    "response-non-success-status-removed": INFO,
    "response-non-success-status-added": INFO,
    "response-media-type-removed": ERR,
    "response-media-type-added": INFO,
    "required-response-header-removed": ERR,
    "optional-response-header-removed": WARN,
    "response-header-became-optional": ERR,
    "response-header-added": INFO,
    "response-body-type-changed": ERR,
    "response-body-became-nullable": ERR,
    "response-body-became-not-nullable": INFO,
    "response-body-max-increased": ERR,
    "response-body-min-decreased": ERR,
    "response-body-max-length-increased": ERR,
    "response-body-max-length-unset": ERR,
    "response-body-min-length-decreased": ERR,
    "response-body-min-items-decreased": ERR,
    "response-body-min-items-unset": ERR,
    # Response body properties
    "response-required-property-removed": ERR,
    "response-optional-property-removed": WARN,
    "response-required-property-added": INFO,
    "response-optional-property-added": INFO,
    "response-property-became-optional": ERR,
    "response-property-became-required": INFO,
    "response-property-became-nullable": ERR,
    "response-property-became-not-nullable": INFO,
    "response-property-type-changed": ERR,
    "response-property-enum-value-added": WARN,
    "response-property-enum-value-removed": INFO,
    "response-property-max-increased": ERR,
    "response-property-min-decreased": ERR,
    "response-property-max-length-increased": ERR,
    "response-property-max-length-unset": ERR,
    "response-property-min-length-decreased": ERR,
    "response-property-min-items-decreased": ERR,
    "response-property-min-items-unset": ERR,
    "response-property-pattern-added": INFO,
    "response-property-pattern-changed": INFO,
    "response-property-pattern-removed": INFO,
}

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")

#: Bounds as (keyword, its word in a rule id): `request-parameter-max-decreased`. Whether a
#: change is ERR or INFO is the table's: a lower maximum is ERR in a request, a higher one
#: ERR in a response; a change the table has no id for is not reported.
_BOUNDS = (("minimum", "min"), ("maximum", "max"), ("minLength", "min-length"),
           ("maxLength", "max-length"), ("minItems", "min-items"), ("maxItems", "max-items"))


@dataclass(frozen=True)
class Finding:
    """One change between base and revision: oasdiff's rule id and level, the operation
    (`GET /store/orders`; '' for the whole document) and its path, a sentence, and the
    FILE:LINE it is about (the revision's, or the base's for what was removed)."""

    id: str
    level: str
    operation: str
    path: str
    text: str
    source: str

    def as_dict(self) -> dict[str, str]:
        """The finding as the JSON format prints it."""
        return asdict(self)


@dataclass(frozen=True)
class _Op:
    """The operation a finding is about."""

    method: str
    path: str

    @property
    def name(self) -> str:
        return f"{self.method.upper()} {self.path}" if self.method else ""


_DOCUMENT = _Op("", "")


@dataclass(frozen=True)
class _Where:
    """Where in an operation a schema is: what the rule ids begin with and how the
    sentence names it."""

    direction: str  # "request" or "response"
    kind: str  # "parameter" or "body"
    subject: str  # "the query request parameter limit", or the status of a response
    prop: str = ""  # the property's path below the body ("orders/items/petId")

    @property
    def prefix(self) -> str:
        if self.kind == "parameter":
            return "request-parameter"
        return f"{self.direction}-{'property' if self.prop else 'body'}"

    @property
    def name(self) -> str:
        if self.kind == "parameter":
            return self.subject
        if self.direction == "request":
            return f"the request property {self.prop}" if self.prop else "the request body"
        if self.prop:
            return f"the response property {self.prop} (status {self.subject})"
        return f"the response body (status {self.subject})"

    def below(self, step: str) -> _Where:
        if self.kind == "parameter":
            return self
        prop = f"{self.prop}/{step}" if self.prop else step
        return _Where(self.direction, self.kind, self.subject, prop)


def diff_documents(base: Document, revision: Document,
                   today: dt.date | None = None) -> list[Finding]:
    """Every finding between base and revision, sorted by path, method, level (ERR first)
    and rule id. today (for `x-sunset`) is today's date in UTC unless given."""
    checker = _Checker(base, revision, today or dt.datetime.now(dt.UTC).date())
    checker.run()
    return sorted(set(checker.findings), key=_order)


def _order(finding: Finding) -> tuple[Any, ...]:
    method = finding.operation.split(" ", 1)[0].lower()
    rank = METHODS.index(method) if method in METHODS else -1
    return (finding.path, rank, -SEVERITY[finding.level], finding.id, finding.text,
            finding.source)


def _path_key(path: str) -> str:
    """A path with its parameters' names left out: /a/{id} and /a/{orderId} are one path."""
    out, depth = [], 0
    for char in path:
        if char == "{":
            depth += 1
            out.append("{}")
        elif char == "}":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(char)
    return "".join(out)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class _Checker:
    def __init__(self, base: Document, revision: Document, today: dt.date) -> None:
        self.base = base
        self.rev = revision
        self.today = today
        self.findings: list[Finding] = []
        self._comparing: set[tuple[int, int, str]] = set()

    def add(self, rule: str, op: _Op, text: str, source: str) -> None:
        self.findings.append(Finding(rule, RULES[rule], op.name, op.path, text, source))

    def at_rev(self, node: Any, key: Any = None) -> str:
        return self.rev.where(_line(node, key))

    def at_base(self, node: Any, key: Any = None) -> str:
        return self.base.where(_line(node, key))

    # -- paths and operations -------------------------------------------------------------

    def run(self) -> None:
        self.security(_DOCUMENT, self.base.root, self.rev.root, "api-global-security")
        base_paths = _mapping(self.base.root.get("paths"))
        rev_paths = _mapping(self.rev.root.get("paths"))
        base_keys = {_path_key(str(p)): p for p in base_paths}
        rev_keys = {_path_key(str(p)): p for p in rev_paths}
        for key, path in base_keys.items():
            if key not in rev_keys:
                item = self.base.resolve(base_paths[path])
                for method, op in _operations(item):
                    self.removed(_Op(method, str(path)), op, item, whole_path=True)
        for key, path in rev_keys.items():
            rev_item = self.rev.resolve(rev_paths[path])
            if key not in base_keys:
                for method, _ in _operations(rev_item):
                    self.add("endpoint-added", _Op(method, str(path)), "endpoint added",
                             self.at_rev(rev_item, method))
                continue
            base_item = self.base.resolve(base_paths[base_keys[key]])
            base_ops = dict(_operations(base_item))
            rev_ops = dict(_operations(rev_item))
            for method, op in base_ops.items():
                if method not in rev_ops:
                    self.removed(_Op(method, str(path)), op, base_item, whole_path=False)
            for method, op in rev_ops.items():
                where = _Op(method, str(path))
                if method not in base_ops:
                    self.add("endpoint-added", where, "endpoint added",
                             self.at_rev(rev_item, method))
                else:
                    self.operation(where, base_item, base_ops[method], rev_item, op)

    def removed(self, op: _Op, node: YMap, item: YMap, whole_path: bool) -> None:
        prefix = "api-path" if whole_path else "api"
        what = "the path" if whole_path else "the operation"
        source = self.at_base(item, op.method)
        if node.get("deprecated") is not True:
            self.add(f"{prefix}-removed-without-deprecation", op,
                     f"{what} was removed without being deprecated first", source)
            return
        if "x-sunset" not in node:
            self.add(f"{prefix}-removed-with-deprecation", op,
                     f"{what} was removed after being deprecated (no x-sunset was set)", source)
            return
        sunset = _sunset_date(node["x-sunset"])
        if sunset is None:
            self.add("api-path-sunset-parse", op,
                     f"{what} was removed, and its x-sunset {_show(node['x-sunset'])!r} is not "
                     "a date (YYYY-MM-DD or an RFC 3339 date-time)",
                     self.at_base(node, "x-sunset"))
        elif self.today < sunset:
            self.add(f"{prefix}-removed-before-sunset", op,
                     f"{what} was removed before its sunset date {sunset.isoformat()}", source)

    def operation(self, op: _Op, base_item: YMap, base: YMap, rev_item: YMap, rev: YMap) -> None:
        if base.get("deprecated") is not True and rev.get("deprecated") is True:
            self.add("endpoint-deprecated", op, "endpoint deprecated",
                     self.at_rev(rev, "deprecated"))
        elif base.get("deprecated") is True and rev.get("deprecated") is not True:
            self.add("endpoint-reactivated", op, "endpoint reactivated (no longer deprecated)",
                     self.at_rev(rev))
        self.security(op, base, rev, "api-security")
        self.parameters(op, base_item, base, rev_item, rev)
        self.request_body(op, base, rev)
        self.responses(op, base, rev)

    # -- security -------------------------------------------------------------------------

    def security(self, op: _Op, base: YMap, rev: YMap, prefix: str) -> None:
        """The security requirements of the document (op is _DOCUMENT) or an operation."""
        base_reqs = _requirements(base.get("security"))
        rev_reqs = _requirements(rev.get("security"))
        source = self.at_rev(rev, "security")
        where = "the document" if not op.method else "the operation"
        for name in base_reqs.keys() - rev_reqs.keys():
            self.add(f"{prefix}-removed", op,
                     f"the security requirement {name} was removed from {where}",
                     self.at_base(base, "security"))
        for name in rev_reqs.keys() - base_reqs.keys():
            self.add(f"{prefix}-added", op,
                     f"the security requirement {name} was added to {where}", source)
        for name in base_reqs.keys() & rev_reqs.keys():
            for scheme, scopes in rev_reqs[name].items():
                old = base_reqs[name].get(scheme, [])
                for scope in [s for s in scopes if s not in old]:
                    self.add(f"{prefix}-scope-added", op,
                             f"the scope {scope} was added to the security scheme {scheme}",
                             source)
                for scope in [s for s in old if s not in scopes]:
                    self.add(f"{prefix}-scope-removed", op,
                             f"the scope {scope} was removed from the security scheme {scheme}",
                             source)

    # -- parameters -----------------------------------------------------------------------

    def parameters(self, op: _Op, base_item: YMap, base: YMap, rev_item: YMap,
                   rev: YMap) -> None:
        base_params = _parameters(self.base, base_item, base)
        rev_params = _parameters(self.rev, rev_item, rev)
        for key, (param, item) in base_params.items():
            if key not in rev_params:
                self.add("request-parameter-removed", op,
                         f"the {key[0]} request parameter {param.get('name')} was removed",
                         self.at_base(item))
        for key, (param, item) in rev_params.items():
            name = f"the {key[0]} request parameter {param.get('name')}"
            if key not in base_params:
                if key[0] == "path":
                    rule, text = "new-request-path-parameter", f"added {name}"
                elif param.get("required") is True:
                    rule, text = "new-required-request-parameter", f"added {name}, required"
                else:
                    rule, text = "new-optional-request-parameter", f"added {name}, optional"
                self.add(rule, op, text, self.at_rev(item))
                continue
            old, _ = base_params[key]
            was, now = old.get("required") is True, param.get("required") is True
            if now and not was:
                self.add("request-parameter-became-required", op, f"{name} became required",
                         self.at_rev(param, "required"))
            elif was and not now:
                self.add("request-parameter-became-optional", op, f"{name} became optional",
                         self.at_rev(param, "required") if "required" in param
                         else self.at_rev(param))
            self.schema(op, _Where("request", "parameter", name),
                        self.base.schema(_param_schema(old)), self.rev.schema(_param_schema(param)))

    # -- request bodies -------------------------------------------------------------------

    def request_body(self, op: _Op, base_op: YMap, rev_op: YMap) -> None:
        base = self.base.resolve(base_op.get("requestBody"))
        rev = self.rev.resolve(rev_op.get("requestBody"))
        if not isinstance(base, YMap) and not isinstance(rev, YMap):
            return
        if not isinstance(base, YMap):
            if rev.get("required") is True:
                self.add("request-body-added-required", op, "a required request body was added",
                         self.at_rev(rev_op, "requestBody"))
            else:
                self.add("request-body-added-optional", op, "an optional request body was added",
                         self.at_rev(rev_op, "requestBody"))
            return
        if not isinstance(rev, YMap):
            self.add("request-body-removed", op, "the request body was removed",
                     self.at_base(base_op, "requestBody"))
            return
        was, now = base.get("required") is True, rev.get("required") is True
        if now and not was:
            self.add("request-body-became-required", op, "the request body became required",
                     self.at_rev(rev, "required"))
        elif was and not now:
            self.add("request-body-became-optional", op, "the request body became optional",
                     self.at_rev(rev, "required") if "required" in rev else self.at_rev(rev))
        base_media, rev_media = _mapping(base.get("content")), _mapping(rev.get("content"))
        for media in base_media.keys() - rev_media.keys():
            self.add("request-body-media-type-removed", op,
                     f"the media type {media} was removed from the request body",
                     self.at_base(base_media, media))
        for media in rev_media.keys() - base_media.keys():
            self.add("request-body-media-type-added", op,
                     f"the media type {media} was added to the request body",
                     self.at_rev(rev_media, media))
        for media in sorted(base_media.keys() & rev_media.keys()):
            self.schema(op, _Where("request", "body", str(media)),
                        self.base.schema(_mapping(base_media[media]).get("schema")),
                        self.rev.schema(_mapping(rev_media[media]).get("schema")))

    # -- responses ------------------------------------------------------------------------

    def responses(self, op: _Op, base_op: YMap, rev_op: YMap) -> None:
        base_all = _mapping(base_op.get("responses"))
        rev_all = _mapping(rev_op.get("responses"))
        base_codes = {str(code): code for code in base_all}
        rev_codes = {str(code): code for code in rev_all}
        for code in base_codes.keys() - rev_codes.keys():
            kind = "success" if _success(code) else "non-success"
            self.add(f"response-{kind}-status-removed", op,
                     f"the {kind} response with the status {code} was removed",
                     self.at_base(base_all, base_codes[code]))
        for code in rev_codes.keys() - base_codes.keys():
            kind = "success" if _success(code) else "non-success"
            self.add(f"response-{kind}-status-added", op,
                     f"the {kind} response with the status {code} was added",
                     self.at_rev(rev_all, rev_codes[code]))
        for code in sorted(base_codes.keys() & rev_codes.keys()):
            base = self.base.resolve(base_all[base_codes[code]])
            rev = self.rev.resolve(rev_all[rev_codes[code]])
            if isinstance(base, YMap) and isinstance(rev, YMap):
                self.response(op, code, base, rev)

    def response(self, op: _Op, code: str, base: YMap, rev: YMap) -> None:
        base_media, rev_media = _mapping(base.get("content")), _mapping(rev.get("content"))
        for media in base_media.keys() - rev_media.keys():
            self.add("response-media-type-removed", op,
                     f"the media type {media} was removed from the response with the status "
                     f"{code}", self.at_base(base_media, media))
        for media in rev_media.keys() - base_media.keys():
            self.add("response-media-type-added", op,
                     f"the media type {media} was added to the response with the status {code}",
                     self.at_rev(rev_media, media))
        for media in sorted(base_media.keys() & rev_media.keys()):
            self.schema(op, _Where("response", "body", code),
                        self.base.schema(_mapping(base_media[media]).get("schema")),
                        self.rev.schema(_mapping(rev_media[media]).get("schema")))
        base_map = _mapping(base.get("headers"))
        base_headers = {str(k).lower(): (str(k), v) for k, v in base_map.items()}
        rev_map = _mapping(rev.get("headers"))
        rev_headers = {str(k).lower(): (str(k), v) for k, v in rev_map.items()}
        for key, (name, node) in base_headers.items():
            header = self.base.resolve(node)
            was_required = isinstance(header, YMap) and header.get("required") is True
            if key not in rev_headers:
                if was_required:
                    self.add("required-response-header-removed", op,
                             f"the required response header {name} was removed from the status "
                             f"{code}", self.at_base(base_map, name))
                else:
                    self.add("optional-response-header-removed", op,
                             f"the optional response header {name} was removed from the status "
                             f"{code}", self.at_base(base_map, name))
                continue
            rev_name, rev_node = rev_headers[key]
            now = self.rev.resolve(rev_node)
            if was_required and not (isinstance(now, YMap) and now.get("required") is True):
                self.add("response-header-became-optional", op,
                         f"the response header {name} became optional for the status {code}",
                         self.at_rev(rev_map, rev_name))
        for key, (name, _) in rev_headers.items():
            if key not in base_headers:
                self.add("response-header-added", op,
                         f"the response header {name} was added for the status {code}",
                         self.at_rev(rev_map, name))

    # -- schemas --------------------------------------------------------------------------

    def schema(self, op: _Op, where: _Where, base: YMap | None, rev: YMap | None) -> None:
        if base is None or rev is None:
            return
        key = (id(base), id(rev), where.prefix + where.name)
        if key in self._comparing:  # a recursive schema met again
            return
        self._comparing.add(key)
        try:
            self._schema(op, where, base, rev)
        finally:
            self._comparing.discard(key)

    def _emit(self, rule: str, op: _Op, text: str, source: str) -> None:
        if rule in RULES:
            self.add(rule, op, text, source)

    def _schema(self, op: _Op, where: _Where, base: YMap, rev: YMap) -> None:
        prefix, name = where.prefix, where.name
        request = where.direction == "request"
        base_type, rev_type = _type(base), _type(rev)
        if base_type != rev_type:
            widened = request and _widens(base, rev)
            rule = f"{prefix}-type-{'generalized' if widened else 'changed'}"
            self._emit(rule, op, f"the type/format of {name} was changed from "
                       f"{base_type or 'any'} to {rev_type or 'any'}",
                       self.at_rev(rev, "type" if "type" in rev else "format"))
        was, now = _nullable(base), _nullable(rev)
        if was != now:
            rule = f"{prefix}-became-{'nullable' if now else 'not-nullable'}"
            self._emit(rule, op, f"{name} became {'nullable' if now else 'not nullable'}",
                       self.at_rev(rev, "nullable" if "nullable" in rev else "type"))
        self.enum(op, where, base, rev)
        self.bounds(op, where, base, rev)
        self.pattern(op, where, base, rev)
        self.properties(op, where, base, rev)
        if "items" in base and "items" in rev:
            self.schema(op, where.below("items"), self.base.schema(base["items"]),
                        self.rev.schema(rev["items"]))

    def enum(self, op: _Op, where: _Where, base: YMap, rev: YMap) -> None:
        prefix, name = where.prefix, where.name
        old, new = base.get("enum"), rev.get("enum")
        if not isinstance(new, list):
            return
        source = self.at_rev(rev, "enum")
        if not isinstance(old, list):
            if where.direction == "request":
                self._emit(f"{prefix}-became-enum", op,
                           f"{name} was restricted to a list of enum values", source)
            return
        for value in [v for v in old if v not in new]:
            self._emit(f"{prefix}-enum-value-removed", op,
                       f"the enum value {_show(value)} was removed from {name}", source)
        for value in [v for v in new if v not in old]:
            self._emit(f"{prefix}-enum-value-added", op,
                       f"the enum value {_show(value)} was added to {name}", source)

    def bounds(self, op: _Op, where: _Where, base: YMap, rev: YMap) -> None:
        for keyword, word in _BOUNDS:
            old: Any = base.get(keyword)
            new: Any = rev.get(keyword)
            if old == new:
                continue
            if _is_number(old) and _is_number(new):
                change = "increased" if new > old else "decreased"
                text = f"the {keyword} of {where.name} was {change} from {old} to {new}"
                self._emit(f"{where.prefix}-{word}-{change}", op, text, self.at_rev(rev, keyword))
            elif new is not None and old is None:
                self._emit(f"{where.prefix}-{word}-set", op,
                           f"the {keyword} of {where.name} was set to {new}",
                           self.at_rev(rev, keyword))
            elif old is not None and new is None:
                self._emit(f"{where.prefix}-{word}-unset", op,
                           f"the {keyword} {old} of {where.name} was removed",
                           self.at_base(base, keyword))

    def pattern(self, op: _Op, where: _Where, base: YMap, rev: YMap) -> None:
        old, new = base.get("pattern"), rev.get("pattern")
        if old == new:
            return
        if old is None:
            self._emit(f"{where.prefix}-pattern-added", op,
                       f"the pattern {new} was added to {where.name}", self.at_rev(rev, "pattern"))
        elif new is None:
            self._emit(f"{where.prefix}-pattern-removed", op,
                       f"the pattern {old} was removed from {where.name}",
                       self.at_base(base, "pattern"))
        else:
            self._emit(f"{where.prefix}-pattern-changed", op,
                       f"the pattern of {where.name} was changed from {old} to {new}",
                       self.at_rev(rev, "pattern"))

    def properties(self, op: _Op, where: _Where, base: YMap, rev: YMap) -> None:
        if where.kind == "parameter":
            return
        base_props, rev_props = _mapping(base.get("properties")), _mapping(rev.get("properties"))
        base_req, rev_req = _required(base), _required(rev)
        request = where.direction == "request"
        hidden = "readOnly" if request else "writeOnly"  # absent from this direction
        for prop in base_props:
            old = self.base.schema(base_props[prop])
            if old is None or old.get(hidden) is True:
                continue
            child = where.below(str(prop))
            if prop not in rev_props:
                source = self.at_base(base_props, prop)
                if request:
                    self.add("request-property-removed", op, f"{child.name} was removed", source)
                elif prop in base_req:
                    self.add("response-required-property-removed", op,
                             f"the required property {child.prop} was removed from the response "
                             f"with the status {where.subject}", source)
                else:
                    self.add("response-optional-property-removed", op,
                             f"the optional property {child.prop} was removed from the response "
                             f"with the status {where.subject}", source)
                continue
            new = self.rev.schema(rev_props[prop])
            if new is None:
                continue
            was, now = prop in base_req, prop in rev_req
            source = self.at_rev(rev, "required") if "required" in rev else self.at_rev(rev)
            if request and now and not was:
                rule = "request-property-became-required" + (
                    "-with-default" if "default" in new else "")
                self.add(rule, op, f"{child.name} became required", source)
            elif request and was and not now:
                self.add("request-property-became-optional", op,
                         f"{child.name} became optional", source)
            elif not request and was and not now:
                self.add("response-property-became-optional", op,
                         f"{child.name} became optional", source)
            elif not request and now and not was:
                self.add("response-property-became-required", op,
                         f"{child.name} became required", source)
            self.schema(op, child, old, new)
        for prop in rev_props:
            if prop in base_props:
                continue
            new = self.rev.schema(rev_props[prop])
            if new is None or new.get(hidden) is True:
                continue
            child = where.below(str(prop))
            source = self.at_rev(rev_props, prop)
            required = prop in rev_req
            if request and required:
                rule = "new-required-request-property" + (
                    "-with-default" if "default" in new else "")
                self.add(rule, op, f"{child.name} was added, required", source)
            elif request:
                self.add("new-optional-request-property", op,
                         f"{child.name} was added, optional", source)
            else:
                kind = "required" if required else "optional"
                self.add(f"response-{kind}-property-added", op,
                         f"the {kind} property {child.prop} was added to the response with the "
                         f"status {where.subject}", source)


# -- helpers ----------------------------------------------------------------------------------


def _line(node: Any, key: Any = None) -> int:
    if isinstance(node, YMap):
        return node.line_of(key) if key is not None else node.line
    return 1


def _mapping(node: Any) -> YMap:
    return node if isinstance(node, YMap) else YMap()


def _operations(item: Any) -> Iterable[tuple[str, YMap]]:
    if not isinstance(item, YMap):
        return []
    return [(m, item[m]) for m in METHODS if isinstance(item.get(m), YMap)]


def _parameters(doc: Document, item: YMap, op: YMap) -> dict[tuple[str, str], tuple[YMap, YMap]]:
    """(in, name) -> (the parameter, the list item that declares it) of an operation, the
    path item's parameters overridden by the operation's own."""
    found: dict[tuple[str, str], tuple[YMap, YMap]] = {}
    for declared in (item.get("parameters"), op.get("parameters")):
        for entry in declared if isinstance(declared, list) else []:
            param = doc.resolve(entry)
            if not isinstance(param, YMap):
                continue
            where, name = str(param.get("in", "")), str(param.get("name", ""))
            found[(where, name.lower() if where == "header" else name)] = (param, entry)
    return found


def _param_schema(param: YMap) -> Any:
    if "schema" in param:
        return param["schema"]
    for media in _mapping(param.get("content")).values():
        return _mapping(media).get("schema")
    return None


def _requirements(security: Any) -> dict[str, dict[str, list[str]]]:
    found: dict[str, dict[str, list[str]]] = {}
    for requirement in security if isinstance(security, list) else []:
        if isinstance(requirement, dict):
            name = " + ".join(sorted(str(k) for k in requirement)) or "{} (none needed)"
            found[name] = {str(k): list(v or []) for k, v in requirement.items()}
    return found


def _required(schema: YMap) -> set[str]:
    required = schema.get("required")
    return {str(r) for r in required} if isinstance(required, list) else set()


def _types(schema: YMap) -> frozenset[str]:
    kind = schema.get("type")
    if isinstance(kind, list):
        return frozenset(str(k) for k in kind) - {"null"}
    return frozenset() if kind is None else frozenset({str(kind)})


def _type(schema: YMap) -> str:
    kinds = "|".join(sorted(_types(schema)))
    fmt = schema.get("format")
    return f"{kinds}/{fmt}" if fmt is not None else kinds


def _widens(base: YMap, rev: YMap) -> bool:
    """Whether the revision's type/format accepts everything the base's did."""
    old, new = _types(base), _types(rev)
    old_format, new_format = base.get("format"), rev.get("format")
    if old == {"integer"} and new == {"number"}:
        return new_format is None
    return bool(old) and old <= new and (new_format is None or new_format == old_format)


def _nullable(schema: YMap) -> bool:
    kind = schema.get("type")
    return schema.get("nullable") is True or (isinstance(kind, list) and "null" in kind)


def _success(code: str) -> bool:
    return code.startswith("2")


def _sunset_date(value: Any) -> dt.date | None:
    """x-sunset as oasdiff reads it: a date (YYYY-MM-DD) or an RFC 3339 date-time."""
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, dt.date):
        return value
    if not isinstance(value, str):
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).date()
    except ValueError:
        return None
