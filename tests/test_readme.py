"""The README is a door (D30): short, and its one table names every operation of
every served document, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from app.web.routing import APIS, METHODS, OPENAPI_DIR

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
ROW = re.compile(r"^\| (GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS|TRACE) \| `([^`]+)` \| (.+) \|$")


def _served() -> dict[tuple[str, str], str]:
    """(METHOD, path) -> "operationId in document" for every operation the service serves."""
    operations = {}
    for api in APIS:
        document = yaml.safe_load((OPENAPI_DIR / api.document).read_text())
        for template, item in document["paths"].items():
            for method, operation in item.items():
                if method in METHODS:
                    operations[(method.upper(), api.base_path + template)] = (
                        f"{operation.get('operationId')} in openapi/{api.document}")
    return operations


def _rows() -> dict[tuple[str, str], str]:
    """(METHOD, path) -> what it does, for every row of the README's table of operations."""
    rows = {}
    for line in README.splitlines():
        match = ROW.match(line)
        if match:
            assert (match[1], match[2]) not in rows, f"README.md lists {match[1]} {match[2]} twice"
            rows[(match[1], match[2])] = match[3].strip()
    return rows


SERVED = _served()
ROWS = _rows()


@pytest.mark.parametrize("operation", sorted(SERVED), ids=" ".join)
def test_every_served_operation_has_a_row_in_the_readme(operation: tuple[str, str]) -> None:
    method, path = operation
    assert operation in ROWS, (
        f"README.md's table of operations has no row for {method} {path} ({SERVED[operation]}); "
        f"add one under '## Every operation': | {method} | `{path}` | <what it does> |")


@pytest.mark.parametrize("operation", sorted(ROWS), ids=" ".join)
def test_every_row_of_the_readme_names_a_served_operation(operation: tuple[str, str]) -> None:
    method, path = operation
    assert operation in SERVED, (
        f"README.md's table of operations lists {method} {path}, which no served document "
        f"(openapi/{', openapi/'.join(api.document for api in APIS)}) has: remove the row or "
        "correct its method or path")
    assert ROWS[operation] and ROWS[operation] != "<what it does>", (
        f"README.md says nothing of what {method} {path} does")


def test_the_readme_is_a_door_of_at_most_10_kb() -> None:
    size = len(README.encode())
    assert size <= 10 * 1024, f"README.md is {size} bytes; move what grew into docs/"


def test_every_link_of_the_readme_into_docs_opens_a_page() -> None:
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", README)
    assert links, "README.md links into docs/"
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, f"README.md links to pages that do not exist: {missing}"


def test_the_readme_says_the_two_commands() -> None:
    assert "make run" in README
    assert "make test" in README
