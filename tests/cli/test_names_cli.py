"""Names people read from the command line (D37): `pets add` and `update`, `pets import`,
`keys create --name`, `keys import` and `webhooks add --description` refuse a control or
direction character, saying which field; and a name stored before the rule (a hand edit
in sqlite3 here) is listed by `pets list`, `keys list`, `webhooks list` and `users list`
with those characters escaped, so that it cannot steer the terminal."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from app.core import names
from tests.cli.test_cli import run
from tests.cli.test_webhooks_cli import run as run_webhooks

OVERRIDE = "\u202egnp.exe"  # reads "exe.png"
CLEAR_SCREEN = "\x1b[2J\x1b[Hpwned"


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def _hand_edit(db: Path, sql: str, *params: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(sql, params)
    conn.close()


@pytest.mark.parametrize(("args", "hint"), [
    (("pets", "add", OVERRIDE), "NAME"),
    (("pets", "add", "Rex", "--category", "dogs\n"), "--category"),
    (("pets", "add", "Rex", "--tag", "big", "--tag", CLEAR_SCREEN), "--tag"),
], ids=["name", "category", "tag"])
def test_a_pet_with_an_unreadable_name_is_refused_naming_its_field(
        db: Path, args: tuple[str, ...], hint: str) -> None:
    refused = run(db, *args)
    assert refused.exit_code == 2, refused.output
    assert (f"Invalid value for {hint}: It must not hold control characters"
            in refused.stderr)
    assert "\x1b" not in refused.output and "\u202e" not in refused.output
    assert json.loads(run(db, "pets", "list", "--json").stdout) == []


def test_a_pet_update_and_an_import_refuse_them_too(db: Path, tmp_path: Path) -> None:
    assert run(db, "pets", "add", "Rex").exit_code == 0
    refused = run(db, "pets", "update", "1", "--name", "Rex\x00")
    assert refused.exit_code == 2
    assert "Invalid value for --name: It must not hold control" in refused.stderr
    rows = tmp_path / "pets.json"
    rows.write_text(json.dumps([{"name": "Tom"}, {"name": "Kit", "tags": ["a\u2066b"]}]))
    failed = run(db, "pets", "import", str(rows))
    assert failed.exit_code == 1
    assert "item 2: tags must not hold control characters" in failed.stderr
    assert [pet["name"] for pet in json.loads(run(db, "pets", "list", "--json").stdout)] == [
        "Rex"]


def test_a_key_name_and_a_webhook_description_are_refused(db: Path, tmp_path: Path) -> None:
    refused = run(db, "keys", "create", "--plan", "free", "--name", OVERRIDE)
    assert refused.exit_code == 2 and "the name must not hold control" in refused.stderr
    too_long = run(db, "keys", "create", "--plan", "free", "--name", "k" * 201)
    assert too_long.exit_code == 2 and "at most 200 characters" in too_long.stderr
    assert json.loads(run(db, "keys", "list", "--json").stdout) == []
    exported = tmp_path / "keys.json"
    exported.write_text(json.dumps([{"id": 1, "prefix": "psk_abcdefgh", "plan": "free",
                                     "created_at": "2026-11-28T10:00:00Z",
                                     "digest": "0" * 64, "name": CLEAR_SCREEN}]))
    failed = run(db, "keys", "import", str(exported))
    assert failed.exit_code == 1 and "item 1: the name must not hold" in failed.stderr
    added = run_webhooks(db, "add", "http://127.0.0.1:9/", "--description", CLEAR_SCREEN)
    assert added.exit_code == 1
    assert "description must not hold control characters" in added.stderr
    assert json.loads(run(db, "webhooks", "list", "--json").stdout) == []


def test_names_stored_before_the_rule_are_listed_escaped(db: Path) -> None:
    assert run(db, "pets", "add", "Rex", "--category", "dogs", "--tag", "big").exit_code == 0
    assert run(db, "keys", "create", "--plan", "free", "--name", "shop").exit_code == 0
    assert run_webhooks(db, "add", "http://127.0.0.1:9/", "--description",
                        "north").exit_code == 0
    assert run(db, "users", "add", "owner").exit_code == 0
    _hand_edit(db, "UPDATE pets SET name = ?, category = ?, tags = ?", OVERRIDE,
               CLEAR_SCREEN, json.dumps(["a\tb"]))
    _hand_edit(db, "UPDATE api_keys SET name = ?", CLEAR_SCREEN)
    _hand_edit(db, "UPDATE console_users SET name = ?", "own\x9ber")
    _hand_edit(db, "UPDATE webhook_endpoints SET description = ?", OVERRIDE)
    outputs = {"pets": run(db, "pets", "list").output, "keys": run(db, "keys", "list").output,
               "users": run(db, "users", "list").output,
               "webhooks": run_webhooks(db, "list").output}
    for command, output in outputs.items():
        assert not names.UNREADABLE.search(output.replace("\n", "")), command
    assert "\\u202egnp.exe" in outputs["pets"] and "\\x1b[2J\\x1b[Hpwned" in outputs["pets"]
    assert "a\\tb" in outputs["pets"]
    assert "\\x1b[2J\\x1b[Hpwned" in outputs["keys"] and "own\\x9ber" in outputs["users"]
    assert "\\u202egnp.exe" in outputs["webhooks"]
    # The JSON a script reads means the same, with those characters as \u escapes.
    listed = run(db, "pets", "list", "--json").stdout
    assert not names.UNREADABLE.search(listed.replace("\n", ""))
    assert json.loads(listed)[0]["name"] == OVERRIDE
