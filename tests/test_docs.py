"""The manual stays true (D30): the settings page and the CLI reference, rendered
from the code by docs/hooks/reference.py, name every setting, command and option and nothing
else; no page names a setting or a command that does not exist; the site builds with
--strict (a broken link, a missing page or a missing anchor fails); the comments of app/
cite only decisions docs/house/decisions.md defines, never a document outside the
repository or an issue number; and the house's map names every module of app/."""

from __future__ import annotations

import ast
import importlib.util
import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path
from types import ModuleType

import click
import pytest

from app.cli import main
from app.core.config import SETTINGS
from app.web.chain import LAYERS
from tests.support import parse_python

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.rglob("*.md"))


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_reference", DOCS / "hooks/reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _hook()


def _rendered(page: str) -> str:
    """A page as the site shows it: its markers replaced by what the hook renders."""
    return str(HOOK.on_page_markdown((DOCS / page).read_text()))


def _words(text: str) -> str:
    return " ".join(text.split())


# Settings -----------------------------------------------------------------------------------

SETTINGS_PAGE = _rendered("running/settings.md")
SETTING_ROW = re.compile(r"^\| `(PETSTORE_[A-Z0-9_]+)` \| (.+?) \| (.+) \|$", re.MULTILINE)
SETTING_ROWS = {m[1]: (m[2], m[3]) for m in SETTING_ROW.finditer(SETTINGS_PAGE)}


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.env)
def test_every_setting_is_on_the_settings_page_with_its_default_and_meaning(setting) -> None:
    assert setting.env in SETTING_ROWS, (
        f"{setting.env} is not in the table of docs/running/settings.md (its <!-- settings --> "
        "marker renders SETTINGS)")
    default, meaning = SETTING_ROWS[setting.env]
    shown = f"`{setting.default}`" if setting.default else "(empty)"
    assert default == shown, f"docs/running/settings.md gives the wrong default for {setting.env}"
    assert meaning.replace("\\|", "|") == _words(setting.help), (
        f"docs/running/settings.md gives another meaning for {setting.env} than config.py")


@pytest.mark.parametrize("env", sorted(SETTING_ROWS))
def test_the_settings_page_names_only_settings_that_exist(env: str) -> None:
    assert env in {s.env for s in SETTINGS}, (
        f"docs/running/settings.md lists {env}, which app/core/config.py does not declare")


# Variables the tests and benchmarks read, outside the service's settings.
NOT_SETTINGS = re.compile(r"PETSTORE_(TEST|BENCH)_[A-Z0-9_]+")


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: str(p.name))
def test_no_page_names_a_setting_that_does_not_exist(page: Path) -> None:
    named = set(re.findall(r"PETSTORE_[A-Z][A-Z0-9_]*[A-Z0-9]", page.read_text()))
    unknown = {n for n in named if not NOT_SETTINGS.fullmatch(n)} - {s.env for s in SETTINGS}
    assert not unknown, f"{page.relative_to(ROOT)} names settings that do not exist: {unknown}"


# The petstore command -----------------------------------------------------------------------

def _commands(group: click.Group, path: str = "petstore") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        found[f"{path} {name}"] = command
        if isinstance(command, click.Group):
            found |= _commands(command, f"{path} {name}")
    return found


COMMANDS = {"petstore": main, **_commands(main)}
CLI_PAGE = _rendered("running/cli.md")
SECTION = re.compile(r"^#{2,6} (petstore(?: [a-z0-9-]+)*)\n(.*?)(?=^#{2,6} petstore|\Z)",
                     re.MULTILINE | re.DOTALL)
SECTIONS = {m[1]: m[2] for m in SECTION.finditer(CLI_PAGE)}


def _documented_options(section: str) -> set[str]:
    """Every option name in the rows of a section's table (`--plan [free|pro]` -> --plan)."""
    names = set()
    for cell in re.findall(r"^\| `([^`]+)` \|", section, re.MULTILINE):
        names |= {part.split(" ")[0] for part in re.split(r", | / ", cell)
                  if part.startswith("-")}
    return names


def _options(command: click.Command) -> set[str]:
    context = click.Context(command)
    help_option = command.get_help_option(context)
    return {name for param in command.get_params(context) if isinstance(param, click.Option)
            for name in (*param.opts, *param.secondary_opts)
            if param is not help_option or command is main}


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_every_command_and_option_is_in_the_cli_reference(path: str) -> None:
    assert path in SECTIONS, f"docs/running/cli.md has no section for `{path}`"
    missing = _options(COMMANDS[path]) - _documented_options(SECTIONS[path])
    assert not missing, f"docs/running/cli.md does not give {missing} of `{path}`"


@pytest.mark.parametrize("path", sorted(SECTIONS))
def test_the_cli_reference_names_only_commands_and_options_that_exist(path: str) -> None:
    assert path in COMMANDS, f"docs/running/cli.md documents `{path}`, which does not exist"
    unknown = _documented_options(SECTIONS[path]) - _options(COMMANDS[path])
    assert not unknown, f"docs/running/cli.md gives {unknown} for `{path}`, which has none"


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: str(p.name))
def test_no_page_names_a_command_that_does_not_exist(page: Path) -> None:
    unknown = []
    for first, second in re.findall(r"\bpetstore ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?",
                                    page.read_text()):
        if first not in main.commands:
            continue  # prose ("petstore orders" as words), checked below only for commands
        command = main.commands[first]
        if isinstance(command, click.Group) and second and second not in command.commands:
            unknown.append(f"petstore {first} {second}")
    for mentioned in re.findall(r"`petstore ([a-z][a-z-]*)", page.read_text()):
        if mentioned not in main.commands:
            unknown.append(f"petstore {mentioned}")
    assert not unknown, f"{page.relative_to(ROOT)} names commands that do not exist: {unknown}"


# The site -----------------------------------------------------------------------------------

def test_the_import_contracts_on_the_house_page_are_pyprojects() -> None:
    house = _rendered("house/index.md")
    assert "<!-- import-contracts -->" not in house
    for name in re.findall(r'^name = "(.+)"$', (ROOT / "pyproject.toml").read_text(),
                           re.MULTILINE):
        if name != "petstore-orders":
            assert f"**{name}**" in house


def test_the_request_path_page_lists_every_layer_of_the_chain_in_order() -> None:
    page = _rendered("house/request-path.md")
    assert "<!-- request-path -->" not in page
    rows = re.findall(r"^\| (\d+) \| \*\*(.+?)\*\*", page, re.MULTILINE)
    assert [name for _, name in rows] == [layer.name for layer in LAYERS]


def test_the_site_builds_strictly_and_loads_nothing_from_another_host(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    settings = (tmp_path / "running/settings/index.html").read_text()
    assert all(setting.env in settings for setting in SETTINGS)
    assert "petstore keys create" in (tmp_path / "running/cli/index.html").read_text()


# The code's files (not openapi/, where the release policy names releases to come).
REPOSITORY_PATH = re.compile(r"(?<![\w/.-])((?:app|tests|bench|tools|docs)/[\w./-]*\w/?)")


@pytest.mark.parametrize("page", [*PAGES, ROOT / "README.md"], ids=lambda p: str(p.name))
def test_every_file_a_page_names_exists(page: Path) -> None:
    missing = sorted({path for path in REPOSITORY_PATH.findall(page.read_text())
                      if not (ROOT / path).exists()})
    assert not missing, f"{page.relative_to(ROOT)} names files that do not exist: {missing}"


# The code's comments and the decisions they cite --------------------------------------------

APP_MODULES = sorted((ROOT / "app").rglob("*.py"))
DECISIONS = {int(number) for number in
             re.findall(r"\{#d(\d+)\}", (DOCS / "house/decisions.md").read_text())}
# An upstream project's issue, named in full so that anyone can look it up
# (spec-first/connexion#770); any other "#12" is an issue of ours, which the repository does
# not hold.
UPSTREAM_ISSUE = re.compile(r"[\w.-]+/[\w.-]+$")
ISSUE = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
DECISION = re.compile(r"\bD(\d+)\b")


def _remarks(source: str) -> list[tuple[int, str]]:
    """Every comment and docstring of a module's source, with its line: the text a reader
    takes for the code's reasons."""
    remarks = [(token.start[0], token.string.lstrip("#").strip())
               for token in tokenize.generate_tokens(io.StringIO(source).readline)
               if token.type == tokenize.COMMENT]
    for node in ast.walk(parse_python(source)):
        if (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            remarks.append((node.lineno, node.value.value))
    return remarks


def _bad_citations(source: str) -> list[str]:
    """What the comments and docstrings of source cite that a reader cannot look up in the
    repository: DESIGN.md (or any file of shared/), an issue of ours, a decision that
    docs/house/decisions.md does not define."""
    bad = []
    for line, text in _remarks(source):
        if "DESIGN.md" in text or "shared/" in text:
            bad.append(f"line {line}: a document outside the repository")
        bad.extend(f"line {line}: {found!r}" for found in ISSUE.findall(text))
        bad.extend(f"line {line}: {m[0]!r}" for m in re.finditer(r"#\d+", text)
                   if not UPSTREAM_ISSUE.search(text[:m.start()]))
        bad.extend(f"line {line}: {m[0]!r}, which docs/house/decisions.md does not define"
                   for m in DECISION.finditer(text) if int(m[1]) not in DECISIONS)
    return bad


def test_the_decisions_page_defines_every_decision_from_d1() -> None:
    missing = set(range(1, max(DECISIONS) + 1)) - DECISIONS
    assert not missing, f"docs/house/decisions.md skips {sorted(missing)}"
    assert max(DECISIONS) >= 35  # a decision keeps its number for good


@pytest.mark.parametrize("module", APP_MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_comments_cite_only_what_the_repository_holds(module: Path) -> None:
    bad = _bad_citations(module.read_text())
    assert not bad, f"{module.relative_to(ROOT)} cites what the repository does not hold: {bad}"


def test_the_citation_check_finds_each_kind_of_bad_citation() -> None:
    source = """\"\"\"A module (DESIGN.md D7).\"\"\"
# Cut by half (issue 34); see #27 and (Issue #21).
def f() -> None:
    \"\"\"Answers as D999 says.\"\"\"
# Fine: D7, D8-D10, spec-first/connexion#2059, libuv/libuv#3696.
"""
    assert _bad_citations(source) == [
        "line 2: 'issue 34'", "line 2: 'Issue #21'", "line 2: '#27'", "line 2: '#21'",
        "line 1: a document outside the repository",
        "line 4: 'D999', which docs/house/decisions.md does not define",
    ]


def _map() -> list[str]:
    """The lines of the house page's map (its first code block after "## The map")."""
    house = (DOCS / "house/index.md").read_text()
    return house.split("## The map", 1)[1].split("```", 2)[1].splitlines()


def _named_in_map(module: str, lines: list[str]) -> bool:
    """Whether a line of the map names module: by its path; as one of the names after a
    path in its folder ("app/core/logs.py, health.py"); or within a folder the map names
    as a whole ("app/core/contract/")."""
    folder, name = module.rsplit("/", 1)
    for line in lines:
        head = line.split("  ", 1)[0]
        first = head.split(",", 1)[0].strip()
        if first == module or (first.endswith("/") and module.startswith(first)):
            return True
        if first.rsplit("/", 1)[0] == folder and name in {n.strip() for n in head.split(",")}:
            return True
    return False


def test_the_house_map_names_every_module_of_app() -> None:
    lines = _map()
    modules = [str(path.relative_to(ROOT)) for path in APP_MODULES]
    missing = [module for module in modules if not _named_in_map(module, lines)]
    assert not missing, f"docs/house/index.md's map leaves out {missing}"
    assert not _named_in_map("app/web/unmapped.py", lines)  # the check can fail
