"""What the command groups of `petstore` share: where a person's lines go, the settings and
the store of the running command, tables, and reading rows from an import file.

Everything a person reads goes to standard error; standard output carries only what a
script would capture (a new key, --json listings).
"""

from __future__ import annotations

import csv
import json
import logging
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import click

from app.core import feed, names
from app.core.config import Settings, SettingsError
from app.core.errors import InvalidParameter, PetstoreError, ResyncRequired
from app.core.setting_values import redacted
from app.core.storage import Store, open_store

log = logging.getLogger("petstore.cli")


def say(message: str) -> None:
    """A line for the person at the terminal (standard error)."""
    click.echo(message, err=True)


def current_settings() -> Settings:
    """The settings from the environment; a bad one is a usage error naming it."""
    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


def current_store() -> Store:
    """The store of PETSTORE_DATABASE, its schema up to date, closed when the command ends."""
    settings = current_settings()
    try:
        store = open_store(settings)
    except PetstoreError as exc:
        raise click.ClickException(
            f"cannot open the database {redacted(settings.database)}: {exc.message}"
        ) from None
    context = click.get_current_context(silent=True)
    if context is not None:
        context.call_on_close(store.dispose)
    return store


def echo_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]],
               right: frozenset[int] = frozenset()) -> None:
    """Rows under a header, every column as wide as its widest cell (right-aligned where
    its index is in right), two spaces apart: each column starts at the same place on
    every line. A cell's control and direction characters are written as escapes (\x1b,
    \u202e): a name stored before D37 refused them must not steer the terminal."""
    rows = [tuple(names.shown(cell) for cell in row) for row in rows]
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        cells = [cell.rjust(width) if i in right else cell.ljust(width)
                 for i, (cell, width) in enumerate(zip(row, widths, strict=True))]
        click.echo("  ".join(cells).rstrip())


class ImportFailed(click.ClickException):
    """A row that cannot be imported: where it is and why."""


def read_rows(stream: IO[str], fmt: str, name: str,
               items: str = "orders") -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, row) for each row of the file, where naming its line or item."""
    if fmt == "csv":
        reader = csv.DictReader(stream)
        for row in reader:
            cleaned = {k: (v if v != "" else None) for k, v in row.items() if k is not None}
            if None in row:
                raise ImportFailed(f"{name} line {reader.line_num}: more cells than columns")
            yield f"{name} line {reader.line_num}", cleaned
    elif fmt == "ndjson":
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                yield f"{name} line {number}", json.loads(line)
            except json.JSONDecodeError as exc:
                raise ImportFailed(f"{name} line {number}: not valid JSON ({exc.msg})") from None
    else:
        try:
            data = json.load(stream)
        except json.JSONDecodeError as exc:
            raise ImportFailed(
                f"{name} line {exc.lineno}: not valid JSON ({exc.msg})"
            ) from None
        if not isinstance(data, list):
            raise ImportFailed(f"{name}: expected a JSON array of {items}")
        for number, row in enumerate(data, start=1):
            yield f"{name} item {number}", row


def guess_format(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".ndjson": "ndjson", ".jsonl": "ndjson"}.get(suffix, "json")


def echo_json_array(items: Iterator[str]) -> None:
    """A JSON array of already-encoded items, one a line, written as they come, their
    direction and C1 control characters as \\u escapes (names.json_shown, D37)."""
    separator = "[\n  "
    for text in items:
        click.echo(separator + names.json_shown(text), nl=False)
        separator = ",\n  "
    click.echo("[]" if separator == "[\n  " else "\n]")



def import_source(file: IO[str], fmt: str | None) -> tuple[str, str]:
    """The name an import's messages cite for FILE ("stdin" for -) and its format: the one
    given, else JSON on standard input, else guessed from the file's extension."""
    name = "stdin" if file.name == "<stdin>" else file.name
    return name, fmt or ("json" if name == "stdin" else guess_format(name))


def feed_options(what: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of a command that prints a feed (`orders changes`, `pets changes`):
    --after and --follow; what names the API's feed in --after's help."""
    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        command = click.option(
            "--follow", is_flag=True,
            help="Keep printing changes as they are made, until interrupted (Ctrl-C) or "
                 "stopped (SIGTERM).")(command)
        return click.option(
            "--after", metavar="CURSOR",
            help=f"Go on from this cursor: the `next` of an earlier answer of the API's "
                 f"{what}, or the one this command printed last. From the beginning "
                 f"without it.")(command)
    return decorate


def print_feed(store: Store, kind: str, after: str | None, follow: bool) -> None:
    """Print a feed (feed.ORDERS or feed.PETS) as JSON lines from the cursor (the
    beginning without one), then, with follow, every later change until interrupted
    (Ctrl-C, or SIGTERM from a service manager); the cursor to go on from last, on
    standard error, as `next: CURSOR`. An edited cursor is a usage error naming --after;
    another database's, the 410's sentence."""
    cursor = after
    if follow:  # a service manager's stop ends it as Ctrl-C does, saying where it was
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        while True:
            try:
                page = feed.changes(store, cursor, feed.LIMIT_MAX, kind)
            except InvalidParameter as exc:
                raise click.BadParameter(f"It {exc.message}", param_hint="--after") from None
            except ResyncRequired as exc:
                raise click.ClickException(exc.message) from None
            for text in page.items:
                click.echo(text)
            cursor = page.next
            if len(page.items) < feed.LIMIT_MAX:
                if not follow:
                    break
                time.sleep(feed.FOLLOW_SECONDS)
    except KeyboardInterrupt:
        pass
    say(f"next: {cursor}")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
