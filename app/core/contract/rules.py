"""The rules of paths and operations of the contract review: operations removed (and how
`x-sunset` allows it) or added, deprecation, security, parameters, request bodies and
responses, each change named by its oasdiff rule id and level (D29). The rules of
the schemas within are in schemas.py; the ids and levels in catalog.py.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from app.core.contract.catalog import SEVERITY, Finding
from app.core.contract.loader import Document, YMap
from app.core.contract.schemas import DOCUMENT, Op, SchemaRules, Where, mapping, show

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


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



class _Checker(SchemaRules):
    """The rules of paths and operations, over the schema rules."""

    def run(self) -> None:
        """Every finding: the document's security, then each path and operation."""
        self.security(DOCUMENT, self.base.root, self.rev.root, "api-global-security")
        self.webhooks()
        base_paths = mapping(self.base.root.get("paths"))
        rev_paths = mapping(self.rev.root.get("paths"))
        base_keys = {_path_key(str(p)): p for p in base_paths}
        rev_keys = {_path_key(str(p)): p for p in rev_paths}
        for key, path in base_keys.items():
            if key not in rev_keys:
                item = self.base.resolve(base_paths[path])
                for method, op in _operations(item):
                    self.removed(Op(method, str(path)), op, item, whole_path=True)
        for key, path in rev_keys.items():
            rev_item = self.rev.resolve(rev_paths[path])
            if key not in base_keys:
                for method, _ in _operations(rev_item):
                    self.add("endpoint-added", Op(method, str(path)), "endpoint added",
                             self.at_rev(rev_item, method))
                continue
            base_item = self.base.resolve(base_paths[base_keys[key]])
            base_ops = dict(_operations(base_item))
            rev_ops = dict(_operations(rev_item))
            for method, op in base_ops.items():
                if method not in rev_ops:
                    self.removed(Op(method, str(path)), op, base_item, whole_path=False)
            for method, op in rev_ops.items():
                where = Op(method, str(path))
                if method not in base_ops:
                    self.add("endpoint-added", where, "endpoint added",
                             self.at_rev(rev_item, method))
                else:
                    self.operation(where, base_item, base_ops[method], rev_item, op)

    def removed(self, op: Op, node: YMap, item: YMap, whole_path: bool) -> None:
        """An operation of the base (node) that the revision has not, alone or with its
        whole path: allowed only once deprecated and past its x-sunset."""
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
                     f"{what} was removed, and its x-sunset {show(node['x-sunset'])!r} is not "
                     "a date (YYYY-MM-DD or an RFC 3339 date-time)",
                     self.at_base(node, "x-sunset"))
        elif self.today < sunset:
            self.add(f"{prefix}-removed-before-sunset", op,
                     f"{what} was removed before its sunset date {sunset.isoformat()}", source)

    def operation(self, op: Op, base_item: YMap, base: YMap, rev_item: YMap, rev: YMap) -> None:
        """An operation in both documents, compared (base_item and rev_item are its path's
        items, whose parameters it inherits)."""
        if base.get("deprecated") is not True and rev.get("deprecated") is True:
            self.deprecated(op, rev)
        elif base.get("deprecated") is True and rev.get("deprecated") is not True:
            self.add("endpoint-reactivated", op, "endpoint reactivated (no longer deprecated)",
                     self.at_rev(rev))
        self.security(op, base, rev, "api-security")
        self.parameters(op, base_item, base, rev_item, rev)
        self.request_body(op, base, rev)
        self.responses(op, base, rev)

    def webhooks(self) -> None:
        """Webhooks (OpenAPI 3.1's root `webhooks`) removed or added, by name."""
        base, rev = mapping(self.base.root.get("webhooks")), mapping(self.rev.root.get("webhooks"))
        for name in base.keys() - rev.keys():
            self.add("webhook-removed", DOCUMENT, f"the webhook {name} was removed",
                     self.at_base(base, name))
        for name in rev.keys() - base.keys():
            self.add("webhook-added", DOCUMENT, f"the webhook {name} was added",
                     self.at_rev(rev, name))

    def deprecated(self, op: Op, rev: YMap) -> None:
        """An operation newly deprecated: with no x-sunset, or one from today on, INFO; an
        x-sunset that is not a date, or is past already, ERR (oasdiff with no deprecation
        policy of days configured)."""
        if "x-sunset" not in rev:
            self.add("endpoint-deprecated", op, "endpoint deprecated",
                     self.at_rev(rev, "deprecated"))
            return
        sunset = _sunset_date(rev["x-sunset"])
        if sunset is None:
            self.add("api-deprecated-sunset-parse", op,
                     f"endpoint deprecated, and its x-sunset {show(rev['x-sunset'])!r} is not a "
                     "date (YYYY-MM-DD or an RFC 3339 date-time)", self.at_rev(rev, "x-sunset"))
        elif sunset < self.today:
            self.add("api-sunset-date-too-small", op,
                     f"endpoint deprecated with the sunset date {sunset.isoformat()}, which is "
                     "past already", self.at_rev(rev, "x-sunset"))
        else:
            self.add("endpoint-deprecated", op,
                     f"endpoint deprecated, with the sunset date {sunset.isoformat()}",
                     self.at_rev(rev, "deprecated"))

    # -- security -------------------------------------------------------------------------

    def security(self, op: Op, base: YMap, rev: YMap, prefix: str) -> None:
        """The security requirements of the document (op is DOCUMENT) or an operation."""
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

    def parameters(self, op: Op, base_item: YMap, base: YMap, rev_item: YMap,
                   rev: YMap) -> None:
        """Parameters added or removed, made required or optional, and their schemas."""
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
            self.schema(op, Where("request", "parameter", name),
                        self.base.schema(_param_schema(old)), self.rev.schema(_param_schema(param)))

    # -- request bodies -------------------------------------------------------------------

    def request_body(self, op: Op, base_op: YMap, rev_op: YMap) -> None:
        """The request body added, removed, made required or optional, its media types
        and their schemas."""
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
        base_media, rev_media = mapping(base.get("content")), mapping(rev.get("content"))
        for media in base_media.keys() - rev_media.keys():
            self.add("request-body-media-type-removed", op,
                     f"the media type {media} was removed from the request body",
                     self.at_base(base_media, media))
        for media in rev_media.keys() - base_media.keys():
            self.add("request-body-media-type-added", op,
                     f"the media type {media} was added to the request body",
                     self.at_rev(rev_media, media))
        for media in sorted(base_media.keys() & rev_media.keys()):
            self.schema(op, Where("request", "body", str(media)),
                        self.base.schema(mapping(base_media[media]).get("schema")),
                        self.rev.schema(mapping(rev_media[media]).get("schema")))

    # -- responses ------------------------------------------------------------------------

    def responses(self, op: Op, base_op: YMap, rev_op: YMap) -> None:
        """Statuses added or removed, and each response in both compared."""
        base_all = mapping(base_op.get("responses"))
        rev_all = mapping(rev_op.get("responses"))
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

    def response(self, op: Op, code: str, base: YMap, rev: YMap) -> None:
        """One response's media types and their schemas, and its headers."""
        base_media, rev_media = mapping(base.get("content")), mapping(rev.get("content"))
        for media in base_media.keys() - rev_media.keys():
            self.add("response-media-type-removed", op,
                     f"the media type {media} was removed from the response with the status "
                     f"{code}", self.at_base(base_media, media))
        for media in rev_media.keys() - base_media.keys():
            self.add("response-media-type-added", op,
                     f"the media type {media} was added to the response with the status {code}",
                     self.at_rev(rev_media, media))
        for media in sorted(base_media.keys() & rev_media.keys()):
            self.schema(op, Where("response", "body", code),
                        self.base.schema(mapping(base_media[media]).get("schema")),
                        self.rev.schema(mapping(rev_media[media]).get("schema")))
        base_map = mapping(base.get("headers"))
        base_headers = {str(k).lower(): (str(k), v) for k, v in base_map.items()}
        rev_map = mapping(rev.get("headers"))
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
    for media in mapping(param.get("content")).values():
        return mapping(media).get("schema")
    return None


def _requirements(security: Any) -> dict[str, dict[str, list[str]]]:
    found: dict[str, dict[str, list[str]]] = {}
    for requirement in security if isinstance(security, list) else []:
        if isinstance(requirement, dict):
            name = " + ".join(sorted(str(k) for k in requirement)) or "{} (none needed)"
            found[name] = {str(k): [str(s) for s in v] if isinstance(v, list) else []
                           for k, v in requirement.items()}
    return found


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
