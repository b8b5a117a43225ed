"""`petstore pets`: the catalogue and its stock from the command line (D32-D34), through the
same rules as v2's catalogue, run in-process with click's runner on a real SQLite file."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import Result

from tests.cli.test_cli import run


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def pet_of(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_a_pet_added_updated_adjusted_and_withdrawn(db: Path) -> None:
    added = pet_of(run(db, "pets", "add", "Rex", "--category", "dogs", "--tag", "big",
                       "--tag", "brown", "--photo-url", "https://example.com/rex.jpg",
                       "--stock", "2"))
    assert added == {"id": 1, "name": "Rex", "category": "dogs", "tags": ["big", "brown"],
                     "photoUrls": ["https://example.com/rex.jpg"], "stock": 2,
                     "reserved": 0, "available": 2, "status": "available"}
    # With a key of one's own, the same command again adds nothing.
    first = run(db, "pets", "add", "Tom", "--idempotency-key", "tom-1")
    again = run(db, "pets", "add", "Tom", "--idempotency-key", "tom-1")
    assert pet_of(first) == pet_of(again) and "replayed" in again.stderr
    reused = run(db, "pets", "add", "Kit", "--idempotency-key", "tom-1")
    assert reused.exit_code == 1 and "Idempotency-Key was used before" in reused.stderr

    updated = pet_of(run(db, "pets", "update", "1", "--no-category", "--no-tags",
                         "--stock", "5"))
    assert "category" not in updated and updated["tags"] == [] and updated["stock"] == 5
    patched = pet_of(run(db, "pets", "update", "1", "--patch", '{"name": "Rex II"}'))
    assert patched["name"] == "Rex II"
    stale = run(db, "pets", "update", "1", "--name", "X", "--if-version", "1")
    assert stale.exit_code == 1 and "has changed since that version" in stale.stderr

    assert pet_of(run(db, "pets", "adjust", "1", "-3", "--reason", "broken"))["stock"] == 2
    assert pet_of(run(db, "pets", "adjust", "1", "4"))["stock"] == 6
    untracked = run(db, "pets", "adjust", "2", "1")
    assert untracked.exit_code == 1 and "not tracked" in untracked.stderr
    zero = run(db, "pets", "adjust", "1", "0")
    assert zero.exit_code == 2 and "must not be 0" in zero.stderr

    withdrawn = run(db, "pets", "withdraw", "1", "9")
    assert withdrawn.exit_code == 1
    assert "pet 1: withdrawn" in withdrawn.stderr and "No pet has the id 9" in withdrawn.stderr


def test_refusals_are_one_line_naming_the_option(db: Path) -> None:
    bad = run(db, "pets", "add", "Rex", "--tag", "a", "--tag", "a")
    assert bad.exit_code == 2 and "--tag" in bad.stderr and "twice" in bad.stderr
    url = run(db, "pets", "add", "Rex", "--photo-url", "ftp://x")
    assert url.exit_code == 2 and "--photo-url" in url.stderr
    nothing = run(db, "pets", "update", "1")
    assert nothing.exit_code == 2 and "Nothing to change" in nothing.stderr
    missing = run(db, "pets", "update", "7", "--name", "X")
    assert missing.exit_code == 1 and "No pet has the id 7" in missing.stderr


def test_the_list_the_inventory_and_the_check(db: Path, tmp_path: Path) -> None:
    run(db, "pets", "add", "Rex", "--stock", "3", "--tag", "dog")
    run(db, "pets", "add", "Tom", "--category", "cats")
    orders = tmp_path / "orders.json"
    orders.write_text(json.dumps([{"petId": 1, "quantity": 2}, {"petId": 2, "quantity": 5},
                                  {"petId": 1, "quantity": 1, "status": "shipped"}]))
    assert run(db, "orders", "import", str(orders)).exit_code == 0
    listed = run(db, "pets", "list")
    assert listed.exit_code == 0
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATUS", "STOCK", "RESERVED", "AVAILABLE",
                                "CATEGORY", "TAGS"]
    assert lines[1].split() == ["1", "Rex", "available", "3", "2", "1", "dog"]
    as_json = json.loads(run(db, "pets", "list", "--tag", "dog", "--json").stdout)
    assert [pet["name"] for pet in as_json] == ["Rex"]
    assert json.loads(run(db, "pets", "list", "--status", "withdrawn", "--json").stdout) == []
    wrong = run(db, "pets", "list", "--status", "lost")
    assert wrong.exit_code == 2 and "--status" in wrong.stderr

    inventory = json.loads(run(db, "pets", "inventory", "--json").stdout)
    assert inventory == {"orders": {"pending": 7, "shipped": 1, "cancelled": 0},
                         "stock": {"onHand": 3, "reserved": 2, "available": 1}}
    assert "orders pending" in run(db, "pets", "inventory").stdout

    checked = run(db, "pets", "check")
    assert checked.exit_code == 0 and "Every reservation equals" in checked.stderr
    with sqlite3.connect(db) as conn:  # a hand edit past the triggers
        conn.execute("UPDATE pets SET reserved = 0 WHERE id = 2")
    drifted = run(db, "pets", "check")
    assert drifted.exit_code == 1
    assert "pet 2: reserved 0, but its pending orders hold 5" in drifted.stdout


def test_an_import_that_would_oversell_fails_whole_naming_the_pet(db: Path) -> None:
    run(db, "pets", "add", "Rex", "--stock", "2")
    result = run(db, "orders", "import", "-",
                 input='[{"petId": 1, "quantity": 1}, {"petId": 1, "quantity": 3}]')
    assert result.exit_code == 1
    assert "2 units of pet 1 more than its stock has" in result.stderr
    assert json.loads(run(db, "pets", "inventory", "--json").stdout)["orders"]["pending"] == 0


def test_pets_import_takes_the_new_fields(db: Path, tmp_path: Path) -> None:
    path = tmp_path / "pets.csv"
    path.write_text("id,name,category,tags,photoUrls,stock\n"
                    "1,Rex,dogs,big|brown,https://example.com/rex.jpg,4\n"
                    "2,Tom,,,,\n")
    assert run(db, "pets", "import", str(path)).exit_code == 0
    listed = json.loads(run(db, "pets", "list", "--json").stdout)
    assert listed[0] == {"id": 1, "name": "Rex", "category": "dogs", "tags": ["big", "brown"],
                         "photoUrls": ["https://example.com/rex.jpg"], "stock": 4,
                         "reserved": 0, "available": 4, "status": "available"}
    assert listed[1] == {"id": 2, "name": "Tom", "tags": [], "photoUrls": [], "reserved": 0,
                         "status": "available"}
    run(db, "orders", "import", "-", input='[{"petId": 1, "quantity": 3}]')
    below = run(db, "pets", "import", "--upsert", "-",
                input='[{"id": 1, "name": "Rex", "stock": 2}]')
    assert below.exit_code == 1 and "must be at least 3" in below.stderr
    assert "Nothing was imported" in below.stderr
