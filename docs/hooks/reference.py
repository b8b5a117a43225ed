"""An mkdocs hook: the pages that cannot drift are rendered from the code at build time.

- `<!-- settings -->` on a page becomes the table of every setting of app/core/config.py
  (variable, default, meaning), from SETTINGS itself;
- `<!-- cli-reference -->` becomes the reference of every command and option of the
  `petstore` command, walked from click's own command tree;
- `<!-- import-contracts -->` becomes the import-linter contracts of pyproject.toml;
- `<!-- request-path -->` becomes the table of the request path's layers, in request order,
  from app/web/chain.py's LAYERS (what each does, needs and gives);
- `<!-- answer-sites -->` becomes the table of the places an answer is written, from
  app/web/chain.py's ANSWER_SITES.

So a setting or a command group added anywhere is on the site the next time it is built,
and tests/test_docs.py checks both renderings against the code, both ways. The hook also
refuses a built page that loads a script, a style sheet, a font or an image from another
host: the manual reads offline (issue 35).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import click

from app.cli import main as petstore
from app.core.config import SETTINGS
from app.web.chain import ANSWER_SITES, FAST, LAYERS

SETTINGS_MARKER = "<!-- settings -->"
CLI_MARKER = "<!-- cli-reference -->"
CONTRACTS_MARKER = "<!-- import-contracts -->"
PATH_MARKER = "<!-- request-path -->"
ANSWERS_MARKER = "<!-- answer-sites -->"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"

# src= or href= of a tag that the browser loads by itself (not a link a reader follows).
REMOTE_RESOURCE = re.compile(
    r"<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]*\"",
    re.IGNORECASE,
)


def _cell(text: str) -> str:
    """Text fit for one cell of a Markdown table."""
    return " ".join(text.split()).replace("|", "\\|")


def settings_table() -> str:
    """Every setting of app/core/config.py as a Markdown table: variable, default, meaning."""
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    for setting in SETTINGS:
        default = f"`{setting.default}`" if setting.default else "(empty)"
        lines.append(f"| `{setting.env}` | {default} | {_cell(setting.help)} |")
    return "\n".join(lines)


def commands(group: click.Group = petstore, path: tuple[str, ...] = ("petstore",)
             ) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command under the group, depth first in name order, with its full path
    (("petstore", "keys", "create"), command); groups come before their commands."""
    found: list[tuple[tuple[str, ...], click.Command]] = []
    for name in sorted(group.commands):
        command = group.commands[name]
        found.append(((*path, name), command))
        if isinstance(command, click.Group):
            found += commands(command, (*path, name))
    return found


def _usage(path: tuple[str, ...], command: click.Command) -> str:
    context = click.Context(command, info_name=" ".join(path))
    return " ".join([*path, *command.collect_usage_pieces(context)])


def _parameters(path: tuple[str, ...], command: click.Command) -> list[str]:
    context = click.Context(command, info_name=" ".join(path))
    rows = []
    help_option = command.get_help_option(context)
    for parameter in command.get_params(context):
        if isinstance(parameter, click.Argument):
            rows.append(f"| `{parameter.make_metavar(context)}` | argument |")
            continue
        record = parameter.get_help_record(context)
        if record is not None and (parameter is not help_option or path == ("petstore",)):
            names, meaning = record
            rows.append(f"| `{names}` | {_cell(meaning)} |")
    if not rows:
        return []
    return ["| Option | Meaning |", "|---|---|", *rows]


def cli_reference() -> str:
    """Every command of `petstore`, with its usage, its help and every option, as Markdown
    (--help, which every command has, only once, on `petstore` itself)."""
    parts = [
        "## petstore",
        "",
        f"```\n{_usage(('petstore',), petstore)}\n```",
        "",
        *_parameters(("petstore",), petstore),
    ]
    for path, command in commands():
        level = "#" * min(len(path) + 1, 6)
        parts += ["", f"{level} {' '.join(path)}", ""]
        parts += [f"```\n{_usage(path, command)}\n```", ""]
        if command.help:
            parts += [click.unstyle(_help_text(command.help)), ""]
        parts += _parameters(path, command)
    return "\n".join(parts)


def _help_text(text: str) -> str:
    """A docstring as Markdown: click's \\b (keep this paragraph's lines) dropped, each such
    paragraph kept as its lines."""
    paragraphs = []
    for paragraph in text.strip().split("\n\n"):
        lines = [line.strip() for line in paragraph.strip().splitlines()]
        if lines and lines[0] == "\b":
            paragraphs.append("  \n".join(lines[1:]))  # Markdown's hard line breaks
        else:
            paragraphs.append(" ".join(lines))
    return "\n\n".join(paragraphs)


def import_contracts() -> str:
    """The import-linter contracts of pyproject.toml, one bullet each: its name, and what it
    holds in the words of its own fields."""
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    lines = []
    for contract in contracts:
        fields = "; ".join(
            f"{key}: " + ", ".join(f"`{v}`" for v in (value if isinstance(value, list)
                                                      else [value]))
            for key, value in contract.items() if key not in ("name", "type")
        )
        lines.append(f"- **{contract['name']}** ({contract['type']}; {fields})")
    return "\n".join(lines)


def request_path() -> str:
    """The layers of the request path, in request order, as a Markdown table."""
    lines = ["| # | Layer | What it does | Relies on | Gives |", "|---|---|---|---|---|"]
    for number, layer in enumerate(LAYERS, 1):
        name = f"**{layer.name}** (fast)" if layer.name in FAST else f"**{layer.name}**"
        gives = _cell("; ".join(layer.gives)) or "-"
        lines.append(f"| {number} | {name} | {_cell(layer.does)} | "
                     f"{_cell('; '.join(layer.needs)) or '-'} | {gives} |")
    return "\n".join(lines)


def answer_sites() -> str:
    """The places an answer is written, as a Markdown table (app/web/chain.py's
    ANSWER_SITES)."""
    lines = ["| Where | What | Written in | For |", "|---|---|---|---|"]
    for site in ANSWER_SITES:
        written = ", ".join(f"`app/web/{m}`" for m in site.modules) or "Connexion"
        lines.append(f"| **{site.name}** | {_cell(site.what)} | {written} | "
                     f"{'the API' if site.api else 'beside the API'} |")
    return "\n".join(lines)


def on_page_markdown(markdown: str, **_: Any) -> str:
    """mkdocs: put the rendered tables in place of their markers."""
    if SETTINGS_MARKER in markdown:
        markdown = markdown.replace(SETTINGS_MARKER, settings_table())
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if CONTRACTS_MARKER in markdown:
        markdown = markdown.replace(CONTRACTS_MARKER, import_contracts())
    if PATH_MARKER in markdown:
        markdown = markdown.replace(PATH_MARKER, request_path())
    if ANSWERS_MARKER in markdown:
        markdown = markdown.replace(ANSWERS_MARKER, answer_sites())
    return markdown


def on_post_page(output: str, page: Any, **_: Any) -> str:
    """mkdocs: refuse a page that would load anything from another host."""
    found = REMOTE_RESOURCE.search(output)
    if found:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_uri} loads {found.group(0)!r}: the manual must "
                          "read offline (no CDN, no web fonts)")
    return output
