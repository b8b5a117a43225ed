"""`petstore pets`: import and list the pets the store knows."""

from __future__ import annotations

import json
from typing import IO

import click

from app.cli._shared import ImportFailed, current_store, import_source, read_rows, say
from app.core import orders, pets
from app.core.errors import DuplicatePet


@click.group("pets")
def pets_group() -> None:
    """Import and list the pets the store knows."""


@pets_group.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--format", "fmt", type=click.Choice(["json", "ndjson", "csv"]),
              help="The file's format; by default from its extension.")
@click.option("--upsert", is_flag=True, help="Replace pets whose id exists already.")
def pets_import(file: IO[str], fmt: str | None, upsert: bool) -> None:
    """Import pets from FILE (- for standard input): rows with id (optional) and name.

    One bad row, or an id that exists already (without --upsert), aborts the import with
    its line number, and nothing is written.
    """
    name, fmt = import_source(file, fmt)
    valid = []
    for where, row in read_rows(file, fmt, name):
        try:
            valid.append(pets.pet_from_row(row))
        except orders.InvalidOrder as exc:
            raise ImportFailed(f"{where}: {exc}") from None
    try:
        count = current_store().import_pets(valid, upsert=upsert)
    except DuplicatePet as exc:
        raise ImportFailed(f"{name}: {exc.message} Nothing was imported; use --upsert "
                           "to replace existing pets.") from None
    say(f"Imported {count:,} pets.")


@pets_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on standard output.")
def pets_list(as_json: bool) -> None:
    """List every pet by id."""
    rows = current_store().list_pets()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        say("No pets.")
    for row in rows:
        click.echo(f"{row['id']:>8}  {row['name']}")

