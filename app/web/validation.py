"""Request validation in our words, not jsonschema's. What jsonschema finds wrong with a parameter,
a header or the request body (its ValidationError: the keyword that failed, its value, the
path to the value, the schema) becomes the rule of app.core.problems it broke, the field at
fault as the client sent it (`param`), and that rule's sentence: never jsonschema's message.
connexion_internals hooks this into Connexion's parameter and body validators; the error
handlers (errors.py) answer the FieldProblem with the Error body, `param` in v2."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from connexion.exceptions import BadRequestProblem
from jsonschema import ValidationError

from app.core import orders, problems
from app.core.errors import InvalidParameter

# Parameters whose rule the core states better than their schema can: it says which part
# of the rule was broken (the Idempotency-Key missing, empty, too long, or not printable
# ASCII), where the schema has one pattern for all of them.
CORE_CHECKS: dict[str, Callable[[Any], Any]] = {orders.IDEMPOTENCY_KEY: orders.idempotency_key}


class FieldProblem(BadRequestProblem):
    """A 400 invalid_request about one field (param, its name as the client sent it) or
    about the request body as a whole (param None), with its sentence."""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(detail=message)
        self.message = message
        self.param = param

    @classmethod
    def of(cls, exc: InvalidParameter) -> FieldProblem:
        return cls(exc.sentence, exc.name)


# The subject of a sentence about a member or parameter sent with an empty name.
EMPTY_NAME = "A name that is empty"


def _facts(error: ValidationError) -> dict[str, Any]:
    """The schema the value failed against, with the failed keyword's value."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    return {**schema, str(error.validator): error.validator_value}


def _broken(error: ValidationError, names: list[str],
            facts: dict[str, Any]) -> tuple[str, list[str], dict[str, Any]]:
    """The rule an error broke, the path of names to the field at fault, and the facts of
    the rule's sentence."""
    rule = str(error.validator)
    instance = error.instance
    if rule == "required" and isinstance(instance, dict):
        missing = [name for name in error.validator_value if name not in instance]
        names = [*names, str(missing[0] if missing else error.validator_value[0])]
    elif rule == "additionalProperties" and isinstance(instance, dict):
        known = list(facts.get("properties") or {})
        extra = [name for name in instance if name not in known]
        names = [*names, str(extra[0] if extra else "")]
        facts = {"known": known}
    return rule, names, facts


def body_problem(error: ValidationError) -> FieldProblem:
    """The FieldProblem of a request body that failed its schema."""
    path = list(error.absolute_path)
    names = [str(part) for part in path if isinstance(part, str)]
    facts = _facts(error)
    facts["item"] = any(isinstance(part, int) for part in path)
    rule, names, facts = _broken(error, names, facts)
    if not names:  # the body as a whole
        return FieldProblem(problems.sentence(problems.BODY, rule, facts), None)
    field = ".".join(names)
    subject = field or EMPTY_NAME
    if path and isinstance(path[-1], int) and rule != "enum":  # one value of a list: say which
        subject = f"Value {path[-1] + 1} of {subject}"
    return FieldProblem(problems.sentence(subject, rule, facts), field)


def parameter_problem(error: ValidationError | None, definition: dict[str, Any],
                      value: Any) -> FieldProblem:
    """The FieldProblem of a parameter or header that failed its schema (error), or was
    required and not sent (error None)."""
    name = str(definition["name"])
    check = CORE_CHECKS.get(name)
    if check is not None:
        try:
            check(value)
        except InvalidParameter as exc:
            return FieldProblem.of(exc)
    if error is None:
        return FieldProblem(problems.sentence(name, "required"), name)
    facts = _facts(error)
    facts["text"] = True  # parameters and headers come as text
    facts["item"] = bool(list(error.absolute_path))
    rule, _, facts = _broken(error, [], facts)
    return FieldProblem(problems.sentence(name, rule, facts), name)


def unknown_query_problem(sent: Iterable[str], declared: list[str]) -> FieldProblem:
    """The FieldProblem of query parameters an operation does not declare (v2 is strict,
    D19): the first one sent is named."""
    name = next(iter(sent))
    facts = {"where": "query parameter of this operation", "known": declared}
    return FieldProblem(problems.sentence(name or EMPTY_NAME, "additionalProperties", facts),
                        name)


def whole_body_problem(rule: str) -> FieldProblem:
    """The FieldProblem of a request body that is missing or is not JSON at all."""
    facts = {"purpose": "send a JSON object"} if rule == "required" else {}
    return FieldProblem(problems.sentence(problems.BODY, rule, facts), None)
