"""A sale of the last units from two processes over one database (D33): on one SQLite file
and on one PostgreSQL, processes placing orders at once for one tracked pet sell exactly
the units there were, never more, and refuse no order while units remained (every
refusal says none were available). A seller killed with SIGKILL in the middle of a sale
leaves every reservation equal to its pending orders, as `petstore pets check` says."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from app.cli import main
from app.core import pets
from tests.core.storage.conftest import Place

UNITS = 60
ATTEMPTS = 50  # per process: 100 in all, for 60 units
THREADS = 6

# One process of the sale: THREADS threads placing orders of one unit for pet 1 through the
# API's own rule (orders.Placing), each under a key of its own. A 503 of the store (its
# busy timeout, under the other process's writes) is retried with the same key, as a
# client retries one: the key makes the retry safe. It says "ready", waits for a line on
# its standard input (both processes start together), prints "sold" as each order is
# placed, then the whole count as JSON.
SELLER = textwrap.dedent("""
    import json, sys, threading
    from app.core import orders
    from app.core.config import Settings
    from app.core.errors import OutOfStock, StoreUnavailable
    from app.core.storage import open_store

    database, name, attempts, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    store = open_store(Settings(database=database))
    placing = orders.Placing()
    sold, refused, lock = [], [], threading.Lock()

    def sell(worker):
        for n in range(worker, attempts, threads):
            while True:
                try:
                    placed = placing.place(store, {"petId": 1, "quantity": 1}, 1,
                                           f"{name}-{n}")
                except StoreUnavailable:
                    continue
                except OutOfStock as exc:
                    with lock:
                        refused.append(exc.available)
                else:
                    with lock:
                        sold.append(placed.order["id"])
                        print("sold", flush=True)
                break
        store.close()

    print("ready", flush=True)
    sys.stdin.readline()
    workers = [threading.Thread(target=sell, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    print(json.dumps({"sold": len(sold), "refused": refused}), flush=True)
""")
ROOT = Path(__file__).resolve().parents[3]


def seller(place: Place, name: str, attempts: int) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", SELLER, place.database, name, str(attempts), str(THREADS)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert process.stdout is not None and process.stdout.readline() == "ready\n"
    return process


def outcome(process: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    return dict(json.loads(out.splitlines()[-1]))


def test_two_processes_sell_exactly_the_units_there_were(place: Place) -> None:
    store = place.open()
    try:
        store.import_pets([{"id": 1, "name": "Rex", "stock": UNITS}])
        sellers = [seller(place, f"p{n}", ATTEMPTS) for n in range(2)]
        for process in sellers:  # both at once
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        results = [outcome(process) for process in sellers]
        assert sum(result["sold"] for result in results) == UNITS
        refusals = [available for result in results for available in result["refused"]]
        assert len(refusals) == 2 * ATTEMPTS - UNITS
        assert set(refusals) == {0}  # none refused while a unit remained
        found = store.get_versioned_pet(1)
        assert found is not None
        assert (found[0]["stock"], found[0]["reserved"], found[0]["available"],
                found[0]["status"]) == (UNITS, UNITS, 0, "pending")
        assert store.count_by_status()["pending"] == UNITS
        assert store.reservations_differing() == []
        assert store.inventory() == store.inventory_counted()
    finally:
        store.dispose()


def test_a_seller_killed_mid_sale_leaves_every_reservation_true(place: Place,
                                                                tmp_path: Path) -> None:
    store = place.open()
    try:
        store.import_pets([{"id": 1, "name": "Rex", "stock": 1_000_000}])
    finally:
        store.dispose()
    process = seller(place, "killed", 1_000_000)
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("go\n")
    process.stdin.flush()
    for _ in range(50):  # well into the sale, writes in flight
        assert process.stdout.readline() == "sold\n"
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL

    again = place.open()  # as the service's restart opens it
    try:
        held = again.count_by_status()["pending"]
        assert held >= 50
        found = again.get_versioned_pet(1)
        assert found is not None and found[0]["reserved"] == held
        assert pets.check(again).true
    finally:
        again.dispose()
    checked = CliRunner().invoke(main, ["pets", "check"],
                                 env={"PETSTORE_DATABASE": place.database})
    assert checked.exit_code == 0, checked.output
