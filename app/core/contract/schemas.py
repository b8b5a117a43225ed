"""The schema rules of the contract review: a schema of a parameter, a request body or a
response compared between base and revision (type, nullable, enum, bounds, pattern, and
properties, down through items and properties), each change named by its oasdiff rule id.

A request may not accept less than before; a response may not give more (or less that a
client counted on). Which of the two a change is, is the rule table's: the same change of a
bound is `request-...-max-decreased` (ERR) in a request and `response-...-max-increased`
(ERR) in a response; a change the table has no id for is not reported.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from app.core.contract.catalog import RULES, Finding
from app.core.contract.loader import Document, YMap

#: Bounds as (keyword, its word in a rule id): `request-parameter-max-decreased`. Whether a
#: change is ERR or INFO is the table's: a lower maximum is ERR in a request, a higher one
#: ERR in a response; a change the table has no id for is not reported.
_BOUNDS = (("minimum", "min"), ("maximum", "max"), ("minLength", "min-length"),
           ("maxLength", "max-length"), ("minItems", "min-items"), ("maxItems", "max-items"))


@dataclass(frozen=True)
class Op:
    """The operation a finding is about."""

    method: str
    path: str

    @property
    def name(self) -> str:
        return f"{self.method.upper()} {self.path}" if self.method else ""


DOCUMENT = Op("", "")


@dataclass(frozen=True)
class Where:
    """Where in an operation a schema is: what the rule ids begin with and how the
    sentence names it."""

    direction: str  # "request" or "response"
    kind: str  # "parameter" or "body"
    subject: str  # a parameter ("the query request parameter limit"), the status of a
    #               response ("200"), or the media type of a request body
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

    def below(self, step: str) -> Where:
        """Where a property (or `items`) of this schema is."""
        if self.kind == "parameter":
            return self
        prop = f"{self.prop}/{step}" if self.prop else step
        return Where(self.direction, self.kind, self.subject, prop)


def show(value: Any) -> str:
    """A YAML value as a sentence shows it (true, null, 5)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class SchemaRules:
    """What every rule needs (the two documents, the findings, FILE:LINE of a node) and
    the rules of schemas; the rules of paths and operations build on it."""

    def __init__(self, base: Document, revision: Document, today: dt.date) -> None:
        self.base = base
        self.rev = revision
        self.today = today
        self.findings: list[Finding] = []
        self._comparing: set[tuple[int, int, str]] = set()  # the pairs being compared

    def add(self, rule: str, op: Op, text: str, source: str) -> None:
        """A finding of rule (at the rule's level) about op."""
        self.findings.append(Finding(rule, RULES[rule], op.name, op.path, text, source))

    def at_rev(self, node: Any, key: Any = None) -> str:
        """FILE:LINE of node (of its key, when given) in the revision."""
        return self.rev.where(_line(node, key))

    def at_base(self, node: Any, key: Any = None) -> str:
        """FILE:LINE of node (of its key, when given) in the base."""
        return self.base.where(_line(node, key))

    # -- schemas --------------------------------------------------------------------------

    def schema(self, op: Op, where: Where, base: YMap | None, rev: YMap | None) -> None:
        """The findings between two schemas at where, down through properties and items."""
        if base is None or rev is None:
            return
        key = (id(base), id(rev), where.direction + where.kind)
        if key in self._comparing:  # a recursive schema met again
            return
        self._comparing.add(key)
        try:
            self._schema(op, where, base, rev)
        finally:
            self._comparing.discard(key)

    def _emit(self, rule: str, op: Op, text: str, source: str) -> None:
        """A finding of rule, if the table has that rule (not every place has every rule)."""
        if rule in RULES:
            self.add(rule, op, text, source)

    def _schema(self, op: Op, where: Where, base: YMap, rev: YMap) -> None:
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

    def enum(self, op: Op, where: Where, base: YMap, rev: YMap) -> None:
        """Enum values removed or added, or an enum newly set on a request."""
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
                       f"the enum value {show(value)} was removed from {name}", source)
        for value in [v for v in new if v not in old]:
            self._emit(f"{prefix}-enum-value-added", op,
                       f"the enum value {show(value)} was added to {name}", source)

    def bounds(self, op: Op, where: Where, base: YMap, rev: YMap) -> None:
        """minimum, maximum, minLength, maxLength, minItems, maxItems raised, lowered, set
        or removed."""
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

    def pattern(self, op: Op, where: Where, base: YMap, rev: YMap) -> None:
        """A pattern added, changed or removed."""
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

    def properties(self, op: Op, where: Where, base: YMap, rev: YMap) -> None:
        """Properties added or removed, made required or optional, and each compared."""
        if where.kind == "parameter":
            return
        base_props, rev_props = mapping(base.get("properties")), mapping(rev.get("properties"))
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


def mapping(node: Any) -> YMap:
    return node if isinstance(node, YMap) else YMap()


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
    if not new:  # any type now
        return new_format is None
    if old == {"integer"} and new == {"number"}:
        return new_format is None
    return bool(old) and old <= new and (new_format is None or new_format == old_format)


def _nullable(schema: YMap) -> bool:
    kind = schema.get("type")
    return schema.get("nullable") is True or (isinstance(kind, list) and "null" in kind)


