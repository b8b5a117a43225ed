"""Backups of a PostgreSQL store with pg_dump, which PostgreSQL's own tools restore
(pg_restore). The only module that runs a program."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

from psycopg import conninfo as pq_conninfo

from app.core.errors import StoreUnavailable


def dump(params: dict[str, Any], target: str,
         progress: Callable[[str], None] | None = None) -> None:
    """Copy the database of libpq's params to target with pg_dump (custom format, for
    pg_restore): one consistent snapshot even while the service writes. The password goes
    to pg_dump through its environment, never its command line. progress gets pg_dump's
    --verbose lines, condensed: when it starts reading the schema, and each table as its
    rows are dumped."""
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        raise StoreUnavailable("PostgreSQL: pg_dump is not installed (postgresql-client)")
    params = dict(params)
    env = dict(os.environ)
    if "password" in params:
        env["PGPASSWORD"] = str(params.pop("password"))
    said: list[str] = []
    with subprocess.Popen(
        [pg_dump, "--format=custom", "--no-owner", "--verbose", f"--file={target}",
         f"--dbname={pq_conninfo.make_conninfo(**params)}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    ) as process:
        assert process.stderr is not None
        for line in process.stderr:
            said.append(line.rstrip())
            condensed = _condensed(line)
            if progress is not None and condensed is not None:
                progress(condensed)
    if process.returncode != 0:
        errors = [line for line in said if "error" in line.lower()] or said[-1:]
        raise StoreUnavailable(f"PostgreSQL: pg_dump failed: {' '.join(errors).strip()}")


DUMPING_TABLE = re.compile(r'dumping contents of table "?([^"\s]+)"?')


def _condensed(line: str) -> str | None:
    """The lines of pg_dump --verbose worth showing a person: the start, and each table."""
    if "reading extensions" in line:
        return "pg_dump: reading the schema..."
    table = DUMPING_TABLE.search(line)
    return f"pg_dump: dumping table {table.group(1)}" if table else None
