"""The schemathesis CLI (`st run`) against a live `petstore serve`: every check and phase
over real HTTP, with a refused key (the missing_auth warning) failing the run."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import serving

pytestmark = [pytest.mark.slow, pytest.mark.contract]

ST = [sys.executable, "-m", "schemathesis.cli"]
FUZZ_EXAMPLES = 500  # per operation and phase: about 4,000 requests in all
CONFIG = """
[warnings]
fail-on = ["missing_auth"]
"""


def st_run(url: str, key: str, config: Path, examples: int = 60,
           seed: int = 1) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ST, "--config-file", str(config), "run", url,
         "--checks", "all", "--phases", "examples,coverage,fuzzing,stateful",
         "--mode", "all", "--max-examples", str(examples), "--seed", str(seed),
         "-H", f"Authorization: Bearer {key}", "--no-color"],
        capture_output=True, text=True, timeout=600,
    )


@contextmanager
def live_server(folder: Path) -> Iterator[tuple[str, str, Path]]:
    """A served demo database with a key no quota stops: the document's URL, the key and
    the schemathesis configuration."""
    config = folder / "schemathesis.toml"
    config.write_text(CONFIG)
    with serving(folder, ban_seconds="0", anonymous_plan="business") as server:
        server.petstore("init", "--demo")
        key = server.petstore("keys", "create", "--plan", "enterprise", "--per-minute",
                              "1000000000", "--per-day", "1000000000").stdout.strip()
        yield f"http://127.0.0.1:{server.port}/v1/openapi.json", key, config


def test_st_run_finds_nothing_against_a_live_server(tmp_path: Path) -> None:
    with live_server(tmp_path) as (url, key, config):
        good = st_run(url, key, config)
        assert good.returncode == 0, good.stdout[-6000:] + good.stderr[-2000:]
        summary = good.stdout[good.stdout.find("SUMMARY"):]
        print(summary)  # quoted in the closing note
        assert "No issues found" in good.stdout or "0 failures" in summary.lower(), summary

        wrong = st_run(url, "psk_not_a_key", config)
        assert wrong.returncode != 0, "a refused key must fail the run, not warn"
        assert "missing authentication" in wrong.stdout.lower() or "401" in wrong.stdout


@pytest.mark.fuzz
def test_st_run_of_thousands_of_requests_negative_data_included_finds_nothing(
    tmp_path: Path,
) -> None:
    """Several thousand generated requests, valid and invalid (mode all), every check."""
    with live_server(tmp_path) as (url, key, config):
        run = st_run(url, key, config, examples=FUZZ_EXAMPLES, seed=7)
        summary = run.stdout[run.stdout.find("SUMMARY"):]
        print(summary)  # quoted in the closing note
        assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
        requests = sum(int(n) for n in re.findall(r"(\d+) (?:generated|requests?)", summary))
        assert requests >= 2000, summary
