"""`petstore contract diff` and `changelog`, run in-process with click's runner on files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from app.cli import main

ROOT = Path(__file__).resolve().parents[2]
LIVE_V2 = ROOT / "openapi" / "petstore-v2.yaml"


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(main, ["contract", *map(str, args)])


def edited(tmp_path: Path, *edits: tuple[str, str]) -> Path:
    text = LIVE_V2.read_text()
    for old, new in edits:
        assert text.count(old) == 1, old
        text = text.replace(old, new)
    path = tmp_path / "petstore-v2.yaml"
    path.write_text(text)
    return path


LIMIT_MIN = ("      description: How many orders a page holds at most.\n      schema:\n"
             "        type: integer\n        minimum: 1",
             "      description: How many orders a page holds at most.\n      schema:\n"
             "        type: integer\n        minimum: 5")
NO_ORDER_PET_ID = ("        petId:\n          type: integer\n          format: int64\n"
                   "          description: Identifier of the animal in this order.\n"
                   "          example: 3\n", "")
PET_ID_TO_STRING_IN_ORDER = (
    "        petId:\n          type: integer\n          format: int64\n"
    "          description: Identifier of the animal in this order.",
    "        petId:\n          type: string\n"
    "          description: Identifier of the animal in this order.")


@pytest.fixture
def min_raised(tmp_path: Path) -> Path:
    return edited(tmp_path, LIMIT_MIN)


def test_the_same_document_finds_nothing_and_exits_0() -> None:
    result = run("diff", LIVE_V2, LIVE_V2, "--fail-on", "WARN")
    assert result.exit_code == 0, result.output
    assert result.stdout == "No findings.\n"


def test_text_names_the_file_and_line_level_rule_and_operation(min_raised: Path) -> None:
    result = run("diff", LIVE_V2, min_raised)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    line = min_raised.read_text().splitlines().index("        minimum: 5") + 1
    assert lines[0] == (f"{min_raised}:{line}: ERR request-parameter-min-increased: "
                        "GET /pet-changes: the minimum of the query request parameter "
                        "limit was increased from 1 to 5")
    assert lines[-1] == "3 findings: 3 ERR, 0 WARN, 0 INFO"


def test_fail_on_err_exits_1_on_an_error(min_raised: Path) -> None:
    assert run("diff", LIVE_V2, min_raised, "--fail-on", "ERR").exit_code == 1


def test_fail_on_err_passes_a_warning_and_fail_on_warn_does_not(tmp_path: Path) -> None:
    revision = edited(tmp_path, NO_ORDER_PET_ID)
    warned = run("diff", LIVE_V2, revision, "--fail-on", "ERR")
    assert warned.exit_code == 0, warned.output
    assert "WARN response-optional-property-removed" in warned.stdout
    assert run("diff", LIVE_V2, revision, "--fail-on", "WARN").exit_code == 1


def test_level_warn_hides_info_and_says_how_many(tmp_path: Path) -> None:
    base = ROOT / "openapi" / "released" / "petstore-v2-2.2.0.yaml"
    revision = edited(tmp_path, NO_ORDER_PET_ID)
    every = run("diff", base, revision)
    shown = run("diff", base, revision, "--level", "WARN")
    assert shown.exit_code == 0, shown.output
    infos = [line for line in every.stdout.splitlines() if ": INFO " in line]
    assert infos, "the live v2 adds to 2.2.0, so there is something to hide"
    assert ": INFO " not in shown.stdout
    assert "WARN response-optional-property-removed" in shown.stdout
    assert f"({len(infos)} finding(s) below WARN not shown" in shown.stderr


def test_json_lists_objects_with_the_six_fields(min_raised: Path) -> None:
    result = run("diff", LIVE_V2, min_raised, "--format", "json")
    findings = json.loads(result.stdout)
    assert [sorted(f) for f in findings] == [
        ["id", "level", "operation", "path", "source", "text"]] * 3
    assert findings[2]["operation"] == "GET /store/orders"
    assert findings[2]["path"] == "/store/orders"
    assert findings[2]["level"] == "ERR" and findings[2]["source"].startswith(str(min_raised))


def test_markdown_is_a_table_of_the_findings(tmp_path: Path) -> None:
    revision = edited(tmp_path, PET_ID_TO_STRING_IN_ORDER)
    result = run("diff", LIVE_V2, revision, "--format", "markdown")
    lines = result.stdout.splitlines()
    assert lines[2] == "| Level | Rule | Operation | Change | Source |"
    assert any(line.startswith("| ERR | `response-property-type-changed` | GET /store/orders/"
                               "{orderId} |") for line in lines)


@pytest.mark.parametrize("text, message", [
    ("openapi: 3.0.3\npaths: a: b\n", ":2: is not valid YAML"),
    ('swagger: "2.0"\ninfo: {}\n', ":1: is not an OpenAPI 3.0 or 3.1 document"),
    ("openapi: 3.0.3\npaths:\n  /a:\n    get:\n      parameters:\n"
     "        - $ref: '#/components/parameters/Nowhere'\n      responses: {}\n",
     ":6: $ref #/components/parameters/Nowhere points at nothing"),
])
def test_a_file_that_cannot_be_reviewed_exits_2_naming_the_file_and_line(
        tmp_path: Path, text: str, message: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    result = run("diff", bad, bad)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: {bad}{message}")
    assert "Traceback" not in result.output


def test_a_missing_file_exits_2() -> None:
    result = run("diff", LIVE_V2, "no-such-file.yaml")
    assert result.exit_code == 2
    assert "no-such-file.yaml:1: cannot be read" in result.stderr


def test_changelog_groups_every_finding_by_operation_info_included(tmp_path: Path) -> None:
    base = ROOT / "openapi" / "released" / "petstore-v2-2.0.0.yaml"
    revision = edited(tmp_path, LIMIT_MIN)
    result = run("changelog", base, revision)
    assert result.exit_code == 0, result.output
    text = result.stdout
    live = yaml.safe_load(LIVE_V2.read_text())["info"]["version"]  # the edited copy's
    assert text.startswith(f"## Pet Store Orders 2.0.0 to {live}\n\n`{base}` to `{revision}`: ")
    assert "### POST /store/orders\n\n- INFO `endpoint-added`: endpoint added\n" in text
    assert ("### GET /store/orders\n\n- ERR `request-parameter-min-increased`: the minimum of "
            "the query request parameter limit was increased from 1 to 5\n") in text


def test_a_page_leaves_out_a_live_document_still_as_released_and_names_one_edited_since(
        tmp_path: Path) -> None:
    released = sorted((ROOT / "openapi" / "released").glob("petstore-v2-2.*.yaml"))[-2:]
    live = yaml.safe_load(LIVE_V2.read_text())["info"]["version"]
    last = yaml.safe_load(released[-1].read_text())["info"]["version"]
    assert live == last  # the live document is at its last release's version
    page = run("changelog", *released, LIVE_V2).stdout
    assert page.count("\n## ") + page.startswith("## ") == 1
    assert f" to {last}\n" in page and f"{last} to {last}" not in page
    edited_since = run("changelog", *released, edited(tmp_path, LIMIT_MIN)).stdout
    assert edited_since.startswith(
        f"## Pet Store Orders: changes since {last}, not yet released\n")
    assert "ERR `request-parameter-min-increased`" in edited_since
    alone = run("changelog", released[-1], LIVE_V2).stdout
    assert alone == (f"## Pet Store Orders: changes since {last}, not yet released\n\n"
                     f"`{released[-1]}` to `{LIVE_V2}`: no changes.\n")
