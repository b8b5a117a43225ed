"""The README stays true: every setting documented, every CLI command mentioned."""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from app.cli import main
from app.core.config import SETTINGS

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.env)
def test_every_setting_is_in_the_readme_with_its_default(setting) -> None:
    rows = [line for line in README.splitlines() if line.startswith(f"| `{setting.env}` |")]
    assert rows, f"{setting.env} is not documented in README.md"
    shown = f"`{setting.default}`" if setting.default else "(empty)"
    assert f"| {shown} |" in rows[0], f"README gives the wrong default for {setting.env}"


def _commands(group: click.Group, prefix: str = "petstore") -> list[str]:
    names = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            names += _commands(command, f"{prefix} {name}")
        else:
            names.append(f"{prefix} {name}")
    return names


@pytest.mark.parametrize("command", _commands(main))
def test_every_cli_command_is_in_the_readme(command: str) -> None:
    assert f"`{command}" in README, f"{command} is not documented in README.md"
