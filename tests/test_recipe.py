"""The recipe for a new operation (docs/house/index.md, "A new operation", and the files a
new write touches in docs/house/request-path.md) holds for every operation of every
served document, walked from the documents, so that an operation added by the recipe
passes here and one that skipped a step fails, naming it:

- its handler: routing resolves its operationId to a function of app/web/handlers/;
- its tests: an HTTP test in tests/web/ sends a request of its method to its path, read
  from the tests' source (a call of the test client's get, post, put, patch or delete, or
  request with a method written out, or a (method, path) row of a table of requests; the
  names the module gives strings and its f-strings resolved, an unknown part of an f-string
  standing for any one path segment). The generated tests, which send a request to every
  operation of the documents, do not count: they cover an operation whatever it does, so
  they say nothing of whether its own behaviour was written down and checked;
- its mention in the guide of its document (GUIDES): a page there names its method and
  its path, in any of the ways the pages write one (a parameter under any name, a
  concrete id, `.../{id}/test` for the end of a path)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from connexion.utils import get_function_from_name

from app.web.routing import APIS, METHODS, Operation, operations

ROOT = Path(__file__).resolve().parent.parent
HTTP_TESTS = ROOT / "tests" / "web"
# Where each served document's operations are explained to their users.
GUIDES = {"petstore-v1.yaml": sorted((ROOT / "docs" / "api").glob("*.md")),
          "petstore-v2.yaml": sorted((ROOT / "docs" / "api").glob("*.md")),
          "ops.yaml": [ROOT / "docs" / "running" / "observability.md"]}
VERBS = tuple(method.upper() for method in METHODS)
ANY = "{}"  # a path segment a test or a page does not write out
MENTION = re.compile(r"\b(" + "|".join(VERBS) + r")\s+(?:https?://[^/\s`]+)?((?:/|\.\.\./)"
                     r"[^\s`'\"?)]*)")


def _segments(path: str) -> list[str]:
    """A path's segments, a parameter (or an unknown part) as ANY."""
    return [ANY if "{" in part else part for part in path.split("?")[0].strip("/").split("/")]


def _matches(operation: Operation, method: str, path: str) -> bool:
    """Whether a request or a mention of (method, path) is one of the operation's."""
    if method != operation.method:
        return False
    wanted, given = _segments(operation.template), _segments(path)
    if given and given[0] == "...":  # the end of the path only
        given = given[1:]
        wanted = wanted[len(wanted) - len(given):] if len(given) <= len(wanted) else []
    return len(wanted) == len(given) and all(
        want == ANY or have in (want, ANY) for want, have in zip(wanted, given, strict=True))


# The tests -----------------------------------------------------------------------------


class _Texts:
    """The strings a module writes, the names it gives strings resolved (a name given
    twice keeps its first string)."""

    def __init__(self, tree: ast.Module) -> None:
        self.names: dict[str, str] = {}
        for node in [*tree.body, *ast.walk(tree)]:
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)):
                value = self.text(node.value)
                if value is not None:
                    self.names.setdefault(node.targets[0].id, value)

    def text(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.JoinedStr):
            return "".join(self.text(part) or ANY if not isinstance(part, ast.FormattedValue)
                           else self.text(part.value) or ANY for part in node.values)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.text(node.left), self.text(node.right)
            return None if left is None else left + (right or ANY)
        return None


def _requests_in(source: Path) -> Iterator[tuple[str, str]]:
    """Every (method, path) a test module sends, as far as its source says."""
    tree = ast.parse(source.read_text())
    texts = _Texts(tree)
    for node in ast.walk(tree):
        pair: tuple[str | None, str | None] = (None, None)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            verb = node.func.attr.upper()
            if verb in VERBS:
                pair = (verb, texts.text(node.args[0]))
            elif verb == "REQUEST" and len(node.args) >= 2:
                pair = (texts.text(node.args[0]), texts.text(node.args[1]))
        elif isinstance(node, ast.Tuple) and len(node.elts) >= 2:
            pair = (texts.text(node.elts[0]), texts.text(node.elts[1]))
        method, path = pair
        if method in VERBS and path is not None and path.startswith("/"):
            yield method, path


def _sent_by_the_http_tests() -> dict[tuple[str, str], list[str]]:
    sent: dict[tuple[str, str], list[str]] = {}
    for source in sorted(HTTP_TESTS.glob("test_*.py")):
        for request in _requests_in(source):
            sent.setdefault(request, []).append(source.name)
    return sent


SENT = _sent_by_the_http_tests()


# The guide -----------------------------------------------------------------------------


def _mentions(pages: list[Path]) -> Iterator[tuple[str, str, str]]:
    """Every (method, path, page) a guide's pages name."""
    for page in pages:
        for method, path in MENTION.findall(page.read_text()):
            yield method, path, page.name


MENTIONED = {document: list(_mentions(pages)) for document, pages in GUIDES.items()}

OPERATIONS = operations()
IDS = [f"{operation.method} {operation.template}" for operation in OPERATIONS]


def test_every_served_document_has_a_guide() -> None:
    assert {api.document for api in APIS} == set(GUIDES)
    for document, pages in GUIDES.items():
        assert pages and all(page.is_file() for page in pages), document


@pytest.mark.parametrize("operation", OPERATIONS, ids=IDS)
def test_every_operation_has_its_handler(operation: Operation) -> None:
    handler = get_function_from_name(operation.id)
    assert callable(handler), f"{operation.id} is not a function"
    assert handler.__module__.startswith("app.web.handlers"), handler.__module__


@pytest.mark.parametrize("operation", OPERATIONS, ids=IDS)
def test_every_operation_is_sent_by_an_http_test(operation: Operation) -> None:
    senders = sorted({name for (method, path), names in SENT.items()
                      if _matches(operation, method, path) for name in names})
    assert senders, (
        f"no test in tests/web/ sends {operation.method} {operation.template} "
        f"({operation.definition['operationId']}): add an HTTP test of what a client sees")


@pytest.mark.parametrize("operation", OPERATIONS, ids=IDS)
def test_every_operation_is_mentioned_in_its_guide(operation: Operation) -> None:
    pages = sorted({page for method, path, page in MENTIONED[operation.api.document]
                    if _matches(operation, method, path)})
    assert pages, (
        f"no page of the guide of {operation.api.document} "
        f"({', '.join(str(p.relative_to(ROOT)) for p in GUIDES[operation.api.document])}) "
        f"names {operation.method} {operation.template} "
        f"({operation.definition['operationId']})")


def test_the_criteria_tell_operations_apart() -> None:
    """What a match accepts is narrow enough to mean something: a request of another
    method, or to a longer or shorter path, matches no operation."""
    ship = next(o for o in OPERATIONS if o.template == "/v2/store/orders/{orderId}/ship")
    assert _matches(ship, "POST", "/v2/store/orders/7/ship")
    assert _matches(ship, "POST", "/v2/store/orders/{orderId}/ship?x=1")
    assert _matches(ship, "POST", ".../{id}/ship")
    assert not _matches(ship, "GET", "/v2/store/orders/7/ship")
    assert not _matches(ship, "POST", "/v2/store/orders/7")
    assert not _matches(ship, "POST", "/v2/store/orders/7/complete")
    assert not _matches(ship, "POST", "/v1/store/orders/7/ship")
