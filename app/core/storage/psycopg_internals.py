"""Every reach into psycopg's internals, in one place (psycopg 3.3, pinned in
pyproject.toml to the range the tests have passed on: an upgrade is a conscious step that
starts by reading this module).

- Its cache of prepared statements after a pipeline that failed. psycopg prepares a
  statement on its fifth run (prepare_threshold) and notes it prepared as it sends it. In
  a pipeline that failed before that statement ran, the server skipped it and prepared
  nothing, yet psycopg 3.3.9 keeps the note whenever the statement had run before, and
  every later run of that statement on the connection fails with 'prepared statement
  "_pg3_0" does not exist'. (A ROLLBACK clears the cache, but only when psycopg has not
  counted that ROLLBACK before.) psycopg has no public call that clears it, and no
  upstream issue reports this case yet (psycopg/psycopg#585 met the same message from a
  statement that failed to prepare, and was closed). (forget_prepared)
"""

from __future__ import annotations

from typing import Any

import psycopg


def forget_prepared(conn: psycopg.Connection[Any]) -> None:
    """Have psycopg forget every statement it prepared on conn: each is prepared again on
    its next runs, and the server's are deallocated before conn's next statement."""
    conn._prepared.clear()
