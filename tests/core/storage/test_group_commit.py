"""Group commit (app/core/storage/group_commit.py): writes that wait together share one
transaction and one commit, each in its own savepoint, each answered after that commit."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from app.core.storage.group_commit import GroupCommit, Savepoints


class Database:
    """One SQLite connection, and every statement the group ran on it."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, value TEXT)")
        self.statements: list[str] = []
        self.fail_commit = False

    def execute(self, _: Any, sql: str) -> None:
        self.statements.append(sql)
        if sql == "COMMIT" and self.fail_commit:
            raise sqlite3.OperationalError("disk I/O error")
        self.conn.execute(sql)

    def values(self) -> list[str]:
        reader = sqlite3.connect(self.conn.execute("PRAGMA database_list").fetchone()[2])
        try:
            return [row[0] for row in reader.execute("SELECT value FROM t ORDER BY id")]
        finally:
            reader.close()


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    database = Database(tmp_path / "group.db")
    yield database
    database.conn.close()


def group_over(database: Database, writing: Any = None) -> GroupCommit[Any]:
    return GroupCommit(Savepoints(lambda: database.conn, database.execute,
                                  writing or threading.RLock(), timeout=5.0,
                                  locked=lambda: sqlite3.OperationalError("locked")))


def insert(value: str) -> Callable[[sqlite3.Connection], int]:
    def work(conn: sqlite3.Connection) -> int:
        return int(conn.execute("INSERT INTO t (value) VALUES (?)", (value,)).lastrowid or 0)
    return work


def test_a_write_alone_is_committed_before_its_caller_goes_on(database: Database) -> None:
    group = group_over(database)
    assert group.run(insert("a")) == 1
    assert database.values() == ["a"]
    assert database.statements == ["BEGIN IMMEDIATE", "SAVEPOINT grouped_write",
                                   "RELEASE grouped_write", "COMMIT"]


def test_writes_that_wait_together_share_one_commit_and_a_refused_one_undoes_only_itself(
        database: Database) -> None:
    group = group_over(database)
    entered, release = threading.Event(), threading.Event()

    def first(conn: sqlite3.Connection) -> str:
        entered.set()
        release.wait(10)
        insert("first")(conn)
        return "first"

    def refused(conn: sqlite3.Connection) -> None:
        insert("refused")(conn)
        raise ValueError("refused")

    outcomes: dict[str, Any] = {}

    def call(name: str, work: Callable[[sqlite3.Connection], Any]) -> None:
        try:
            outcomes[name] = group.run(work)
        except ValueError as exc:
            outcomes[name] = exc

    leader = threading.Thread(target=call, args=("first", first))
    leader.start()
    assert entered.wait(10)
    # While the first write's transaction is open, three more arrive and wait.
    followers = [threading.Thread(target=call, args=(name, work)) for name, work in
                 (("b", insert("b")), ("refused", refused), ("d", insert("d")))]
    for thread in followers:
        thread.start()
    for _ in range(1000):  # until all three wait for the next batch
        with group._lock:
            if len(group._waiting) == 3:
                break
        threading.Event().wait(0.01)
    else:
        pytest.fail("the three writes never came to wait for the next batch")
    release.set()
    for thread in (leader, *followers):
        thread.join(10)
    assert outcomes["first"] == "first"
    assert isinstance(outcomes["refused"], ValueError)
    assert outcomes["b"] and outcomes["d"]
    assert database.values() == ["first", "b", "d"]
    assert database.statements.count("COMMIT") == 2  # the first alone, then the three
    assert database.statements.count("ROLLBACK TO grouped_write") == 1


def test_a_failed_commit_fails_every_write_of_its_batch(database: Database) -> None:
    group = group_over(database)
    database.fail_commit = True
    with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
        group.run(insert("lost"))
    database.fail_commit = False
    assert database.values() == []
    assert group.run(insert("kept")) == 1  # the group goes on after a failed batch
    assert database.values() == ["kept"]


def test_a_write_lock_not_had_in_time_fails_the_batch_as_locked(database: Database) -> None:
    writing = threading.Lock()
    group = GroupCommit(Savepoints(lambda: database.conn, database.execute, writing,
                                   timeout=0.01, locked=lambda: sqlite3.OperationalError("locked")))
    with writing, pytest.raises(sqlite3.OperationalError, match="locked"):
        group.run(insert("late"))
    assert database.values() == []


def test_many_concurrent_writes_each_get_their_own_answer(database: Database) -> None:
    group = group_over(database)
    answers: dict[int, int] = {}

    def call(n: int) -> None:
        answers[n] = group.run(lambda conn: (insert(str(n))(conn), n)[1])

    threads = [threading.Thread(target=call, args=(n,)) for n in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert answers == {n: n for n in range(40)}
    assert sorted(database.values(), key=int) == [str(n) for n in range(40)]
