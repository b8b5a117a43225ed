"""The rules a value in a request can break, each with a plain sentence of our own rather
than jsonschema's or Python's wording, so that a client can show it beside the field: one
table for the request body, the parameters and headers, and the core's own checks (a
cursor, an Idempotency-Key), in v1 and v2 alike.

A rule is named by the JSON Schema keyword that states it (`required`, `type`, `minimum`,
`maxLength`, `enum`, `format`, `additionalProperties`, ...) or, for the checks no schema
states, by a name of its own (`printable_ascii`, `cursor_edited`, ...). Its entry gives the
predicate of the sentence, what follows the field's name as the client sent it:
"quantity" + "must be at least 1." The facts a predicate uses are the schema's own
(minimum, maxLength, enum, format...) and, for a few rules, words of the caller (the
members a body takes, what a header is for).

The sentences are ours: never jsonschema's or Python's wording, never a repr of the value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

Facts = Mapping[str, Any]

# The subject of a sentence about the request body as a whole (no one field at fault).
BODY = "The request body"


def _listed(values: Iterable[Any]) -> str:
    return ", ".join(str(value) for value in values)


def _range(facts: Facts) -> str:
    low, high = facts.get("minimum"), facts.get("maximum")
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" of at least {low}"
    if high is not None:
        return f" of at most {high}"
    return ""


def _type(facts: Facts) -> str:
    kind = facts.get("type")
    if kind == "integer":
        digits = " in plain decimal digits" if facts.get("text") else ""
        bounds = _range(facts)
        return f"must be a whole number{bounds}{',' if digits and bounds else ''}{digits}."
    if kind == "number":
        return f"must be a number{_range(facts)}."
    if kind == "boolean":
        return "must be true or false."
    if kind == "array":
        return "must be a list of values."
    if kind == "object":
        return "must be a JSON object."
    if kind == "string" and facts.get("format") == "date-time":
        return _format(facts)
    if kind == "string":
        return "must be a string of text."
    return "must be a value of another kind; see its schema in the API's document."


def _format(facts: Facts) -> str:
    kind = facts.get("format")
    if kind == "date-time":
        return "must be a date-time with an offset, such as 2026-12-01T10:00:00Z."
    if kind in ("uri", "url"):
        return "must be a URL, such as https://shop.example/hooks."
    return f"must be written as a {kind}."


# The documents' pattern of an http or https address (a pet's photos, in either case).
HTTP_URL_PATTERN = "^[Hh][Tt][Tt][Pp][Ss]?://"


def _pattern(facts: Facts) -> str:
    if str(facts.get("pattern", "")).startswith(HTTP_URL_PATTERN):
        return "must be an http or https URL, such as https://photos.example.com/rex.jpg."
    return "is not written in the form it takes; see its description in the API's document."


def _min_length(facts: Facts) -> str:
    if facts["minLength"] == 1 and facts.get("maxLength") and facts.get("what"):
        return f"must not be empty: it takes 1 to {facts['maxLength']} {facts['what']}."
    if facts["minLength"] == 1:
        return "must not be empty."
    return f"must be at least {facts['minLength']} characters long."


def _enum(facts: Facts) -> str:
    if facts.get("item"):
        return f"may list only these values: {_listed(facts['enum'])}."
    return f"must be one of {_listed(facts['enum'])}."


def _required(facts: Facts) -> str:
    purpose = facts.get("purpose")
    return f"is required: {purpose}." if purpose else "is required."


def _unknown(facts: Facts) -> str:
    where, known = facts.get("where", "member of this request body"), facts.get("known")
    if known:
        kind = "member" if where.startswith("member") else "query parameter"
        if len(known) == 1:
            return f"is not a {where}; its only {kind} is {known[0]}."
        return f"is not a {where}; its {kind}s are {_listed(known)}."
    return f"is not a {where}; it takes none."


def _printable(facts: Facts) -> str:
    return (f"must hold only printable ASCII characters (letters, digits, punctuation and "
            f"spaces), {facts['minLength']} to {facts['maxLength']} of them.")


def _too_long(facts: Facts) -> str:
    what = facts.get("what", "characters")
    return f"is too long: it may hold at most {facts['maxLength']} {what}."


# rule -> the predicate of its sentence, given the facts.
RULES: dict[str, Callable[[Facts], str]] = {
    # JSON Schema's keywords, as request validation meets them
    "required": _required,
    "type": _type,
    "minimum": lambda f: f"must be at least {f['minimum']}.",
    "maximum": lambda f: f"must be at most {f['maximum']}.",
    "minLength": _min_length,
    "maxLength": lambda f: f"must be at most {f['maxLength']} characters long.",
    "enum": _enum,
    "format": _format,
    "additionalProperties": _unknown,
    "minItems": lambda f: f"must list at least {f['minItems']} value(s).",
    "maxItems": lambda f: f"may list at most {f['maxItems']} values.",
    "uniqueItems": lambda f: "must not list one value twice.",
    "pattern": _pattern,
    # a whole request body
    "not_json": lambda f: "is not valid JSON.",
    "not_utf8": lambda f: "is not valid JSON: it is not UTF-8.",
    "lone_surrogate": lambda f: "is not valid JSON text: one of its \\u escapes stands for "
                                "half of a surrogate pair alone (such as \\ud800), which is "
                                "no character.",
    # the core's own checks
    "date_time_range": lambda f: "must be a date-time with an offset between the years 1 and "
                                 "9999 in UTC, such as 2026-12-01T10:00:00Z.",
    "printable_ascii": _printable,
    "too_long": _too_long,
    "cursor_edited": lambda f: "is not one this service gave out (it was changed or cut "
                               "short).",
    "cursor_other_query": lambda f: "belongs to other filters or another sort: send it with "
                                    "the same status, petId, complete, shipDateFrom, "
                                    "shipDateTo and sort as the page it came from.",
    "cursor_other_pet_query": lambda f: "belongs to other filters: send it with the same "
                                        "status, tag and category as the page it came "
                                        "from.",
    "stock_max": lambda f: f"would take the stock past {f['maximum']:,} units, the most a "
                           "pet may have.",
    "nonzero": lambda f: "must not be 0: a receipt of goods is a positive number of units, "
                         "a write-off a negative one.",
    "tag_length": lambda f: f"may list only tags of 1 to {f['maxLength']} characters.",
    "photo_url": lambda f: f"may list only http:// or https:// URLs with a host, of at most "
                           f"{f['maxLength']} characters and without spaces.",
    "null_name": lambda f: "cannot be removed: a pet always has a name.",
    # a name people read (D37, app.core.names)
    "readable_text": lambda f: "must not hold control characters (such as NUL, a tab, a "
                               "line break or ESC) or the characters that turn the "
                               "direction of text (U+202A to U+202E, U+2066 to U+2069): it "
                               "is text for a person to read.",
    "unknown_pet": lambda f: f"names no pet of this shop's catalogue (there is no pet "
                             f"{f['petId']}); order one of the pets GET /v1/pets lists.",
    # a webhook endpoint's URL (D28)
    "url_scheme": lambda f: "must begin with http:// or https://.",
    "url_userinfo": lambda f: "must not carry a user name or password (userinfo); the "
                              "messages are signed instead.",
    "url_spaces": lambda f: "must not hold spaces or control characters.",
    "url_invalid": lambda f: "is not a valid URL (its host or port).",
    "url_no_host": lambda f: "has no host.",
    "url_fragment": lambda f: "must not have a #fragment.",
    "unknown_type": lambda f: f"holds {f['type']}, not a message type; the types are "
                              f"{_listed(f['enum'])}.",
}

FALLBACK = "is not valid here; see its schema in the API's document."


def predicate(rule: str, facts: Facts | None = None) -> str:
    """What follows a field's name in the sentence of the rule it broke."""
    explain = RULES.get(rule)
    return explain(facts or {}) if explain else FALLBACK


def sentence(subject: str, rule: str, facts: Facts | None = None) -> str:
    """The sentence for a rule broken by a field (its name as the client sent it) or by the
    request body as a whole (BODY)."""
    return f"{subject} {predicate(rule, facts)}"
