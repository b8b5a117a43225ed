"""A soak: a minute of mixed load against two workers sharing quotas in Redis (the load of
`python -m bench.soak`, which prints worker memory; here the answers are checked)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench.soak import mixed_load
from tests.support import PETSTORE, serving

pytestmark = [pytest.mark.slow, pytest.mark.soak]

SECONDS = 60
ORDERS = 2_000


def test_a_minute_of_mixed_load_gives_no_5xx_and_keeps_every_quota(
    tmp_path: Path, redis_url: str, redis_prefix: str,
) -> None:
    with serving(tmp_path, "--workers", "2", ratelimit_storage=redis_url,
                 ratelimit_key_prefix=redis_prefix) as server:
        enterprise = server.petstore(
            "keys", "create", "--plan", "enterprise", "--name", "soak",
            "--per-minute", "1000000000", "--per-day", "1000000000").stdout.strip()
        free = server.petstore("keys", "create", "--plan", "free", "--name", "free"
                               ).stdout.strip()
        rows = "\n".join(json.dumps({"id": i, "petId": 1, "quantity": 1})
                         for i in range(1, ORDERS + 1))
        subprocess.run([*PETSTORE, "orders", "import", "--format", "ndjson", "-"],
                       input=rows, env=server.env, check=True, capture_output=True, text=True)
        answers = mixed_load(server.port, enterprise, free, ORDERS, SECONDS)
    print({kind: dict(statuses) for kind, statuses in answers.items()})  # for the note

    assert set(answers["list"]) == {200} and answers["list"][200] > 100
    assert set(answers["cancel"]) == {204} and answers["cancel"][204] > 100
    assert set(answers["bad key"]) <= {401, 429}  # refused, then throttled per address
    assert answers["bad key"][401] == 60  # the anonymous plan's minute, over both workers
    # The Free key: its minute's 60 requests over both workers, then only 429s
    # (rate_limit_exceeded, then api_key_banned).
    assert set(answers["over quota"]) == {200, 429}
    assert answers["over quota"][200] == 60
