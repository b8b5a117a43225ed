"""Faults of the database under a real `petstore serve`: each gives 503 service_unavailable
with Retry-After (never a 500, never a hang) while it lasts, and the service recovers by
itself when it ends. The disk is a small tmpfs the test mounts (root only; skipped with
the reason elsewhere), so that it can really fill up. (A database locked past the busy
timeout, and one that is read-only, are in tests/web/test_failures.py.)"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.faults import assert_unavailable
from tests.support import PETSTORE, Server, serving, unavailable

pytestmark = pytest.mark.slow

LIST = "/v1/store/orders"


@contextmanager
def small_disk(folder: Path, size: str = "16m") -> Iterator[Path]:
    """A tmpfs of size mounted on folder/disk, unmounted afterwards."""
    disk = folder / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        unavailable(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


@contextmanager
def service_on(disk: Path) -> Iterator[tuple[Server, dict[str, str]]]:
    with serving(disk) as server:
        key = server.petstore("keys", "create", "--plan", "free", "--name", "faults").stdout.strip()
        rows = "\n".join(json.dumps({"id": i, "petId": 1, "quantity": 1}) for i in range(1, 51))
        subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                       input=rows, env=server.env, check=True, capture_output=True, text=True)
        yield server, {"Authorization": f"Bearer {key}"}


def test_a_full_disk_is_503_for_writes_and_recovers_when_space_returns(
    tmp_path: Path,
) -> None:
    with small_disk(tmp_path) as disk, service_on(disk) as (server, auth):
        assert server.request("DELETE", f"{LIST}/1", auth)[0] == 204
        filler = disk / "filler"
        try:  # fill every byte that is left (the close may fail too, flushing the rest)
            with filler.open("wb") as out:
                while True:
                    out.write(b"\0" * (1 << 16))
                    out.flush()
        except OSError:
            pass
        answers = [server.request("DELETE", f"{LIST}/{i}", auth) for i in range(2, 12)]
        for answer in answers:
            assert answer[0] in (204, 503), answer  # a page may still fit in the WAL
        assert any(answer[0] == 503 for answer in answers), "the disk never filled up"
        for answer in answers:
            if answer[0] == 503:
                assert_unavailable(answer)
        assert server.request("GET", LIST, auth)[0] == 200  # reads go on
        filler.unlink()
        assert server.request("DELETE", f"{LIST}/40", auth)[0] == 204
        statuses = {o["id"]: o["status"]
                    for o in json.loads(server.request("GET", LIST, auth)[2])}
        assert statuses[40] == "cancelled"
        for (status, _, _), order_id in zip(answers, range(2, 12), strict=True):
            assert statuses[order_id] == ("cancelled" if status == 204 else "pending")
