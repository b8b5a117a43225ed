"""`petstore pets`: the catalogue and its stock (D32-D34), through the same rules as v2's
catalogue: add, update, adjust and withdraw pets, list them, read the inventory, check
every reservation against the orders, and import pets."""

from __future__ import annotations

import uuid
from typing import IO, Any

import click
import orjson

from app.cli._shared import (
    ImportFailed,
    current_store,
    echo_json_array,
    echo_table,
    feed_options,
    import_source,
    print_feed,
    read_rows,
    say,
)
from app.core import feed, names, orders, pets
from app.core.errors import (
    DuplicatePet,
    InvalidParameter,
    PetstoreError,
    StockBelowReserved,
)
from app.core.storage.records import PET_STATUSES, PetWrite

# The option that stands for each field a rule may name.
OPTIONS = {"name": "--name", "category": "--category", "tags": "--tag",
           "photoUrls": "--photo-url", "stock": "--stock", "delta": "DELTA",
           "reason": "--reason", "status": "--status", "tag": "--tag",
           "Idempotency-Key": "--idempotency-key", "cursor": "--cursor"}


@click.group("pets")
def pets_group() -> None:
    """The catalogue and its stock: add, update, adjust, withdraw, list and import pets,
    read the inventory, and check every reservation against the orders."""


def _refused(exc: PetstoreError, argument: str | None = None) -> click.ClickException:
    """A rule's refusal as the command's one-line error (exit 1; 2 for a bad option, or
    for the name when argument says the command takes it as one: NAME)."""
    if isinstance(exc, InvalidParameter):
        hint = argument if argument and exc.name == "name" else OPTIONS.get(exc.name, exc.name)
        return click.BadParameter(f"It {exc.message}", param_hint=hint)
    return click.ClickException(exc.message)


def _show(written: PetWrite, done: str) -> None:
    """A written pet: a line for the person, the pet's JSON on standard output (a replayed
    one may be of a name stored before D37: its unreadable characters as escapes)."""
    pet = written.pet
    say(f"pet {pet['id']}: {done if not written.replayed else 'replayed the first answer'}"
        f" (version {written.version}, {pet['status']})")
    click.echo(names.json_shown(orjson.dumps(pet).decode()))


def _key(given: str | None) -> str:
    """The idempotency key of a write: the one given (a retry with it replays the first
    answer), else a new one."""
    if given is None:
        return f"cli-{uuid.uuid4()}"
    try:
        return orders.idempotency_key(given)
    except InvalidParameter as exc:
        raise _refused(exc) from None


KEY_HELP = ("An idempotency key of your own (1 to 255 printable ASCII characters): the same "
            "command again with it changes nothing and prints the first answer. A new one "
            "by default.")


@pets_group.command("add")
@click.argument("name")
@click.option("--category", help="The pet's category (at most 100 characters).")
@click.option("--tag", "tags", multiple=True,
              help="A tag (1 to 50 characters; repeat for more, at most 20).")
@click.option("--photo-url", "photo_urls", multiple=True,
              help="An http:// or https:// URL of a photo (repeat for more, at most 20).")
@click.option("--stock", type=int,
              help="Units in stock (0 to 1,000,000,000); without it the stock is not "
                   "tracked and orders are never refused for it.")
@click.option("--idempotency-key", "key", help=KEY_HELP)
def pets_add(name: str, category: str | None, tags: tuple[str, ...],
             photo_urls: tuple[str, ...], stock: int | None, key: str | None) -> None:
    """Add a pet named NAME to the catalogue, as v2's addPet does; print it as JSON."""
    body: dict[str, Any] = {"name": name, "tags": list(tags), "photoUrls": list(photo_urls)}
    if category is not None:
        body["category"] = category
    if stock is not None:
        body["stock"] = stock
    try:
        written = pets.add(current_store(), body, pets.OPERATOR, _key(key))
    except PetstoreError as exc:
        raise _refused(exc, "NAME") from None
    _show(written, "added")


@pets_group.command("update")
@click.argument("pet_id", type=int)
@click.option("--name", help="A new name (1 to 200 characters).")
@click.option("--category", help="A new category.")
@click.option("--no-category", is_flag=True, help="Remove the category.")
@click.option("--tag", "tags", multiple=True, help="The tags, all of them (repeat).")
@click.option("--no-tags", is_flag=True, help="Remove every tag.")
@click.option("--photo-url", "photo_urls", multiple=True,
              help="The photo URLs, all of them (repeat).")
@click.option("--no-photo-urls", is_flag=True, help="Remove every photo URL.")
@click.option("--stock", type=int,
              help="Units in stock; not below what pending orders hold.")
@click.option("--untracked", is_flag=True,
              help="Stop tracking the stock: orders are then never refused for it.")
@click.option("--patch", "patch_text", metavar="JSON",
              help="A JSON merge patch (RFC 7396) of name, category, tags, photoUrls and "
                   "stock, as v2's updatePet takes; the options above add to it.")
@click.option("--if-version", type=int,
              help="Change the pet only if it is at this version (its ETag), as If-Match.")
def pets_update(pet_id: int, name: str | None, category: str | None, no_category: bool,
                tags: tuple[str, ...], no_tags: bool, photo_urls: tuple[str, ...],
                no_photo_urls: bool, stock: int | None, untracked: bool,
                patch_text: str | None, if_version: int | None) -> None:
    """Change a pet, as v2's updatePet does (a merge patch: what is not named stays as it
    is); print it as JSON. A stock below what pending orders hold is refused."""
    patch: dict[str, Any] = {}
    if patch_text is not None:
        try:
            patch = orjson.loads(patch_text)
        except orjson.JSONDecodeError:
            raise click.BadParameter("It is not valid JSON.", param_hint="--patch") from None
        if not isinstance(patch, dict):
            raise click.BadParameter("It must be a JSON object.", param_hint="--patch")
    for given, field, value in ((name is not None, "name", name),
                                (category is not None, "category", category),
                                (no_category, "category", None),
                                (bool(tags), "tags", list(tags)),
                                (no_tags, "tags", None),
                                (bool(photo_urls), "photoUrls", list(photo_urls)),
                                (no_photo_urls, "photoUrls", None),
                                (stock is not None, "stock", stock),
                                (untracked, "stock", None)):
        if given:
            patch[field] = value
    if not patch:
        raise click.UsageError("Nothing to change: give an option, or --patch.")
    try:
        written = pets.update(current_store(), pet_id, patch, if_version)
    except PetstoreError as exc:
        raise _refused(exc) from None
    _show(written, "updated")


@pets_group.command("adjust", context_settings={"ignore_unknown_options": True})
@click.argument("pet_id", type=int)
@click.argument("delta", type=int)
@click.option("--reason", help="Why (at most 200 characters): a delivery, a breakage...")
@click.option("--idempotency-key", "key", help=KEY_HELP)
def pets_adjust(pet_id: int, delta: int, reason: str | None, key: str | None) -> None:
    """Add DELTA units to a pet's stock (a receipt of goods), or take them away with a
    negative DELTA (a write-off: `petstore pets adjust 7 -3`), as v2's adjustStock does;
    print the pet as JSON. Refused for a pet whose stock is not tracked, and below what
    pending orders hold."""
    try:
        written = pets.adjust(current_store(), pet_id, delta, reason, pets.OPERATOR,
                              _key(key))
    except PetstoreError as exc:
        raise _refused(exc) from None
    _show(written, f"stock adjusted by {delta:+d}")


@pets_group.command("withdraw")
@click.argument("pet_ids", nargs=-1, required=True, type=int)
def pets_withdraw(pet_ids: tuple[int, ...]) -> None:
    """Withdraw pets from the catalogue, as v2's withdrawPet does: each stays (orders name
    it) but takes no new order; its pending orders can still be shipped or cancelled. An
    unknown pet is refused, and the command then exits with status 1."""
    store = current_store()
    refused = 0
    for pet_id in pet_ids:
        try:
            pets.withdraw(store, pet_id)
        except PetstoreError as exc:
            say(f"pet {pet_id}: refused: {exc.message}")
            refused += 1
        else:
            say(f"pet {pet_id}: withdrawn")
    if refused:
        raise SystemExit(1)


@pets_group.command("list")
@click.option("--status", multiple=True, metavar="STATUS[,STATUS]",
              help=f"Only pets in these statuses: {', '.join(PET_STATUSES)} (repeat the "
                   "option or separate them with commas). Withdrawn pets are listed only "
                   "when named.")
@click.option("--tag", multiple=True, metavar="TAG",
              help="Only pets with any of these tags (repeat the option).")
@click.option("--category", help="Only pets of this category.")
@click.option("--json", "as_json", is_flag=True,
              help="Print a JSON array of the pets, as v2 gives them, on standard output.")
def pets_list(status: tuple[str, ...], tag: tuple[str, ...], category: str | None,
              as_json: bool) -> None:
    """List the catalogue's pets by id, as v2's listPets does, read a page at a time."""
    try:
        query = pets.pet_query(
            [s.strip() for value in status for s in value.split(",") if s.strip()],
            list(tag), category)
    except PetstoreError as exc:
        raise _refused(exc) from None
    found = pets.walk(current_store(), query)
    if as_json:
        echo_json_array(found)
        return
    rows = []
    for text in found:
        pet = orjson.loads(text)
        rows.append((str(pet["id"]), pet["name"], pet["status"],
                     str(pet.get("stock", "-")), str(pet["reserved"]),
                     str(pet.get("available", "-")), pet.get("category", ""),
                     ",".join(pet["tags"])))
    if not rows:
        say("No pets.")
        return
    echo_table(("ID", "NAME", "STATUS", "STOCK", "RESERVED", "AVAILABLE", "CATEGORY", "TAGS"),
               rows, right=frozenset({0, 3, 4, 5}))


@pets_group.command("inventory")
@click.option("--json", "as_json", is_flag=True,
              help="Print it as v2's getInventory answers, on standard output.")
def pets_inventory(as_json: bool) -> None:
    """The inventory, one moment's figures: units of orders by status, and the stock of the
    pets whose stock is tracked (on hand, held by pending orders, available; available
    leaves withdrawn pets out)."""
    figures = pets.inventory(current_store())
    if as_json:
        click.echo(orjson.dumps(figures).decode())
        return
    echo_table(("", "UNITS"), [
        *((f"orders {name}", f"{units:,}") for name, units in figures["orders"].items()),
        *((f"stock {name}", f"{units:,}") for name, units in figures["stock"].items())],
        right=frozenset({1}))


@pets_group.command("check")
def pets_check() -> None:
    """Count every pet's reservation anew from its pending orders, and the inventory's
    figures from the orders and the pets, and print where what the database keeps
    differs. Exits with status 1 when anything does (the database's triggers keep them
    true on every path, so a difference means they were bypassed), 0 when all agree."""
    checked = pets.check(current_store())
    for pet_id, reserved, held in checked.reservations:
        click.echo(f"pet {pet_id}: reserved {reserved}, but its pending orders hold {held}")
    for section, name, kept, counted in checked.figures:
        click.echo(f"inventory {section}.{name}: kept {kept}, counted {counted}")
    if not checked.true:
        raise SystemExit(1)
    say("Every reservation equals its pending orders, and the inventory agrees.")


@pets_group.command("changes")
@feed_options("feed of pets")
def pets_changes(after: str | None, follow: bool) -> None:
    """Print the feed of changed pets as JSON lines, as v2's /pet-changes gives it (D39):
    each pet changed after the cursor, once, as getPet answers it now (its available units
    included), in the order of the changes (every pet, from the beginning). The cursor to
    go on from is printed last, on standard error, as `next: CURSOR`."""
    print_feed(current_store(), feed.PETS, after, follow)


@pets_group.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--format", "fmt", type=click.Choice(["json", "ndjson", "csv"]),
              help="The file's format; by default from its extension.")
@click.option("--upsert", is_flag=True,
              help="Update pets whose id exists already (what their orders hold, and "
                   "their withdrawal, stay).")
def pets_import(file: IO[str], fmt: str | None, upsert: bool) -> None:
    """Import pets from FILE (- for standard input): rows with id (optional), name,
    category, tags, photoUrls and stock (optional; a CSV cell of tags or photoUrls is a
    JSON array, or values separated by |).

    One bad row, an id that exists already (without --upsert), or a stock below what the
    pet's pending orders hold aborts the import, and nothing is written.
    """
    name, fmt = import_source(file, fmt)
    valid = []
    for where, row in read_rows(file, fmt, name, items="pets"):
        try:
            valid.append(pets.pet_from_row(row))
        except orders.InvalidOrder as exc:
            raise ImportFailed(f"{where}: {exc}") from None
    try:
        count = current_store().import_pets(valid, upsert=upsert)
    except DuplicatePet as exc:
        raise ImportFailed(f"{name}: {exc.message} Nothing was imported; use --upsert "
                           "to replace existing pets.") from None
    except StockBelowReserved as exc:
        raise ImportFailed(f"{name}: {exc.message} Nothing was imported.") from None
    say(f"Imported {count:,} pets.")
