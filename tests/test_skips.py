"""Skips that CI cannot miss (issue 56): a test gives up for want of a service or a tool only
through tests/support.py's unavailable, which fails the test where the run requires every
service (PETSTORE_TEST_REQUIRE_SERVICES=1, as .ci/run sets); and a database the run was
given (its variable set) that does not answer fails the tests that need it."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from tests.support import free_port, parse_python

TESTS = Path(__file__).parent
ROOT = TESTS.parent

# The ways pytest has to skip or expect a failure, as a test module names them.
SKIPS = {"skip", "skipif", "importorskip", "xfail"}

# The skips that are not about a missing service or tool, each named with why: the rest of
# the suite gives up only through unavailable.
NOT_ABOUT_A_SERVICE = {
    ("tests/support.py", "skip"): "unavailable itself",
    ("tests/e2e/test_serve.py", "skipif"): "SCHED_BATCH is Linux's: a platform, not a tool",
}


def _skips(path: Path) -> list[tuple[str, int]]:
    """Every pytest.skip, pytest.mark.skipif, ... the module names: (name, line)."""
    found = []
    for node in ast.walk(parse_python(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr in SKIPS:
            base = node.value
            if isinstance(base, ast.Attribute) and base.attr == "mark":
                base = base.value
            if isinstance(base, ast.Name) and base.id == "pytest":
                found.append((node.attr, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest":
            found += [(alias.name, node.lineno) for alias in node.names if alias.name in SKIPS]
    return found


def test_every_skip_for_want_of_a_service_goes_through_unavailable() -> None:
    elsewhere, seen = [], set()
    for path in sorted(TESTS.rglob("*.py")):
        name = str(path.relative_to(ROOT))
        for kind, line in _skips(path):
            seen.add((name, kind))
            if (name, kind) not in NOT_ABOUT_A_SERVICE:
                elsewhere.append(f"{name}:{line} pytest.{kind}")
    assert elsewhere == [], "skip through tests.support.unavailable instead"
    assert set(NOT_ABOUT_A_SERVICE) <= seen, "an exclusion no longer needed: remove it"


def _run(probe: Path, **environ: str) -> subprocess.CompletedProcess[str]:
    """pytest over the probe's folder with the suite's fixtures (tests/conftest.py as a
    plugin), without the services' variables but those given."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("PETSTORE_TEST_REDIS_URL", "PETSTORE_TEST_POSTGRES_URL",
                           "PETSTORE_TEST_REQUIRE_SERVICES")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:randomly",
         "-p", "no:cacheprovider", "-n", "0", "-rA", "--rootdir", str(probe.parent),
         str(probe)],
        cwd=ROOT, env={**env, **environ}, capture_output=True, text=True, timeout=120)


def _summary(done: subprocess.CompletedProcess[str]) -> str:
    """The outcomes of pytest's last line ("2 errors in 0.9s" gives "2 errors")."""
    return done.stdout.strip().splitlines()[-1].strip("= ").rsplit(" in ", 1)[0]


def _probe(folder: Path) -> Path:
    probe = folder / "test_probe.py"
    probe.write_text("def test_redis(redis_url):\n    pass\n\n\n"
                     "def test_postgres(postgres_url):\n    pass\n")
    return probe


def test_a_configured_database_that_does_not_answer_fails_its_tests(tmp_path: Path) -> None:
    silent = free_port()  # nothing listens there
    done = _run(_probe(tmp_path),
                PETSTORE_TEST_REDIS_URL=f"redis://127.0.0.1:{silent}/15",
                PETSTORE_TEST_POSTGRES_URL=f"postgresql://postgres@127.0.0.1:{silent}/postgres")
    assert done.returncode == 1, done.stdout
    assert _summary(done) == "2 errors", done.stdout
    assert f"Redis at redis://127.0.0.1:{silent}/15 (PETSTORE_TEST_REDIS_URL) does not " \
           "answer" in done.stdout
    assert "(PETSTORE_TEST_POSTGRES_URL) does not answer" in done.stdout


def test_a_database_not_configured_is_skipped_or_fails_where_required(tmp_path: Path) -> None:
    probe = _probe(tmp_path)
    skipped = _run(probe)
    assert skipped.returncode == 0 and _summary(skipped) == "2 skipped", skipped.stdout
    assert "PETSTORE_TEST_REDIS_URL is not set" in skipped.stdout
    required = _run(probe, PETSTORE_TEST_REQUIRE_SERVICES="1")
    assert required.returncode == 1 and _summary(required) == "2 errors", required.stdout
    assert "PETSTORE_TEST_REQUIRE_SERVICES=1 requires it" in required.stdout
