"""The contract review's pages stay true: the changelog of v2 is what the command prints now,
and the rules page lists every rule with its level."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from app.cli import main
from app.core.contract import RULES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def v2_in_release_order() -> list[str]:
    """Every release of v2, oldest first, then the live document (as `make changelog`)."""
    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(p) for p in path.stem.rsplit("-", 1)[1].split("."))

    released = sorted((ROOT / "openapi" / "released").glob("petstore-v2-*.yaml"), key=version)
    return [str(p.relative_to(ROOT)) for p in released] + ["openapi/petstore-v2.yaml"]


def test_the_changelog_of_v2_is_what_the_command_prints_now(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["contract", "changelog", "--title", "Changelog of v2",
                                       *v2_in_release_order()])
    assert result.exit_code == 0, result.output
    page = (DOCS / "changelog-v2.md").read_text()
    assert page == result.stdout, (
        "docs/changelog-v2.md differs from what `petstore contract changelog` prints for v2 "
        "now: run `make changelog` and commit docs/changelog-v2.md")


def test_the_rules_page_lists_every_rule_with_its_level() -> None:
    page = (DOCS / "contract-review.md").read_text()
    listed = dict(re.findall(r"^\| `([a-z-]+)` \| (ERR|WARN|INFO) \|$", page, re.MULTILINE))
    assert listed == RULES
