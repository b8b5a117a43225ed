"""`petstore contract`: what an edit of an OpenAPI document changes for its clients
(D29), named by oasdiff's rule ids and levels with the line of the YAML."""

from __future__ import annotations

import click

from app.core.contract import ContractError, Document, diff_documents, load_document
from app.core.contract.report import FORMATS, at_or_above, changelog_page, render


class DocumentUnreadable(click.ClickException):
    """A document that does not parse or is not OpenAPI 3.0/3.1 (exit status 2)."""

    exit_code = 2


def _load(file: str) -> Document:
    try:
        return load_document(file)
    except ContractError as exc:
        raise DocumentUnreadable(str(exc)) from None


_DOCUMENT = click.Path(dir_okay=False)


@click.group("contract")
def contract_group() -> None:
    """Review what an edit of an OpenAPI document changes for its clients."""


@contract_group.command("diff")
@click.argument("base", type=_DOCUMENT)
@click.argument("revision", type=_DOCUMENT)
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text (FILE:LINE first, one finding a line), markdown (a table) or json.")
@click.option("--fail-on", type=click.Choice(["ERR", "WARN"]),
              help="Exit with status 1 when a finding is at this level or above.")
@click.option("--level", type=click.Choice(["ERR", "WARN", "INFO"]), default="INFO",
              show_default=True,
              help="Show only the findings at this level or above (WARN: what may break "
                   "clients, as make lint shows it).")
def contract_diff(base: str, revision: str, fmt: str, fail_on: str | None,
                  level: str) -> None:
    """Every change from BASE to REVISION (two OpenAPI 3.0/3.1 YAML files), each with its
    oasdiff rule id and level (ERR breaks clients, WARN may, INFO does not), the operation,
    a sentence, and the FILE:LINE it is about: the revision's, or the base's for what was
    removed.

    Exit status: 0; 1 with --fail-on when a finding is at that level or above; 2 when a
    file does not parse or is not OpenAPI 3.0/3.1.
    """
    try:
        findings = diff_documents(_load(base), _load(revision))
    except ContractError as exc:  # a $ref that leads nowhere, met while comparing
        raise DocumentUnreadable(str(exc)) from None
    shown = at_or_above(findings, level)
    click.echo(render(shown, fmt), nl=False)
    if len(shown) < len(findings):
        click.echo(f"({len(findings) - len(shown)} finding(s) below {level} not shown; "
                   "--level INFO shows every one.)", err=True)
    if fail_on and at_or_above(findings, fail_on):
        raise SystemExit(1)


@contract_group.command("changelog")
@click.argument("base", type=_DOCUMENT)
@click.argument("revision", type=_DOCUMENT)
@click.argument("later", nargs=-1, type=_DOCUMENT)
@click.option("--title", help="A first heading for the page (# TITLE).")
def contract_changelog(base: str, revision: str, later: tuple[str, ...],
                       title: str | None) -> None:
    """Every change from BASE to REVISION, INFO included, as markdown grouped by operation,
    for release notes. With LATER documents, one section for each step from one to the
    next, newest first (docs/changelog-v2.md is made so: `make changelog`).
    """
    try:
        documents = [_load(file) for file in (base, revision, *later)]
        click.echo(changelog_page(documents, title), nl=False)
    except ContractError as exc:
        raise DocumentUnreadable(str(exc)) from None
