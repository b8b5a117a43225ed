"""`petstore keys`: create, list, rotate and revoke API keys, and move them between
databases."""

from __future__ import annotations

import csv
import json
import sys
import time
from typing import IO, Any

import click

from app.cli._shared import (
    ImportFailed,
    current_store,
    echo_table,
    import_source,
    read_rows,
    say,
)
from app.core import keys as api_keys
from app.core import orders
from app.core.errors import DuplicateKey
from app.core.storage import Store
from app.core.storage.records import PLANS, SCOPES, ApiKey


@click.group()
def keys() -> None:
    """Create, list, rotate and revoke API keys, and move them between databases. Keys are
    named by their numeric id. A key has a plan (its quotas), a scope (read: GET only;
    write: everything) and may expire; running workers see a change within
    PETSTORE_KEY_CACHE_SECONDS."""


def create_key(
    store: Store, *, plan: str, name: str, per_minute: int | None, per_day: int | None,
    scope: str = "write", expires_at: str | None = None,
) -> tuple[str, ApiKey]:
    try:
        return api_keys.create(store, plan=plan, name=name, per_minute=per_minute,
                               per_day=per_day, scope=scope, expires_at=expires_at)
    except api_keys.InvalidKeyValue as exc:
        raise click.UsageError(exc.message) from None


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
    secret, key = create_key(
        current_store(), plan=plan, name=name, per_minute=per_minute, per_day=per_day, scope=scope,
        expires_at=expires,
    )
    until = f", expires {key.expires_at}" if key.expires_at else ""
    say(f"Created key {key.id} ({key.prefix}..., plan {plan}, scope {scope}{until}). "
        "It is shown only this once:")
    click.echo(secret)


def _check_plan_numbers(plan: str, per_minute: int | None, per_day: int | None) -> None:
    try:
        api_keys.check_plan_numbers(plan, per_minute, per_day)
    except api_keys.InvalidKeyValue as exc:
        raise click.UsageError(f"{exc.message} (--per-minute, --per-day)") from None


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


def _minute(moment: str | None) -> str:
    """A stored time to the minute (2026-11-23T17:40Z), or "never"."""
    return f"{moment[:16]}Z" if moment else "never"


@keys.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on standard output.")
def keys_list(as_json: bool) -> None:
    """List every key: id, visible prefix, plan, scope, when created, when it expires,
    when it was last used (to the minute), and whether it is revoked, expired, banned or
    within a rotation's grace."""
    found = current_store().list_keys()
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
                     key.expires_at or "never", _minute(key.last_used_at),
                     api_keys.state_of(key, now), key.name or "-"))
    echo_table(("ID", "PREFIX", "PLAN", "SCOPE", "CREATED", "EXPIRES", "LAST USED", "STATUS",
                "NAME"), rows, right=frozenset({0}))


@keys.command("revoke")
@click.argument("key_id", type=int)
def keys_revoke(key_id: int) -> None:
    """Revoke a key. Running workers refuse it within PETSTORE_KEY_CACHE_SECONDS."""
    key = _key_or_fail(current_store().revoke_key(key_id, orders.utc_now()), key_id)
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
    key = _key_or_fail(current_store().set_plan(key_id, plan, per_minute, per_day), key_id)
    say(f"Key {key.id} ({key.prefix}...) is now on the {key.plan} plan.")


@keys.command("set-scope")
@click.argument("key_id", type=int)
@click.argument("scope", type=click.Choice(SCOPES))
def keys_set_scope(key_id: int, scope: str) -> None:
    """Give a key the scope read (only the operations that read) or write (every
    operation). Running workers apply it within PETSTORE_KEY_CACHE_SECONDS."""
    key = _key_or_fail(current_store().set_scope(key_id, scope), key_id)
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
    key = _key_or_fail(current_store().set_expiry(key_id, expires), key_id)
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
    try:
        secret, key = api_keys.rotate(current_store(), key_id, grace_seconds, time.time())
    except api_keys.KeyNotFound:
        raise click.ClickException(f"no key has the id {key_id} (see petstore keys list)"
                                   ) from None
    except api_keys.KeyRevoked:
        raise click.ClickException(f"key {key_id} is revoked; create a new one instead"
                                   ) from None
    say(f"Key {key.id} has a new secret ({key.prefix}...); the old one works until "
        f"{key.previous_until}. The new one is shown only this once:")
    click.echo(secret)


@keys.command("unban")
@click.argument("key_id", type=int)
def keys_unban(key_id: int) -> None:
    """Lift a key's ban (set after repeated requests within a 429's Retry-After)."""
    key = _key_or_fail(current_store().unban_key(key_id), key_id)
    say(f"Key {key.id} ({key.prefix}...) is not banned.")


@keys.command("export")
@click.option("--json", "as_json", is_flag=True, help="A JSON array instead of CSV.")
def keys_export(as_json: bool) -> None:
    """Write every key to standard output, as CSV (or a JSON array with --json): its
    digests and metadata, never a secret (which the database does not hold). Load them
    into another database with `petstore keys import FILE`; they keep working there with
    the same secrets."""
    found = [api_keys.exported(key) for key in current_store().list_keys()]
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
    name, fmt = import_source(file, fmt)
    loaded: list[ApiKey] = []
    for where, row in read_rows(file, fmt, name, items="keys"):
        if not isinstance(row, dict):
            raise ImportFailed(f"{where}: expected an object of a key's fields")
        try:
            loaded.append(api_keys.key_from_export(row))
        except api_keys.InvalidKeyValue as exc:
            raise ImportFailed(f"{where}: {exc.message}") from None
    try:
        count = current_store().import_keys(loaded)
    except DuplicateKey as exc:
        raise ImportFailed(f"{name}: {exc.message} Nothing was imported.") from None
    say(f"Imported {count} key(s).")

