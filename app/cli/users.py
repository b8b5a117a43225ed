"""`petstore users`: the console's users (D35): add (with a role, D38), list, disable,
enable, reset a password, and lift the sign-in throttle's locks of a name (D36). A user is
not an API key: it signs in to the console at /console/."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import TypeVar

import click

from app.cli._shared import current_store, echo_table, say
from app.core.errors import PetstoreError
from app.core.storage.console_statements import ConsoleUser
from app.core.users import accounts, throttle

T = TypeVar("T")


@click.group("users")
def users_group() -> None:
    """Add, list, disable and enable the console's users, reset their passwords, and lift
    the locks of too many failed sign-ins. The console (/console/) is for the shop's owners
    and staff: an owner does everything; staff work the orders and the stock, not the API
    keys, webhooks, users or the audit log. There is no default user: the first one added
    is an owner, who can add the rest in the console."""


def _core(rule: Callable[..., T], name: str) -> T:
    """rule(store, name), its refusal as the command's error message."""
    try:
        return rule(current_store(), name)
    except PetstoreError as exc:
        raise click.ClickException(exc.message) from None


@users_group.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(accounts.ROLES),
              help="owner (everything: also API keys, webhooks, users, the audit log) or "
                   "staff (orders and stock). Default: owner for the first user of the "
                   "store, staff for every later one.")
def users_add(name: str, role: str | None) -> None:
    """Add a user NAME and print a one-time password, alone, on standard output. It is
    shown only this once (the database keeps an argon2id hash of it) and must be changed
    at the first sign-in. The first user (`petstore users add owner`) is the shop's first
    owner, who adds the others in the console or here."""
    user, one_time = _core(functools.partial(accounts.add, role=role), name)
    say(f"Added the console user {user.name} ({user.role}). Its one-time password, to be "
        "changed at the first sign-in at /console/, is shown only this once:")
    click.echo(one_time)


def _row(user: ConsoleUser) -> dict[str, object]:
    return {"name": user.name, "role": user.role, "created_at": user.created_at,
            "last_sign_in_at": user.last_sign_in_at, "disabled_at": user.disabled_at,
            "second_factor": user.totp_secret is not None,
            "must_change_password": user.must_change_password}


def _status(user: ConsoleUser) -> str:
    if user.disabled_at:
        return f"disabled {user.disabled_at}"
    return "must change password" if user.must_change_password else "active"


@users_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON array on standard output.")
def users_list(as_json: bool) -> None:
    """List every user: its role, when added, when last signed in, whether a second factor
    (TOTP) is enrolled, and whether it is disabled or must change its password."""
    found = current_store().list_console_users()
    if as_json:
        click.echo(json.dumps([_row(user) for user in found], indent=2))
        return
    if not found:
        say("No console users yet. Add one with: petstore users add NAME")
        return
    echo_table(("NAME", "ROLE", "ADDED", "LAST SIGN-IN", "TOTP", "STATUS"),
               [(user.name, user.role, user.created_at, user.last_sign_in_at or "never",
                 "yes" if user.totp_secret else "no", _status(user)) for user in found])


@users_group.command("disable")
@click.argument("name")
def users_disable(name: str) -> None:
    """Disable a user: it can no longer sign in, and its sessions end at once, on every
    worker and host. The last enabled owner cannot be disabled: add or enable another
    owner first."""
    user = _core(accounts.disable, name)
    say(f"The console user {user.name} is disabled since {user.disabled_at}.")


@users_group.command("enable")
@click.argument("name")
def users_enable(name: str) -> None:
    """Let a disabled user sign in again."""
    say(f"The console user {_core(accounts.enable, name).name} may sign in again.")


@users_group.command("reset-password")
@click.argument("name")
@click.option("--second-factor", is_flag=True,
              help="Also remove the user's second factor (an authenticator lost).")
def users_reset_password(name: str, second_factor: bool) -> None:
    """Give a user a new one-time password, printed alone on standard output, to be
    changed at the next sign-in; the user's sessions end at once. Its second factor, if
    any, stays, unless --second-factor removes it too."""
    one_time = _core(functools.partial(accounts.reset_password, second_factor=second_factor),
                     name)
    say(f"The console user {name} has a new one-time password, shown only this once:")
    click.echo(one_time)


@users_group.command("unlock")
@click.argument("name")
def users_unlock(name: str) -> None:
    """Lift the locks that failed sign-ins put on a user: its name's failed password and
    code checks of the last 15 minutes no longer count, from any address or in all, on
    every worker and host, whatever PETSTORE_RATELIMIT_STORAGE. Says what they were, from
    the audit log."""
    lifted = _core(accounts.unlock, name)
    total = sum(lifted.failures.values())
    if not total:
        say(f"The console user {lifted.user.name} had no failed sign-ins since {lifted.since}"
            "; nothing was locked, and its count starts again from zero.")
        return
    say(f"Unlocked the console user {lifted.user.name}: {total} failed sign-ins since "
        f"{lifted.since} no longer count, on every worker and host.")
    locked = [address for address, count in lifted.failures.items()
              if count >= throttle.PAIR_FAILURES]
    echo_table(("FROM", "FAILED", "LOCKED"),
               [(address, str(count), "yes" if address in locked else "no")
                for address, count in lifted.failures.items()])
    if total >= throttle.NAME_FAILURES:
        say(f"The name itself was locked too ({throttle.NAME_FAILURES} failures from "
            "anywhere).")
