"""The manual stays true (D30): the settings page and the CLI reference, rendered
from the code by docs/hooks/reference.py, name every setting, command and option and nothing
else; no page names a setting or a command that does not exist; and the site builds with
--strict (a broken link, a missing page or a missing anchor fails)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import click
import pytest

from app.cli import main
from app.core.config import SETTINGS

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
