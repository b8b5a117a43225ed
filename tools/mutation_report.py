"""The score of `make mutation`, per module, and the mutants left alive.

Reads what `mutmut run` left (`mutmut results --all true`: a line a mutant, "name: status"),
and prints, for each module of [tool.mutmut]'s only_mutate, how many of its mutants the
suite killed, and then every mutant that survived. A survivor is explained when
docs/house/checks.md names it (in backticks) under "Mutants left alive", with why it is
equivalent to the code; an unexplained one is a test to write. Exits 1 when a module kills
fewer than TARGET of its mutants, or a survivor is unexplained (issue 56: mutants of the
rules that guard people and messages are killed, or said to be equivalent).
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

TARGET = 0.85
CHECKS = Path("docs/house/checks.md")
EXPLAINED_HEADING = "## Mutants left alive"
# A mutant's name: the module's dotted path, then x_<function> or xǁ<Class>ǁ<method>,
# then __mutmut_<n> (mutmut 3's trampolines).
NAME = re.compile(r"^(?P<module>[\w.]+?)\.(?:x_|xǁ)\S*__mutmut_\d+$")
KILLED = {"killed", "timeout"}  # a mutant that hangs the tests is caught by them too
UNCHECKED = "not checked"  # a run stopped midway (mutmut resumes it): no score claimed for it


def results() -> list[tuple[str, str]]:
    """Every mutant with its status, from mutmut's own report."""
    done = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"],
                          capture_output=True, text=True, check=True)
    found = []
    for line in done.stdout.splitlines():
        name, _, status = line.strip().rpartition(": ")
        if NAME.match(name):
            found.append((name, status))
    return found


def explained() -> set[str]:
    """The survivors docs/house/checks.md names as equivalent to the code."""
    text = CHECKS.read_text(encoding="utf-8")
    if EXPLAINED_HEADING not in text:
        return set()
    section = text.split(EXPLAINED_HEADING, 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([\w.ǁ]+__mutmut_\d+)`", section))


def main() -> int:
    found = results()
    if not found:
        print("No mutants found: run `mutmut run` first (make mutation does).")
        return 1
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    survivors = []
    for name, status in found:
        module = NAME.match(name).group("module")  # type: ignore[union-attr]
        by_module[module][status] += 1
        if status not in KILLED and status != UNCHECKED:
            survivors.append((name, status))
    known = explained()
    failing = False
    unfinished = False
    print(f"{'module':44} {'mutants':>8} {'checked':>8} {'killed':>8} {'score':>7}")
    for module in sorted(by_module):
        counts = by_module[module]
        total = sum(counts.values()) - counts[UNCHECKED]
        killed = sum(counts[s] for s in KILLED)
        # An explained survivor is equivalent to the code: no test could kill it.
        equivalent = sum(1 for name, _ in survivors
                         if name in known and name.startswith(module + "."))
        score = killed / max(total - equivalent, 1)
        failing |= bool(total) and score < TARGET
        mark = "" if score >= TARGET else f"  below {TARGET:.0%}"
        if counts[UNCHECKED]:
            # The score of the mutants checked so far, not the module's.
            unfinished = True
            mark = f"  {counts[UNCHECKED]} not checked yet"
        shown = f"{score:7.1%}" if total else f"{'-':>7}"
        print(f"{module:44} {total + counts[UNCHECKED]:8} {total:8} {killed:8} {shown}{mark}")
    unexplained = [(n, s) for n, s in survivors if n not in known]
    print(f"\n{len(survivors)} mutants left alive, {len(survivors) - len(unexplained)} of "
          f"them explained in {CHECKS}:")
    for name, status in survivors:
        print(f"  {name}: {status}{'' if name in known else '  (unexplained)'}")
    if unexplained:
        print(f"\n`mutmut show NAME` shows one; kill it with a test, or explain it under "
              f'"{EXPLAINED_HEADING}" in {CHECKS}.')
    if unfinished:
        print("\nThe run was stopped before every mutant was checked: `make mutation` again "
              "resumes it (mutants/ keeps what was done).")
    return 1 if failing or unexplained or unfinished else 0


if __name__ == "__main__":
    sys.exit(main())
