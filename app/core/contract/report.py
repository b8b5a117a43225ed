"""The findings of the contract review as a person or a script reads them: text (one line
per finding, FILE:LINE first, as compilers print), a markdown table, JSON, and a changelog
in markdown grouped by operation for release notes."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

from app.core.contract.catalog import ERR, INFO, SEVERITY, WARN, Finding
from app.core.contract.loader import Document
from app.core.contract.rules import diff_documents

FORMATS = ("text", "markdown", "json")


def at_or_above(findings: Sequence[Finding], level: str) -> list[Finding]:
    """The findings whose level is level or more severe."""
    return [f for f in findings if SEVERITY[f.level] >= SEVERITY[level]]


def summary(findings: Sequence[Finding]) -> str:
    """'3 findings: 1 ERR, 2 WARN, 0 INFO', or 'No findings.'"""
    if not findings:
        return "No findings."
    counts = ", ".join(f"{sum(f.level == level for f in findings)} {level}"
                       for level in (ERR, WARN, INFO))
    return f"{len(findings)} finding{'s' if len(findings) != 1 else ''}: {counts}"


def render(findings: Sequence[Finding], fmt: str) -> str:
    """The findings in fmt (text, markdown or json), ending with a newline."""
    if fmt == "json":
        return json.dumps([f.as_dict() for f in findings], indent=2) + "\n"
    if fmt == "markdown":
        return _markdown(findings)
    lines = [f"{f.source}: {f.level} {f.id}: {f.operation or '(document)'}: {f.text}"
             for f in findings]
    return "\n".join([*lines, summary(findings)]) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _markdown(findings: Sequence[Finding]) -> str:
    if not findings:
        return "No findings.\n"
    lines = [f"**{summary(findings)}**", "",
             "| Level | Rule | Operation | Change | Source |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {f.level} | `{f.id}` | {_cell(f.operation or '(document)')} | {_cell(f.text)} "
              f"| `{f.source}` |" for f in findings]
    return "\n".join(lines) + "\n"


def changelog(base: Document, revision: Document, findings: Sequence[Finding]) -> str:
    """Every finding, INFO included, as markdown grouped by operation: a section for release
    notes, titled by info.title and the two info.versions. Lines are left out, so that the
    section changes only when what a client sees changes."""
    title = revision.title or "API"
    if base.version and base.version == revision.version:  # edited since its release
        heading = f"## {title}: changes since {base.version}, not yet released"
    else:
        heading = f"## {title} {base.version or '?'} to {revision.version or '?'}"
    lines = [heading, ""]
    compared = f"`{base.file}` to `{revision.file}`"
    if not findings:
        return "\n".join([*lines, f"{compared}: no changes.", ""])
    counts = ", ".join(f"{sum(f.level == level for f in findings)} {level}"
                       for level in (ERR, WARN, INFO))
    lines += [f"{compared}: {len(findings)} change{'s' if len(findings) != 1 else ''} "
              f"({counts}).", ""]
    groups: dict[str, list[Finding]] = {}
    for finding in findings:
        groups.setdefault(finding.operation or "The whole document", []).append(finding)
    for operation, group in groups.items():
        lines += [f"### {operation}", ""]
        lines += [f"- {f.level} `{f.id}`: {f.text}" for f in group]
        lines.append("")
    return "\n".join(lines)


def changelog_page(documents: Sequence[Document], title: str | None = None) -> str:
    """The changelog of documents in release order (oldest first): one section per step from
    one to the next, newest first, under `# title` when given; a step between two documents
    of one version (the live one and its release) only when it changes something, or when
    no step does."""
    steps = [(base, rev, diff_documents(base, rev))
             for base, rev in reversed(list(itertools.pairwise(documents)))]
    # A live document still as it was released has nothing to say yet, unless it is all
    # there is to compare.
    said = [(base, rev, findings) for base, rev, findings in steps
            if findings or not base.version or base.version != rev.version]
    sections = [changelog(base, rev, findings) for base, rev, findings in said or steps]
    head = [f"# {title}\n\nEvery change from each document to the next, newest first, as "
            "`petstore contract changelog` finds it: ERR breaks clients, WARN may, INFO does "
            "not.\n"] if title else []
    return "\n".join([*head, *sections])
