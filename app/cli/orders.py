"""`petstore orders`: import, ship, complete and list orders, and follow the feed of
changes."""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any

import click
import orjson

from app.cli._shared import (
    ImportFailed,
    current_store,
    echo_json_array,
    feed_options,
    import_source,
    print_feed,
    read_rows,
    say,
)
from app.core import feed, orders, paging
from app.core.errors import (
    DuplicateOrder,
    InvalidParameter,
    OrderNotFound,
    PetstoreError,
    StockShortfall,
)
from app.core.storage import Store
from app.core.storage.records import Transition


@click.group("orders")
def orders_group() -> None:
    """Import, ship and list orders."""



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
    by default). Every row is checked first: one bad row, an id that exists already
    (without --upsert), or pending orders holding more units of a pet than its stock has,
    aborts the import and nothing is written.
    """
    name, fmt = import_source(file, fmt)
    valid: list[dict[str, Any]] = []
    seen: dict[int, str] = {}
    for where, row in read_rows(file, fmt, name):
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
    store = current_store()
    try:
        count = store.import_orders(valid, upsert=upsert)
    except DuplicateOrder as exc:
        raise ImportFailed(
            f"{seen.get(exc.order_id, name)}: {exc.message} Nothing was imported; "
            "use --upsert to replace existing orders."
        ) from None
    except StockShortfall as exc:  # D33: an import that would oversell fails whole
        raise ImportFailed(f"{name}: {exc.message}") from None
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
    store = current_store()
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
@feed_options("feed")
def orders_changes(after: str | None, follow: bool) -> None:
    """Print the feed of changed orders as JSON lines, as v2's /store/order-changes gives
    it: each order changed after the cursor, once, in its current state, in the order of
    the changes (every order, from the beginning). The cursor to go on from is printed
    last, on standard error, as `next: CURSOR`."""
    print_feed(current_store(), feed.ORDERS, after, follow)


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
    orders_json = paging.walk(current_store(), query)
    if as_json:
        echo_json_array(orders_json)
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

