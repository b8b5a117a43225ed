"""How long the contract review takes (issue 33 point 6): the live v2 document against itself
and against its newest release, each read from file and compared, on one core. The target:
under 1 s each, so that the release check never slows `make lint`. Prints the median of
several runs, and fails when a median is over the target.

    python -m bench.contract [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

from app.core.contract import diff_documents, load_document

ROOT = Path(__file__).resolve().parent.parent
LIVE = "openapi/petstore-v2.yaml"
TARGET_S = 1.0


def newest_release() -> str:
    """The newest file of v2 in openapi/released/, by version."""
    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(p) for p in path.stem.rsplit("-", 1)[1].split("."))

    newest = max((ROOT / "openapi" / "released").glob("petstore-v2-*.yaml"), key=version)
    return str(newest.relative_to(ROOT))


def seconds_for(base: str, revision: str) -> float:
    """The time to read both files and compare them, once."""
    start = time.perf_counter()
    diff_documents(load_document(ROOT / base), load_document(ROOT / revision))
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    failed = False
    for base in (LIVE, newest_release()):
        median = statistics.median(seconds_for(base, LIVE) for _ in range(runs))
        verdict = "ok" if median < TARGET_S else f"OVER the {TARGET_S:.0f} s target"
        failed |= median >= TARGET_S
        print(f"contract diff {base} {LIVE}: {median * 1000:.0f} ms (median of {runs}), {verdict}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
