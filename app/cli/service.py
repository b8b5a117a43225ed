"""The service's own commands: `petstore init` (the database, and demo data), `petstore
serve` (gunicorn with the uvicorn worker) and `petstore backup`."""

from __future__ import annotations

import os
import resource
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

from app.cli._shared import current_settings, current_store, log, say
from app.cli.keys import create_key
from app.core import orders
from app.core.logs import configure_logging
from app.core.metrics import MADE_FOR_THIS_RUN
from app.core.setting_values import redacted

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


@click.command()
@click.option("--demo", is_flag=True, help="On an empty database, add demo orders and a Free key.")
def init(demo: bool) -> None:
    """Create the database, or bring its schema up to date (safe to run again).

    With --demo, an empty database also gets a handful of orders in every status and a
    demo Free key, printed once. A database that has orders or keys gets nothing added.
    """
    settings = current_settings()
    store = current_store()
    say(f"Database {redacted(settings.database)} is ready (schema version {store.migrate()}).")
    if not demo:
        return
    if store.count_orders() or store.list_keys():
        say("It already holds orders or keys, so no demo data was added.")
        say("Create another key with: petstore keys create --plan free --name NAME")
        return
    store.import_orders(orders.order_from_row(dict(row)) for row in DEMO_ORDERS)
    store.import_pets(DEMO_PETS)
    secret, key = create_key(store, plan="free", name="demo", per_minute=None, per_day=None)
    say(f"Added {len(DEMO_ORDERS)} demo orders and a demo Free key (id {key.id}).")
    say("The key is shown this once; keep it:")
    click.echo(secret)
    say(f"Try: curl -H 'Authorization: Bearer {secret}' http://{settings.bind}/v1/store/orders")
    say(f"The shop's console is at http://{settings.bind}/console/ once a user is made: "
        "petstore users add NAME")



@click.command()
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
    store = current_store()
    say(f"Backing up {redacted(current_settings().database)}...")
    try:
        store.backup(str(partial), progress=say)
        partial.rename(target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    say(f"Backed up {redacted(current_settings().database)} to {path} "
        f"({store.count_orders():,} orders).")



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


@click.command()
@click.option("--bind", help="Address to listen on (default PETSTORE_BIND, 127.0.0.1:8080).")
@click.option("--workers", type=click.IntRange(min=1), help="Worker processes (default 1).")
def serve(bind: str | None, workers: int | None) -> None:
    """Serve the API with gunicorn and the uvicorn worker (app/web/gunicorn_conf.py).

    The database is created or migrated first. Stop with Ctrl-C or SIGTERM: requests in
    flight get PETSTORE_GRACEFUL_TIMEOUT seconds to finish.
    """
    settings = current_settings()
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
    current_store().migrate()
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
    config = Path(__file__).parents[1] / "web" / "gunicorn_conf.py"
    argv = [sys.executable, "-m", "gunicorn", "--config", str(config),
            "--bind", bind, "--workers", str(workers), "wsgi:app"]
    os.execv(sys.executable, argv)

