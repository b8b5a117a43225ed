"""`petstore keys` for keys with a lifecycle (D21): expiry, scope, rotation, an
aligned list, and export/import of digests and metadata, never a secret."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from app.core import keys
from app.core.config import Settings
from app.core.storage import open_store
from tests.cli.test_cli import run
from tests.support import ISSUED_SECRETS


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def created(db: Path, *args: str) -> str:
    result = run(db, "keys", "create", *args)
    assert result.exit_code == 0, result.output
    secret = result.stdout.strip()
    ISSUED_SECRETS.add(secret)
    return secret


def listed(db: Path) -> list[dict]:
    return json.loads(run(db, "keys", "list", "--json").stdout)


def test_create_with_a_scope_and_an_expiry_and_change_them(db: Path) -> None:
    created(db, "--plan", "free", "--scope", "read", "--expires-in", "90d")
    row = listed(db)[0]
    expires = dt.datetime.fromisoformat(row["expires_at"].replace("Z", "+00:00"))
    in_90_days = dt.datetime.now(dt.UTC) + dt.timedelta(days=90)
    assert abs((expires - in_90_days).total_seconds()) < 60
    assert row["scope"] == "read"
    assert run(db, "keys", "set-scope", "1", "write").exit_code == 0
    assert run(db, "keys", "set-expiry", "1", "--expires-at", "2027-03-01T01:00:00+01:00"
               ).exit_code == 0
    row = listed(db)[0]
    assert (row["scope"], row["expires_at"]) == ("write", "2027-03-01T00:00:00Z")
    assert run(db, "keys", "set-expiry", "1", "--never").exit_code == 0
    assert listed(db)[0]["expires_at"] is None


def test_bad_expiries_and_scopes_are_usage_errors_naming_the_option(db: Path) -> None:
    for args, words in ((["--expires-in", "ninety days"], "not a duration"),
                        (["--expires-at", "2027-03-01T00:00:00"], "time-zone offset"),
                        # the calendar's edge: before the year 1 once in UTC
                        (["--expires-at", "0001-01-01T00:00:00+01:00"], "between the years"),
                        (["--expires-in", "1d", "--expires-at", "2027-03-01T00:00:00Z"],
                         "not both"),
                        (["--scope", "admin"], "admin")):
        result = run(db, "keys", "create", "--plan", "free", *args)
        assert result.exit_code == 2, (args, result.output)
        assert words in result.stderr, result.stderr
    assert run(db, "keys", "list", "--json").stdout.strip() == "[]"
    created(db, "--plan", "free")
    both = run(db, "keys", "set-expiry", "1", "--never", "--expires-in", "1d")
    assert both.exit_code == 2 and "one of" in both.stderr
    assert run(db, "keys", "set-expiry", "7", "--never").exit_code == 1


def test_rotate_prints_a_new_secret_for_the_same_key(db: Path) -> None:
    old = created(db, "--plan", "pro", "--name", "shop")
    result = run(db, "keys", "rotate", "1", "--grace", "1h")
    assert result.exit_code == 0, result.output
    new = result.stdout.strip()
    ISSUED_SECRETS.add(new)
    assert new.startswith("psk_") and new != old and "\n" not in new
    store = open_store(Settings(database=str(db)))
    found = [store.find_key(keys.digest(secret)) for secret in (old, new)]
    assert [k.id if k else None for k in found] == [1, 1]
    row = listed(db)[0]
    assert (row["name"], row["plan"]) == ("shop", "pro")
    assert row["previous_secret_until"]
    assert "old secret until" in run(db, "keys", "list").stdout
    assert run(db, "keys", "rotate", "1", "--grace", "soon").exit_code == 2
    run(db, "keys", "revoke", "1")
    refused = run(db, "keys", "rotate", "1")
    assert refused.exit_code == 1 and "revoked" in refused.stderr
    assert run(db, "keys", "rotate", "9").exit_code == 1


def test_keys_list_lines_up_whatever_the_plans_names_and_statuses(db: Path) -> None:
    created(db, "--plan", "free", "--name", "a")
    created(db, "--plan", "pro", "--scope", "read")
    created(db, "--plan", "business", "--name", "a much longer name than the others have")
    created(db, "--plan", "enterprise", "--per-minute", "5000", "--per-day", "2000000")
    created(db, "--plan", "free", "--expires-at", "2020-01-01T00:00:00Z")
    store = open_store(Settings(database=str(db)))
    store.ban_key(1, "2099-01-01T00:00:00Z")
    store.revoke_key(2, "2026-01-01T00:00:00Z")
    rotated = run(db, "keys", "rotate", "3")
    ISSUED_SECRETS.add(rotated.stdout.strip())
    lines = run(db, "keys", "list").stdout.splitlines()
    assert len(lines) == 6
    header = lines[0]
    names = ["PREFIX", "PLAN", "SCOPE", "CREATED", "EXPIRES", "LAST USED", "STATUS", "NAME"]
    starts = [header.index(name) for name in names]
    for line in lines[1:]:
        for start in starts:
            assert line[start - 2:start] == "  " and line[start] != " ", (start, lines)
    text = "\n".join(lines)
    for words in ("banned until 2099", "revoked 2026", "expired 2020", "old secret until",
                  "enterprise 5000/min 2000000/day", "never"):
        assert words in text, words


def test_export_and_import_move_keys_without_a_secret(db: Path, tmp_path: Path) -> None:
    secrets = [created(db, "--plan", "free", "--name", "one"),
               created(db, "--plan", "enterprise", "--per-minute", "9", "--per-day", "99",
                       "--scope", "read", "--expires-in", "30d")]
    rotated = run(db, "keys", "rotate", "1").stdout.strip()
    ISSUED_SECRETS.add(rotated)
    for fmt, args in (("csv", []), ("json", ["--json"])):
        exported = run(db, "keys", "export", *args)
        assert exported.exit_code == 0, exported.output
        assert "Exported 2 key(s)" in exported.stderr
        assert not any(s in exported.stdout for s in (*secrets, rotated))
        path = tmp_path / f"keys.{fmt}"
        path.write_text(exported.stdout)
        other = tmp_path / f"other-{fmt}.db"
        result = run(other, "keys", "import", str(path))
        assert result.exit_code == 0, result.output
        assert listed(other) == listed(db)
        store = open_store(Settings(database=str(other)))
        for secret in (*secrets, rotated):
            assert store.find_key(keys.digest(secret)) is not None
        again = run(other, "keys", "import", str(path))
        assert again.exit_code == 1 and "exists already" in again.stderr
        assert "Nothing was imported" in again.stderr


def test_a_bad_row_aborts_the_import_naming_it(db: Path, tmp_path: Path) -> None:
    created(db, "--plan", "free")
    rows = json.loads(run(db, "keys", "export", "--json").stdout)
    rows.append({**rows[0], "id": 2, "digest": "psk_not_a_digest"})
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(rows))
    result = run(tmp_path / "other.db", "keys", "import", str(path))
    assert result.exit_code == 1
    assert "item 2" in result.stderr and "SHA-256" in result.stderr
    assert listed(tmp_path / "other.db") == []
