"""The `petstore` command: set up the database, manage API keys and orders, serve the API.

Everything a person reads goes to standard error; standard output carries only what a
script would capture (a new key, --json listings).
"""

from __future__ import annotations

import csv
import json
import logging
import os
import resource
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import click
import orjson

from app.core import feed, orders, paging, pets
from app.core import keys as api_keys
from app.core.config import Settings, SettingsError, redacted
from app.core.errors import (
    DuplicateKey,
    DuplicateOrder,
    DuplicatePet,
    InvalidParameter,
    OrderNotFound,
    PetstoreError,
    ResyncRequired,
)
from app.core.logs import configure_logging
from app.core.metrics import MADE_FOR_THIS_RUN
from app.core.storage import Store, open_store
from app.core.storage.records import PLANS, SCOPES, ApiKey, Transition

DEMO_ORDERS: tuple[dict[str, Any], ...] = (
    {"petId": 1, "quantity": 1, "status": "pending"},
    {"petId": 2, "quantity": 2, "status": "pending"},
    {"petId": 3, "quantity": 1, "status": "pending", "shipDate": "2026-12-01T09:00:00Z"},
    {"petId": 4, "quantity": 1, "status": "shipped", "shipDate": "2026-11-20T10:00:00Z",
     "complete": True},
    {"petId": 5, "quantity": 3, "status": "shipped", "shipDate": "2026-11-21T15:30:00Z"},
    {"petId": 6, "quantity": 1, "status": "cancelled"},
)
DEMO_PETS = ({"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}, {"id": 3, "name": "Polly"})

log = logging.getLogger("petstore.cli")


def say(message: str) -> None:
    """A line for the person at the terminal (standard error)."""
    click.echo(message, err=True)


def _settings() -> Settings:
    try:
        return Settings.from_env()
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None


def _store() -> Store:
    """The store of PETSTORE_DATABASE, its schema up to date, closed when the command ends."""
    settings = _settings()
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="petstore-orders")
def main() -> None:
    """Pet Store Orders: an OpenAPI-first HTTP/JSON service for a pet store's orders.

    The database is named by PETSTORE_DATABASE: a SQLite file (default
    instance/petstore.db) or a postgresql:// URL that several hosts share. Start with
    `petstore init --demo`, then `petstore serve`.
    """


@main.command()
@click.option("--demo", is_flag=True, help="On an empty database, add demo orders and a Free key.")
def init(demo: bool) -> None:
    """Create the database, or bring its schema up to date (safe to run again).

    With --demo, an empty database also gets a handful of orders in every status and a
    demo Free key, printed once. A database that has orders or keys gets nothing added.
    """
    settings = _settings()
    store = _store()
    say(f"Database {redacted(settings.database)} is ready (schema version {store.migrate()}).")
    if not demo:
        return
    if store.count_orders() or store.list_keys():
        say("It already holds orders or keys, so no demo data was added.")
        say("Create another key with: petstore keys create --plan free --name NAME")
        return
    store.import_orders(orders.order_from_row(dict(row)) for row in DEMO_ORDERS)
    store.import_pets(DEMO_PETS)
    secret, key = _create_key(store, plan="free", name="demo", per_minute=None, per_day=None)
    say(f"Added {len(DEMO_ORDERS)} demo orders and a demo Free key (id {key.id}).")
    say("The key is shown this once; keep it:")
    click.echo(secret)
    say(f"Try: curl -H 'Authorization: Bearer {secret}' http://{settings.bind}/v1/store/orders")


# keys -----------------------------------------------------------------------------------


@main.group()
def keys() -> None:
    """Create, list, rotate and revoke API keys, and move them between databases. Keys are
    named by their numeric id. A key has a plan (its quotas), a scope (read: GET only;
    write: everything) and may expire; running workers see a change within
    PETSTORE_KEY_CACHE_SECONDS."""


def _create_key(
    store: Store, *, plan: str, name: str, per_minute: int | None, per_day: int | None,
    scope: str = "write", expires_at: str | None = None,
) -> tuple[str, ApiKey]:
    new = api_keys.generate_key()
    key = store.create_key(
        digest=new.digest,
        prefix=new.prefix,
        name=name,
        plan=plan,
        per_minute=per_minute,
        per_day=per_day,
        now=orders.utc_now(),
        scope=scope,
        expires_at=expires_at,
    )
    return new.secret, key


PER_MINUTE = click.option(
    "--per-minute", type=click.IntRange(min=1), help="Enterprise only: requests a minute."
)
PER_DAY = click.option(
    "--per-day", type=click.IntRange(min=1), help="Enterprise only: requests a day."
)
EXPIRES_IN = click.option(
    "--expires-in", metavar="DURATION",
    help="Expire this long from now: a number and a unit, s, m, h, d or w (90d, 12h, 1d12h).")
EXPIRES_AT = click.option(
    "--expires-at", metavar="DATE-TIME",
    help="Expire at this date-time, with an offset (2027-03-01T00:00:00Z).")


def _expiry(expires_in: str | None, expires_at: str | None) -> str | None:
    try:
        return api_keys.expiry(expires_in, expires_at, time.time())
    except api_keys.InvalidKeyValue as exc:
        raise click.UsageError(exc.message) from None


@keys.command("create")
@click.option("--plan", type=click.Choice(PLANS), required=True, help="The key's plan.")
@click.option("--name", default="", help="Who or what the key is for.")
@PER_MINUTE
@PER_DAY
@click.option("--scope", type=click.Choice(SCOPES), default="write", show_default=True,
              help="read: only the operations that read (GET); write: every operation.")
@EXPIRES_IN
@EXPIRES_AT
def keys_create(plan: str, name: str, per_minute: int | None, per_day: int | None,
                scope: str, expires_in: str | None, expires_at: str | None) -> None:
    """Create a key and print it, alone, on standard output. It is shown only this once:
    the database keeps only its SHA-256 digest. Without --expires-in or --expires-at it
    never expires."""
    _check_plan_numbers(plan, per_minute, per_day)
    expires = _expiry(expires_in, expires_at)
    secret, key = _create_key(
        _store(), plan=plan, name=name, per_minute=per_minute, per_day=per_day, scope=scope,
        expires_at=expires,
    )
    until = f", expires {key.expires_at}" if key.expires_at else ""
    say(f"Created key {key.id} ({key.prefix}..., plan {plan}, scope {scope}{until}). "
        "It is shown only this once:")
    click.echo(secret)


def _check_plan_numbers(plan: str, per_minute: int | None, per_day: int | None) -> None:
    if plan == "enterprise" and (per_minute is None or per_day is None):
        raise click.UsageError("an enterprise key needs --per-minute and --per-day")
    if plan != "enterprise" and (per_minute is not None or per_day is not None):
        raise click.UsageError(
            f"the {plan} plan sets its own limits (x-plans in the OpenAPI document); "
            "--per-minute and --per-day are for enterprise keys"
        )


def _key_row(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "prefix": key.prefix,
        "name": key.name,
        "plan": key.plan,
        "per_minute": key.per_minute,
        "per_day": key.per_day,
        "scope": key.scope,
        "created_at": key.created_at,
        "expires_at": key.expires_at,
        "last_used_at": key.last_used_at,
        "revoked_at": key.revoked_at,
        "banned_until": key.banned_until,
        "previous_secret_until": key.previous_until,
    }


def _status(key: ApiKey, now: str) -> str:
    """What a person most needs to know of a key's state, one phrase."""
    if key.revoked_at:
        return f"revoked {key.revoked_at}"
    if key.expires_at and key.expires_at <= now:
        return f"expired {key.expires_at}"
    states = []
    if key.banned_until and key.banned_until > now:
        states.append(f"banned until {key.banned_until}")
    if key.previous_until and key.previous_until > now:
        states.append(f"old secret until {key.previous_until}")
    return ", ".join(states) or "active"


def _minute(moment: str | None) -> str:
    """A stored time to the minute (2026-11-23T17:40Z), or "never"."""
    return f"{moment[:16]}Z" if moment else "never"


def echo_table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]],
               right: frozenset[int] = frozenset()) -> None:
    """Rows under a header, every column as wide as its widest cell (right-aligned where
    its index is in right), two spaces apart: each column starts at the same place on
    every line."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=True)]
    for row in (header, *rows):
        cells = [cell.rjust(width) if i in right else cell.ljust(width)
                 for i, (cell, width) in enumerate(zip(row, widths, strict=True))]
        click.echo("  ".join(cells).rstrip())


@keys.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on standard output.")
def keys_list(as_json: bool) -> None:
    """List every key: id, visible prefix, plan, scope, when created, when it expires,
    when it was last used (to the minute), and whether it is revoked, expired, banned or
    within a rotation's grace."""
    found = _store().list_keys()
    if as_json:
        click.echo(json.dumps([_key_row(key) for key in found], indent=2))
        return
    if not found:
        say("No keys yet. Create one with: petstore keys create --plan free --name NAME")
        return
    now = orders.utc_now()
    rows = []
    for key in found:
        plan = key.plan
        if plan == "enterprise":
            plan += f" {key.per_minute}/min {key.per_day}/day"
        rows.append((str(key.id), key.prefix, plan, key.scope, key.created_at,
                     key.expires_at or "never", _minute(key.last_used_at), _status(key, now),
                     key.name or "-"))
    echo_table(("ID", "PREFIX", "PLAN", "SCOPE", "CREATED", "EXPIRES", "LAST USED", "STATUS",
                "NAME"), rows, right=frozenset({0}))


@keys.command("revoke")
@click.argument("key_id", type=int)
def keys_revoke(key_id: int) -> None:
    """Revoke a key. Running workers refuse it within PETSTORE_KEY_CACHE_SECONDS."""
    key = _key_or_fail(_store().revoke_key(key_id, orders.utc_now()), key_id)
    say(f"Key {key.id} ({key.prefix}...) is revoked since {key.revoked_at}.")


def _key_or_fail(key: ApiKey | None, key_id: int) -> ApiKey:
    if key is None:
        raise click.ClickException(f"no key has the id {key_id} (see petstore keys list)")
    return key


@keys.command("set-plan")
@click.argument("key_id", type=int)
@click.argument("plan", type=click.Choice(PLANS))
@PER_MINUTE
@PER_DAY
def keys_set_plan(key_id: int, plan: str, per_minute: int | None, per_day: int | None) -> None:
    """Move a key to another plan. Its quotas start afresh; running workers apply the
    change within PETSTORE_KEY_CACHE_SECONDS."""
    _check_plan_numbers(plan, per_minute, per_day)
    key = _key_or_fail(_store().set_plan(key_id, plan, per_minute, per_day), key_id)
    say(f"Key {key.id} ({key.prefix}...) is now on the {key.plan} plan.")


@keys.command("set-scope")
@click.argument("key_id", type=int)
@click.argument("scope", type=click.Choice(SCOPES))
def keys_set_scope(key_id: int, scope: str) -> None:
    """Give a key the scope read (only the operations that read) or write (every
    operation). Running workers apply it within PETSTORE_KEY_CACHE_SECONDS."""
    key = _key_or_fail(_store().set_scope(key_id, scope), key_id)
    say(f"Key {key.id} ({key.prefix}...) now has the {key.scope} scope.")


@keys.command("set-expiry")
@click.argument("key_id", type=int)
@EXPIRES_IN
@EXPIRES_AT
@click.option("--never", is_flag=True, help="Never expire.")
def keys_set_expiry(key_id: int, expires_in: str | None, expires_at: str | None,
                    never: bool) -> None:
    """Change when a key expires: --expires-in, --expires-at or --never (one of them).
    Past its expiry a key is refused with 401 api_key_expired."""
    if [expires_in is not None, expires_at is not None, never].count(True) != 1:
        raise click.UsageError("give one of --expires-in, --expires-at or --never")
    expires = None if never else _expiry(expires_in, expires_at)
    key = _key_or_fail(_store().set_expiry(key_id, expires), key_id)
    say(f"Key {key.id} ({key.prefix}...) "
        + (f"expires {key.expires_at}." if key.expires_at else "never expires."))


@keys.command("rotate")
@click.argument("key_id", type=int)
@click.option("--grace", default="24h", show_default=True, metavar="DURATION",
              help="How long the old secret keeps working (0s: not at all).")
def keys_rotate(key_id: int, grace: str) -> None:
    """Give a key a new secret and print it, alone, on standard output (shown this once).

    The key keeps its id, name, plan, scope, expiry, quota counters and any ban. Its old
    secret keeps working until the grace ends, so its holder can switch without a
    failed request; a second rotation within the grace ends the first old secret at once.
    """
    try:
        grace_seconds = api_keys.parse_duration(grace)
    except api_keys.InvalidKeyValue as exc:
        raise click.BadParameter(exc.message, param_hint="--grace") from None
    store = _store()
    existing = _key_or_fail(store.get_key(key_id), key_id)
    if not existing.active:
        raise click.ClickException(f"key {key_id} is revoked; create a new one instead")
    secret, rotated = api_keys.rotation(store, key_id, grace_seconds, time.time())
    key = _key_or_fail(rotated, key_id)
    say(f"Key {key.id} has a new secret ({key.prefix}...); the old one works until "
        f"{key.previous_until}. The new one is shown only this once:")
    click.echo(secret)


@keys.command("unban")
@click.argument("key_id", type=int)
def keys_unban(key_id: int) -> None:
    """Lift a key's ban (set after repeated requests within a 429's Retry-After)."""
    key = _key_or_fail(_store().unban_key(key_id), key_id)
    say(f"Key {key.id} ({key.prefix}...) is not banned.")


@keys.command("export")
@click.option("--json", "as_json", is_flag=True, help="A JSON array instead of CSV.")
def keys_export(as_json: bool) -> None:
    """Write every key to standard output, as CSV (or a JSON array with --json): its
    digests and metadata, never a secret (which the database does not hold). Load them
    into another database with `petstore keys import FILE`; they keep working there with
    the same secrets."""
    found = [api_keys.exported(key) for key in _store().list_keys()]
    if as_json:
        click.echo(json.dumps(found, indent=2))
    else:
        writer = csv.DictWriter(sys.stdout, fieldnames=api_keys.EXPORTED, lineterminator="\n")
        writer.writeheader()
        writer.writerows(found)
    say(f"Exported {len(found)} key(s).")


@keys.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option("--format", "fmt", type=click.Choice(["json", "csv"]),
              help="The file's format; by default from its extension (.csv, else JSON).")
def keys_import(file: IO[str], fmt: str | None) -> None:
    """Load keys from FILE (- for standard input), as `petstore keys export` wrote them.

    All or nothing: a bad row, or an id or digest that this database holds already,
    aborts the import and nothing is written. Each key keeps its id, so quota counters
    and bans in a shared Redis follow it.
    """
    name = "stdin" if file.name == "<stdin>" else file.name
    fmt = fmt or ("json" if name == "stdin" else _guess_format(name))
    loaded: list[ApiKey] = []
    for where, row in _rows(file, fmt, name, items="keys"):
        if not isinstance(row, dict):
            raise ImportFailed(f"{where}: expected an object of a key's fields")
        try:
            loaded.append(api_keys.key_from_export(row))
        except api_keys.InvalidKeyValue as exc:
            raise ImportFailed(f"{where}: {exc.message}") from None
    try:
        count = _store().import_keys(loaded)
    except DuplicateKey as exc:
        raise ImportFailed(f"{name}: {exc.message} Nothing was imported.") from None
    say(f"Imported {count} key(s).")


# orders ---------------------------------------------------------------------------------


@main.group("orders")
def orders_group() -> None:
    """Import, ship and list orders."""


class ImportFailed(click.ClickException):
    """A row that cannot be imported: where it is and why."""


def _rows(stream: IO[str], fmt: str, name: str,
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


def _guess_format(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return {".csv": "csv", ".ndjson": "ndjson", ".jsonl": "ndjson"}.get(suffix, "json")


@orders_group.command("import")
@click.argument("file", type=click.File("r", encoding="utf-8"))
@click.option(
    "--format", "fmt", type=click.Choice(["json", "ndjson", "csv"]),
    help="The file's format; by default from its extension (.csv, .ndjson or .jsonl, else JSON).",
)
@click.option("--upsert", is_flag=True, help="Replace orders whose id exists already.")
def orders_import(file: IO[str], fmt: str | None, upsert: bool) -> None:
    """Import orders from FILE (- for standard input): a JSON array, NDJSON or CSV.

    Rows use the API's field names: id (optional), petId, quantity, shipDate (ISO 8601
    with a time-zone offset), complete, status (pending, shipped or cancelled; pending
    by default). Every row is checked first: one bad row, or an id that exists already
    (without --upsert), aborts the import and nothing is written.
    """
    name = "stdin" if file.name == "<stdin>" else file.name
    fmt = fmt or ("json" if name == "stdin" else _guess_format(name))
    valid: list[dict[str, Any]] = []
    seen: dict[int, str] = {}
    for where, row in _rows(file, fmt, name):
        try:
            order = orders.order_from_row(row)
        except orders.InvalidOrder as exc:
            raise ImportFailed(f"{where}: {exc}") from None
        if "id" in order:
            if order["id"] in seen:
                raise ImportFailed(f"{where}: id {order['id']} appears again (first at "
                                   f"{seen[order['id']]})")
            seen[order["id"]] = where
        valid.append(order)
        if len(valid) % 100_000 == 0:
            say(f"checked {len(valid):,} rows...")
    store = _store()
    try:
        count = store.import_orders(valid, upsert=upsert)
    except DuplicateOrder as exc:
        raise ImportFailed(
            f"{seen.get(exc.order_id, name)}: {exc.message} Nothing was imported; "
            "use --upsert to replace existing orders."
        ) from None
    say(f"Imported {count:,} orders.")


@orders_group.command("ship")
@click.argument("order_ids", nargs=-1, required=True, type=int)
@click.option("--date", "ship_date", help="Ship date (ISO 8601 with offset); now by default.")
def orders_ship(order_ids: tuple[int, ...], ship_date: str | None) -> None:
    """Mark pending orders shipped and set their shipDate.

    A cancelled or unknown order is refused, and the command then exits with status 1.
    """
    try:
        when = orders.parse_time(ship_date, "--date") if ship_date else orders.utc_now()
    except orders.InvalidOrder as exc:
        raise click.BadParameter(str(exc), param_hint="--date") from None
    _move_each(order_ids, lambda store, order_id: orders.ship(store, order_id, when),
               f"shipped on {when}", "already shipped, left as it was")


@orders_group.command("complete")
@click.argument("order_ids", nargs=-1, required=True, type=int)
def orders_complete(order_ids: tuple[int, ...]) -> None:
    """Mark shipped orders complete (fulfilled).

    A pending, cancelled or unknown order is refused, and the command then exits with
    status 1.
    """
    _move_each(order_ids, orders.complete, "complete", "already complete, left as it was")


def _move_each(order_ids: tuple[int, ...], move: Callable[[Store, int], Transition],
               done: str, again: str) -> None:
    """Apply one rule of the state machine (app/core/orders.py) to each order, saying what
    became of it; exit 1 when any was refused."""
    store = _store()
    refused = 0
    for order_id in order_ids:
        try:
            result = move(store, order_id)
        except OrderNotFound:
            say(f"order {order_id}: no such order")
        except PetstoreError as exc:
            say(f"order {order_id}: refused: {exc.message}")
        else:
            say(f"order {order_id}: {done if result.changed else again}")
            continue
        refused += 1
    if refused:
        raise SystemExit(1)


@orders_group.command("changes")
@click.option("--after", metavar="CURSOR",
              help="Go on from this cursor: the `next` of an earlier answer of the API's "
                   "feed, or the one this command printed last. From the beginning without "
                   "it.")
@click.option("--follow", is_flag=True,
              help="Keep printing changes as they are made, until interrupted (Ctrl-C) or "
                   "stopped (SIGTERM).")
def orders_changes(after: str | None, follow: bool) -> None:
    """Print the feed of changed orders as JSON lines, as v2's /store/order-changes gives
    it: each order changed after the cursor, once, in its current state, in the order of
    the changes (every order, from the beginning). The cursor to go on from is printed
    last, on standard error, as `next: CURSOR`."""
    store = _store()
    cursor = after
    if follow:  # a service manager's stop ends it as Ctrl-C does, saying where it was
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        while True:
            try:
                page = feed.changes(store, cursor, feed.LIMIT_MAX)
            except InvalidParameter as exc:
                raise click.BadParameter(f"It {exc.message}", param_hint="--after") from None
            except ResyncRequired as exc:
                raise click.ClickException(exc.message) from None
            for text in page.orders:
                click.echo(text)
            cursor = page.next
            if len(page.orders) < feed.LIMIT_MAX:
                if not follow:
                    break
                time.sleep(feed.FOLLOW_SECONDS)
    except KeyboardInterrupt:
        pass
    say(f"next: {cursor}")


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@orders_group.command("list")
@click.option("--status", multiple=True, metavar="STATUS[,STATUS]",
              help="Only orders in these statuses: pending, shipped, cancelled (repeat the "
                   "option or separate them with commas).")
@click.option("--pet-id", type=int, help="Only orders for this pet.")
@click.option("--complete", type=click.BOOL, help="Only complete (true) or incomplete (false) "
                                                  "orders.")
@click.option("--ship-date-from", metavar="DATE-TIME",
              help="Only orders shipping at or after this date-time (with an offset).")
@click.option("--ship-date-to", metavar="DATE-TIME",
              help="Only orders shipping before this date-time (with an offset).")
@click.option("--sort", type=click.Choice(paging.SORTS), default="id", show_default=True,
              help="By id or shipDate, descending with a leading -; orders without a "
                   "shipDate come last.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on standard output.")
def orders_list(status: tuple[str, ...], pet_id: int | None, complete: bool | None,
                ship_date_from: str | None, ship_date_to: str | None, sort: str,
                as_json: bool) -> None:
    """List orders: all of them, or those the filters select (as v2's list does), read a
    page at a time however many there are."""
    try:
        query = paging.order_query(
            status=[s.strip() for value in status for s in value.split(",") if s.strip()],
            pet_id=pet_id, complete=complete, ship_date_from=ship_date_from,
            ship_date_to=ship_date_to, sort=sort)
    except InvalidParameter as exc:
        option = {"shipDateFrom": "--ship-date-from", "shipDateTo": "--ship-date-to"}
        raise click.BadParameter(f"It {exc.message}",
                                 param_hint=option.get(exc.name, f"--{exc.name}")) from None
    orders_json = paging.walk(_store(), query)
    if as_json:
        _echo_json_array(orders_json)
        return
    header = f"{'ID':>8}  {'STATUS':<10} {'PET':>8} {'QTY':>4}  {'SHIP DATE':<21} COMPLETE"
    shown = 0
    for text in orders_json:
        row = orjson.loads(text)
        if not shown:
            click.echo(header)
        shown += 1
        click.echo(
            f"{row['id']:>8}  {row['status']:<10} {row.get('petId', ''):>8} "
            f"{row.get('quantity', ''):>4}  {row.get('shipDate', ''):<21} "
            f"{'yes' if row['complete'] else 'no'}"
        )
    if not shown:
        say("No orders.")


def _echo_json_array(items: Iterator[str]) -> None:
    """A JSON array of already-encoded items, one a line, written as they come."""
    separator = "[\n  "
    for text in items:
        click.echo(separator + text, nl=False)
        separator = ",\n  "
    click.echo("[]" if separator == "[\n  " else "\n]")


# backup ---------------------------------------------------------------------------------


@main.command()
@click.argument("path", type=click.Path(dir_okay=False, writable=True))
def backup(path: str) -> None:
    """Copy the live database to PATH, safely while the service runs.

    The copy is consistent even under writes. For SQLite it is a database file, taken with
    SQLite's online backup API: restore by stopping the service and putting the copy in
    place of PETSTORE_DATABASE. For PostgreSQL it is pg_dump's custom format (pg_dump must
    be installed): restore with pg_restore --no-owner --dbname=URL PATH into an empty
    database. PATH must not exist yet.
    """
    target = Path(path)
    if target.exists():
        raise click.ClickException(f"{path} exists already; choose a new file")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    store = _store()
    say(f"Backing up {redacted(_settings().database)}...")
    try:
        store.backup(str(partial), progress=say)
        partial.rename(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    say(f"Backed up {redacted(_settings().database)} to {path} ({store.count_orders():,} orders).")


# pets -----------------------------------------------------------------------------------


@main.group("pets")
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
    name = "stdin" if file.name == "<stdin>" else file.name
    fmt = fmt or ("json" if name == "stdin" else _guess_format(name))
    valid = []
    for where, row in _rows(file, fmt, name):
        try:
            valid.append(pets.pet_from_row(row))
        except orders.InvalidOrder as exc:
            raise ImportFailed(f"{where}: {exc}") from None
    try:
        count = _store().import_pets(valid, upsert=upsert)
    except DuplicatePet as exc:
        raise ImportFailed(f"{name}: {exc.message} Nothing was imported; use --upsert "
                           "to replace existing pets.") from None
    say(f"Imported {count:,} pets.")


@pets_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on standard output.")
def pets_list(as_json: bool) -> None:
    """List every pet by id."""
    rows = _store().list_pets()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        say("No pets.")
    for row in rows:
        click.echo(f"{row['id']:>8}  {row['name']}")


# serve ----------------------------------------------------------------------------------


def _raise_open_files_limit() -> None:
    """Every client connection is a file descriptor: raise the soft limit of open files to
    the hard limit, which the workers inherit (each keeps its connection cap below it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # a hard limit of "unlimited" may not be settable
        log.warning("open files limit left at %d (raising it to %s failed: %s)", soft, hard, exc)


@main.command()
@click.option("--bind", help="Address to listen on (default PETSTORE_BIND, 127.0.0.1:8080).")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes (default 1).")
def serve(bind: str | None, workers: int | None) -> None:
    """Serve the API with gunicorn and the uvicorn worker (app/web/gunicorn_conf.py).

    The database is created or migrated first. Stop with Ctrl-C or SIGTERM: requests in
    flight get PETSTORE_GRACEFUL_TIMEOUT seconds to finish.
    """
    settings = _settings()
    bind = bind or settings.bind
    workers = workers or settings.workers
    if workers > 1 and settings.ratelimit_enabled and settings.ratelimit_storage.startswith(
        ("memory://", "async+memory://")
    ):
        raise click.UsageError(
            f"{workers} workers with PETSTORE_RATELIMIT_STORAGE=memory:// would each count "
            f"quotas on their own, allowing {workers} times every quota. Set "
            "PETSTORE_RATELIMIT_STORAGE=redis://127.0.0.1:6379/0 (a Redis all workers "
            "share), or serve with one worker."
        )
    _store().migrate()
    # Metrics summed over workers (prometheus-client's multiprocess mode): a fresh folder
    # for this run's files, unless the operator chose one; gunicorn's master removes the
    # one made here when it exits (app/web/gunicorn_conf.py).
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        folder = Path(tempfile.mkdtemp(prefix="petstore-metrics-"))
        (folder / MADE_FOR_THIS_RUN).touch()
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    # In the server's log, so in its shape (one JSON object a line, unless told text).
    configure_logging(settings)
    _raise_open_files_limit()
    log.info("serving %s on http://%s/v1 with %d worker(s)", redacted(settings.database), bind,
             workers)
    config = Path(__file__).parent / "web" / "gunicorn_conf.py"
    argv = [sys.executable, "-m", "gunicorn", "--config", str(config),
            "--bind", bind, "--workers", str(workers), "wsgi:app"]
    os.execv(sys.executable, argv)


if __name__ == "__main__":
    main()
