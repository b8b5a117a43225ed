"""The `petstore` command, run in-process with click's runner on a real SQLite file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import click
import pytest
from click.testing import CliRunner, Result

from app.cli import main
from app.core import keys
from app.core.config import Settings
from app.core.storage import open_store
from tests.support import PETSTORE


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "cli.db"


def run(db: Path, *args: str, input: str | None = None) -> Result:
    runner = CliRunner()
    return runner.invoke(main, list(args), input=input, env={"PETSTORE_DATABASE": str(db)})


def orders_in(db: Path) -> list[dict]:
    return open_store(Settings(database=str(db))).list_orders()


def commands(command: click.Command = main, path: tuple[str, ...] = ()
             ) -> Iterator[tuple[str, ...]]:
    """Every command and group of `petstore`, walked from the click group, as the words
    that name it."""
    yield path
    if isinstance(command, click.Group):
        context = click.Context(command)
        for name in command.list_commands(context):
            sub = command.get_command(context, name)
            assert sub is not None, name
            yield from commands(sub, (*path, name))


def test_every_command_has_a_help(db: Path) -> None:
    walked = list(commands())
    # The walk reaches the groups' own commands, those an earlier hand-kept list left out.
    assert {("backup",), ("keys", "set-plan"), ("keys", "unban"), ("orders", "complete"),
            ("contract", "diff"), ("users", "add"), ("webhooks", "listen")} <= set(walked)
    for command in walked:
        result = run(db, *command, "--help")
        assert result.exit_code == 0, (command, result.output)
        assert result.output.startswith(f"Usage: {' '.join(('main', *command))} "), command
        assert len(result.output.splitlines()) > 4, (command, result.output)


def test_init_demo_adds_orders_in_every_status_and_prints_a_working_key(db: Path) -> None:
    result = run(db, "init", "--demo")
    assert result.exit_code == 0, result.output
    secret = result.stdout.strip()
    assert secret.startswith("psk_") and "\n" not in secret
    statuses = {o["status"] for o in orders_in(db)}
    assert statuses == {"pending", "shipped", "cancelled"}
    store = open_store(Settings(database=str(db)))
    key = store.find_key(keys.digest(secret))
    assert key is not None and key.plan == "free"
    assert "/console/ once a user is made: petstore users add NAME" in result.stderr


def test_init_demo_twice_adds_nothing_and_says_how_to_make_a_key(db: Path) -> None:
    run(db, "init", "--demo")
    before = orders_in(db)
    again = run(db, "init", "--demo")
    assert again.exit_code == 0
    assert again.stdout == ""
    assert "petstore keys create" in again.stderr
    assert orders_in(db) == before


def test_keys_create_prints_the_key_alone_and_list_shows_no_secret(db: Path) -> None:
    created = run(db, "keys", "create", "--plan", "pro", "--name", "shop")
    assert created.exit_code == 0, created.output
    secret = created.stdout.strip()
    assert secret.startswith("psk_") and len(secret) > 40
    listing = run(db, "keys", "list")
    assert secret[:12] in listing.stdout and secret not in listing.stdout
    assert "pro" in listing.stdout and "shop" in listing.stdout
    rows = json.loads(run(db, "keys", "list", "--json").stdout)
    assert rows[0]["plan"] == "pro" and rows[0]["revoked_at"] is None
    assert secret not in json.dumps(rows)


def test_enterprise_keys_need_their_own_numbers_and_others_refuse_them(db: Path) -> None:
    assert run(db, "keys", "create", "--plan", "enterprise").exit_code == 2
    assert run(db, "keys", "create", "--plan", "free", "--per-minute", "5").exit_code == 2
    result = run(db, "keys", "create", "--plan", "enterprise", "--per-minute", "5",
                 "--per-day", "50")
    assert result.exit_code == 0
    rows = json.loads(run(db, "keys", "list", "--json").stdout)
    assert (rows[0]["per_minute"], rows[0]["per_day"]) == (5, 50)


def test_keys_revoke_marks_the_key_and_an_unknown_id_fails(db: Path) -> None:
    run(db, "keys", "create", "--plan", "free")
    assert run(db, "keys", "revoke", "1").exit_code == 0
    assert json.loads(run(db, "keys", "list", "--json").stdout)[0]["revoked_at"]
    missing = run(db, "keys", "revoke", "42")
    assert missing.exit_code == 1 and "no key has the id 42" in missing.stderr


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("orders.json", '[{"id": 1, "petId": 3}, {"id": 2, "status": "shipped",'
                        ' "shipDate": "2026-01-01T10:00:00+01:00"}]'),
        ("orders.ndjson", '{"id": 1, "petId": 3}\n\n{"id": 2, "status": "shipped",'
                          ' "shipDate": "2026-01-01T10:00:00+01:00"}\n'),
        ("orders.csv", "id,petId,status,shipDate\n1,3,,\n2,,shipped,2026-01-01T10:00:00+01:00\n"),
    ],
)
def test_import_reads_json_ndjson_and_csv(db: Path, tmp_path: Path, name: str,
                                          content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    result = run(db, "orders", "import", str(path))
    assert result.exit_code == 0, result.output
    assert orders_in(db) == [
        {"id": 1, "petId": 3, "complete": False, "status": "pending"},
        {"id": 2, "shipDate": "2026-01-01T09:00:00Z", "complete": False, "status": "shipped"},
    ]


def test_import_from_standard_input(db: Path) -> None:
    result = run(db, "orders", "import", "-", input='[{"petId": 1}]')
    assert result.exit_code == 0, result.output
    assert len(orders_in(db)) == 1


@pytest.mark.parametrize(
    ("name", "content", "where", "reason"),
    [
        ("bad.csv", "id,quantity\n1,2\n2,x\n", "bad.csv line 3", "quantity must be a whole"),
        ("bad.ndjson", '{"id": 1}\n{"id": 2, "status": "lost"}\n', "bad.ndjson line 2",
         "status must be one of"),
        ("bad.ndjson", '{"id": 1}\n{oops\n', "bad.ndjson line 2", "not valid JSON"),
        ("bad.json", '[{"id": 1}, {"id": 1}]', "bad.json item 2", "appears again"),
        ("bad.json", '{"id": 1}', "bad.json", "expected a JSON array"),
    ],
)
def test_a_bad_row_aborts_the_whole_import_naming_its_line(
    db: Path, tmp_path: Path, name: str, content: str, where: str, reason: str
) -> None:
    path = tmp_path / name
    path.write_text(content)
    result = run(db, "orders", "import", str(path))
    assert result.exit_code == 1
    assert where in result.stderr and reason in result.stderr, result.stderr
    assert orders_in(db) == []


def test_an_existing_id_aborts_unless_upsert(db: Path) -> None:
    run(db, "orders", "import", "-", input='[{"id": 1}]')
    result = run(db, "orders", "import", "-", input='[{"id": 2}, {"id": 1, "quantity": 5}]')
    assert result.exit_code == 1 and "id 1 exists already" in result.stderr
    assert [o["id"] for o in orders_in(db)] == [1]
    result = run(db, "orders", "import", "--upsert", "-",
                 input='[{"id": 2}, {"id": 1, "quantity": 5}]')
    assert result.exit_code == 0
    assert orders_in(db)[0]["quantity"] == 5


def test_ship_marks_pending_orders_and_refuses_cancelled_ones(db: Path) -> None:
    run(db, "orders", "import", "-",
        input='[{"id": 1}, {"id": 2}, {"id": 3, "status": "cancelled"}]')
    result = run(db, "orders", "ship", "1", "2", "--date", "2026-03-01T12:00:00+00:00")
    assert result.exit_code == 0, result.output
    shipped = orders_in(db)
    assert [o["status"] for o in shipped] == ["shipped", "shipped", "cancelled"]
    assert shipped[0]["shipDate"] == "2026-03-01T12:00:00Z"
    refused = run(db, "orders", "ship", "3", "9")
    assert refused.exit_code == 1
    assert "order 3: refused: Order 3 is cancelled and cannot be shipped." in refused.stderr
    assert "order 9: no such order" in refused.stderr
    again = run(db, "orders", "ship", "1")
    assert again.exit_code == 0 and "order 1: already shipped, left as it was" in again.stderr
    bad_date = run(db, "orders", "ship", "1", "--date", "soon")
    assert bad_date.exit_code == 2 and "ISO 8601" in bad_date.stderr


def test_complete_marks_shipped_orders_and_refuses_the_others(db: Path) -> None:
    run(db, "orders", "import", "-", input='[{"id": 1, "status": "shipped"}, {"id": 2}, '
                                           '{"id": 3, "status": "cancelled"}]')
    done = run(db, "orders", "complete", "1")
    assert done.exit_code == 0 and "order 1: complete" in done.stderr
    assert orders_in(db)[0]["complete"] is True
    again = run(db, "orders", "complete", "1")
    assert again.exit_code == 0 and "already complete, left as it was" in again.stderr
    refused = run(db, "orders", "complete", "2", "3", "9")
    assert refused.exit_code == 1
    assert "order 2: refused: Order 2 has not shipped yet" in refused.stderr
    assert "order 3: refused: Order 3 is cancelled and cannot be completed." in refused.stderr
    assert "order 9: no such order" in refused.stderr
    assert [o["complete"] for o in orders_in(db)] == [True, False, False]


def test_orders_list_filters_by_status_and_prints_json(db: Path) -> None:
    run(db, "orders", "import", "-", input='[{"id": 1}, {"id": 2, "status": "shipped"}]')
    rows = json.loads(run(db, "orders", "list", "--status", "shipped", "--json").stdout)
    assert [o["id"] for o in rows] == [2]
    table = run(db, "orders", "list").stdout
    assert "pending" in table and "shipped" in table


def test_orders_changes_prints_the_feed_as_json_lines_and_goes_on_from_its_cursor(
        db: Path) -> None:
    run(db, "orders", "import", "-", input='[{"id": 1}, {"id": 2}, {"id": 3}]')
    first = run(db, "orders", "changes")
    assert first.exit_code == 0, first.output
    assert [json.loads(line)["id"] for line in first.stdout.splitlines()] == [1, 2, 3]
    cursor = first.stderr.strip().rsplit("next: ", 1)[1]
    assert run(db, "orders", "changes", "--after", cursor).stdout == ""

    run(db, "orders", "ship", "2")
    run(db, "orders", "import", "--upsert", "-", input='[{"id": 1, "quantity": 5}]')
    later = run(db, "orders", "changes", "--after", cursor)
    assert [(o["id"], o["status"]) for o in map(json.loads, later.stdout.splitlines())] == [
        (2, "shipped"), (1, "pending")]
    assert later.stderr.strip().rsplit("next: ", 1)[1] != cursor


def test_orders_changes_refuses_an_edited_cursor_and_one_of_another_database(
        db: Path, tmp_path: Path) -> None:
    run(db, "orders", "import", "-", input='[{"id": 1}]')
    cursor = run(db, "orders", "changes").stderr.strip().rsplit("next: ", 1)[1]
    edited = run(db, "orders", "changes", "--after", cursor[:-3])
    assert edited.exit_code == 2 and "--after" in edited.stderr, edited.stderr
    other = tmp_path / "other.db"
    run(other, "orders", "import", "-", input='[{"id": 1}, {"id": 2}]')
    elsewhere = run(other, "orders", "changes", "--after", cursor)
    assert elsewhere.exit_code == 1 and "start again without" in elsewhere.stderr
    assert "Traceback" not in elsewhere.output + edited.output


def test_pets_changes_follows_the_catalogue_and_refuses_the_orders_cursor(
        db: Path) -> None:
    run(db, "pets", "import", "-", input='[{"id": 1, "name": "Rex", "stock": 1}, '
                                         '{"id": 2, "name": "Tom"}]')
    first = run(db, "pets", "changes")
    assert first.exit_code == 0, first.output
    assert [json.loads(line)["id"] for line in first.stdout.splitlines()] == [1, 2]
    cursor = first.stderr.strip().rsplit("next: ", 1)[1]
    assert run(db, "pets", "changes", "--after", cursor).stdout == ""
    run(db, "orders", "import", "-", input='[{"id": 1, "petId": 1, "quantity": 1}]')
    run(db, "pets", "withdraw", "2")
    later = run(db, "pets", "changes", "--after", cursor)
    assert [(p["id"], p["available"], p["status"])
            for p in map(json.loads, later.stdout.splitlines())] == [
        (1, 0, "pending"), (2, 0, "withdrawn")]
    orders_cursor = run(db, "orders", "changes").stderr.strip().rsplit("next: ", 1)[1]
    mixed = run(db, "pets", "changes", "--after", orders_cursor)
    assert mixed.exit_code == 2 and "--after" in mixed.stderr, mixed.stderr
    assert "Traceback" not in mixed.output


def test_orders_list_takes_v2s_filters_and_sorts(db: Path) -> None:
    run(db, "orders", "import", "-", input=json.dumps([
        {"id": 1, "petId": 7, "shipDate": "2026-11-02T10:00:00Z"},
        {"id": 2, "petId": 7, "status": "shipped", "shipDate": "2026-11-05T10:00:00Z",
         "complete": True},
        {"id": 3, "petId": 8, "status": "cancelled"},
        {"id": 4, "petId": 7, "shipDate": "2026-11-09T10:00:00+01:00"},
    ]))

    def ids(*options: str) -> list[int]:
        result = run(db, "orders", "list", "--json", *options)
        assert result.exit_code == 0, result.output
        return [order["id"] for order in json.loads(result.stdout)]

    assert ids("--status", "pending,shipped", "--sort", "-shipDate") == [4, 2, 1]
    assert ids("--status", "pending", "--status", "cancelled") == [1, 3, 4]
    assert ids("--pet-id", "7", "--complete", "false") == [1, 4]
    assert ids("--ship-date-from", "2026-11-05T10:00:00Z",
               "--ship-date-to", "2026-11-09T09:00:00Z") == [2]
    assert ids("--sort", "shipDate") == [1, 2, 4, 3]  # without a shipDate: last
    assert ids("--pet-id", "99") == []
    for option, value in (("--status", "lost"), ("--ship-date-from", "yesterday")):
        refused = run(db, "orders", "list", option, value)
        assert refused.exit_code == 2 and option in refused.stderr, refused.stderr
        assert "Traceback" not in refused.output


BAD_SETTINGS = [
    ("BUSY_TIMEOUT_MS", "5000"),
    ("LOG_LEVEL", "verbose"),  # once passed the check and failed later in logging
    ("BIND", "localhost"),
    ("BIND", "127.0.0.1:99999"),
    ("METRICS_ALLOW", "10.0.0.0/8,intranet"),
    ("FORWARDED_ALLOW_IPS", "proxy.local"),
    ("CORS_ORIGINS", "https://shop.example.com/app"),
    ("RATELIMIT_STORAGE", "redis"),
    ("WORKERS", "0"),
    ("CONSOLE_HOSTS", "shop.example:443"),  # names without ports (D36)
    ("CONSOLE_HOSTS", "*"),
    ("CONSOLE_HOSTS", "[not-an-address]"),
]


@pytest.mark.parametrize(("name", "value"), BAD_SETTINGS)
def test_a_bad_setting_is_a_usage_error_not_a_traceback(db: Path, name: str,
                                                         value: str) -> None:
    env = {"PETSTORE_DATABASE": str(db), f"PETSTORE_{name}": value}
    for command in (["keys", "list"], ["serve"]):
        result = CliRunner().invoke(main, command, env=env)
        assert result.exit_code == 2, result.output
        assert f"PETSTORE_{name}" in result.stderr and "Traceback" not in result.output


def test_set_plan_moves_a_key_and_checks_enterprise_numbers(db: Path) -> None:
    run(db, "keys", "create", "--plan", "free")
    assert run(db, "keys", "set-plan", "1", "enterprise").exit_code == 2
    assert run(db, "keys", "set-plan", "1", "pro", "--per-day", "5").exit_code == 2
    result = run(db, "keys", "set-plan", "1", "enterprise", "--per-minute", "7",
                 "--per-day", "70")
    assert result.exit_code == 0, result.output
    row = json.loads(run(db, "keys", "list", "--json").stdout)[0]
    assert (row["plan"], row["per_minute"], row["per_day"]) == ("enterprise", 7, 70)
    assert run(db, "keys", "set-plan", "1", "pro").exit_code == 0
    row = json.loads(run(db, "keys", "list", "--json").stdout)[0]
    assert (row["plan"], row["per_minute"], row["per_day"]) == ("pro", None, None)
    assert run(db, "keys", "set-plan", "9", "pro").exit_code == 1


def test_keys_list_shows_a_ban_and_unban_lifts_it(db: Path) -> None:
    run(db, "keys", "create", "--plan", "free")
    open_store(Settings(database=str(db))).ban_key(1, "2099-01-01T00:00:00Z")
    assert "banned until 2099-01-01T00:00:00Z" in run(db, "keys", "list").stdout
    assert json.loads(run(db, "keys", "list", "--json").stdout)[0]["banned_until"]
    assert run(db, "keys", "unban", "1").exit_code == 0
    assert "active" in run(db, "keys", "list").stdout
    assert run(db, "keys", "unban", "9").exit_code == 1


def test_backup_copies_a_live_database_and_refuses_to_overwrite(db: Path, tmp_path: Path) -> None:
    run(db, "orders", "import", "-", input='[{"id": 1}, {"id": 2, "status": "shipped"}]')
    run(db, "keys", "create", "--plan", "free")
    target = tmp_path / "backups" / "copy.db"
    result = run(db, "backup", str(target))
    assert result.exit_code == 0, result.output
    assert "2 orders" in result.stderr
    copy = open_store(Settings(database=str(target)))
    assert copy.list_orders() == orders_in(db)
    assert copy.list_keys() == open_store(Settings(database=str(db))).list_keys()
    assert copy.check()["journal_mode"] == "wal"
    again = run(db, "backup", str(target))
    assert again.exit_code == 1 and "exists already" in again.stderr
    assert not list(target.parent.glob("*.partial"))


def test_pets_import_and_list(db: Path, tmp_path: Path) -> None:
    path = tmp_path / "pets.csv"
    path.write_text("id,name\n1,Rex\n2,Tom\n")
    assert run(db, "pets", "import", str(path)).exit_code == 0
    assert json.loads(run(db, "pets", "list", "--json").stdout) == [
        {"id": n, "name": name, "tags": [], "photoUrls": [], "reserved": 0,
         "status": "available"} for n, name in ((1, "Rex"), (2, "Tom"))]
    bad = run(db, "pets", "import", "-", input='[{"id": 3, "name": "Ok"}, {"name": ""}]')
    assert bad.exit_code == 1 and "stdin item 2: name must not be empty" in bad.stderr
    again = run(db, "pets", "import", "-", input='[{"id": 1, "name": "Rex II"}]')
    assert again.exit_code == 1 and "exists already" in again.stderr
    assert run(db, "pets", "import", "--upsert", "-",
               input='[{"id": 1, "name": "Rex II"}]').exit_code == 0
    assert "Rex II" in run(db, "pets", "list").stdout


def test_a_database_of_an_unknown_kind_is_refused_naming_the_variable() -> None:
    result = CliRunner().invoke(main, ["init"], env={"PETSTORE_DATABASE": "mysql://db/shop"})
    assert result.exit_code == 2
    assert "PETSTORE_DATABASE='mysql://db/shop'" in result.output
    assert "postgresql://" in result.output


def test_sqlite_urls_name_the_same_file_as_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  ) -> None:
    monkeypatch.chdir(tmp_path)
    relative = CliRunner().invoke(main, ["init", "--demo"],
                                  env={"PETSTORE_DATABASE": "sqlite:///shop.db"})
    assert relative.exit_code == 0, relative.output
    absolute = run(tmp_path / "shop.db", "orders", "list", "--json")
    assert len(json.loads(absolute.stdout)) == 6
    again = CliRunner().invoke(main, ["orders", "list", "--json"],
                               env={"PETSTORE_DATABASE": f"sqlite:///{tmp_path}/shop.db"})
    assert json.loads(again.stdout) == json.loads(absolute.stdout)


def test_postgres_commands_never_print_the_password(postgres_database: str) -> None:
    """The URL's password is shown as *** by init and by errors alike."""
    url = urlsplit(postgres_database)
    login = f"{url.username or 'postgres'}:hunter2@{url.hostname}"
    with_password = url._replace(netloc=f"{login}:{url.port or 5432}").geturl()
    result = CliRunner().invoke(main, ["init", "--demo"],
                                env={"PETSTORE_DATABASE": with_password})
    assert result.exit_code == 0, result.output
    assert "hunter2" not in result.output and ":***@" in result.output
    unreachable = url._replace(netloc=f"{login}:1", path="/nowhere").geturl()
    failed = CliRunner().invoke(main, ["orders", "list"],
                                env={"PETSTORE_DATABASE": unreachable})
    assert failed.exit_code == 1
    assert "cannot open the database" in failed.output and ":***@" in failed.output
    assert "hunter2" not in failed.output


def test_a_postgresql_backup_shows_that_it_is_working(postgres_database: str,
                                                       tmp_path: Path) -> None:
    """Issue 19: pg_dump's --verbose lines, condensed: the schema, then each table."""
    env = {"PETSTORE_DATABASE": postgres_database}
    assert CliRunner().invoke(main, ["init", "--demo"], env=env).exit_code == 0
    result = CliRunner().invoke(main, ["backup", str(tmp_path / "copy.dump")], env=env)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Backing up postgresql://")
    assert "pg_dump: reading the schema..." in lines
    for table in ("api_keys", "orders", "pets"):
        assert f"pg_dump: dumping table public.{table}" in lines
    assert lines[-1].startswith("Backed up") and "6 orders" in lines[-1]
    assert (tmp_path / "copy.dump").stat().st_size > 0


def test_orders_changes_follow_prints_a_change_as_it_is_made_until_stopped(
        db: Path) -> None:
    run(db, "orders", "import", "-", input='[{"id": 1}, {"id": 2}]')
    follower = subprocess.Popen([*PETSTORE, "orders", "changes", "--follow"],
                                env={**os.environ, "PETSTORE_DATABASE": str(db)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stuck = threading.Timer(30, follower.kill)  # a line that never comes fails, not hangs
    stuck.start()
    try:
        assert follower.stdout is not None
        # Printed, so read at a cursor before the ship: the follower cannot miss it.
        assert [json.loads(follower.stdout.readline())["id"] for _ in range(2)] == [1, 2]
        run(db, "orders", "ship", "1")
        shipped = json.loads(follower.stdout.readline())  # blocks until it is printed
        assert (shipped["id"], shipped["status"]) == (1, "shipped")
    finally:
        # SIGTERM, a service manager's stop. (Ctrl-C's SIGINT is ignored by a process
        # started in the background of a shell script, and by what it starts: a test that
        # sent it failed when make test ran so.)
        follower.send_signal(signal.SIGTERM)
        _, err = follower.communicate(timeout=10)
        stuck.cancel()
    assert follower.returncode == 0, err
    assert "next: " in err and "Traceback" not in err
