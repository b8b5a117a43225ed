"""The house's rules hold, and the checks that state them can fail: the HTTP wing stands on
a core that imports no web framework, no module of app/ is part of an import cycle, and no
import hides inside a function to dodge one (import-linter's contracts in pyproject.toml,
run by `make lint`; the last rule is checked here)."""

from __future__ import annotations

import ast
import functools
import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import parse_python

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# Imports that may sit inside a function: a dependency that is optional or heavy, loaded
# only when the configuration needs it. (module, what it imports) -> why.
LATE_IMPORTS = {
    ("app/core/storage/__init__.py", "app.core.storage.postgres"):
        "psycopg is loaded only by a process configured for PostgreSQL",
}


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    """import-linter over the app/ package under tree, with the project's contracts."""
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", "pyproject.toml"],
                          cwd=tree, capture_output=True, text=True, timeout=120)


@pytest.fixture
def copy_of_the_tree(tmp_path: Path) -> Path:
    """app/ and pyproject.toml copied, for a deliberate violation that touches no file of
    the checkout."""
    shutil.copytree(ROOT / "app", tmp_path / "app",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_import_contracts_are_kept() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 kept, 0 broken" in result.stdout


def test_a_web_framework_imported_by_the_core_breaks_the_contract(
        copy_of_the_tree: Path) -> None:
    orders = copy_of_the_tree / "app" / "core" / "orders.py"
    orders.write_text(orders.read_text() + "\nimport flask  # a deliberate violation\n")
    result = _lint_imports(copy_of_the_tree)
    assert result.returncode == 1, result.stdout
    assert "The core imports no web framework BROKEN" in result.stdout
    assert "app.core.orders -> flask" in result.stdout


def test_the_core_importing_the_web_wing_breaks_the_layers(copy_of_the_tree: Path) -> None:
    keys = copy_of_the_tree / "app" / "core" / "keys.py"
    keys.write_text(keys.read_text() + "\nfrom app.web import security  # deliberate\n")
    result = _lint_imports(copy_of_the_tree)
    assert result.returncode == 1, result.stdout
    assert "stand on the core, never the other way BROKEN" in result.stdout


def test_an_import_cycle_breaks_the_contract_even_inside_a_function(
        copy_of_the_tree: Path) -> None:
    # config <- storage already; config -> storage closes a circle, as it once did.
    config = copy_of_the_tree / "app" / "core" / "config.py"
    config.write_text(config.read_text() + "\n\ndef _late() -> None:\n"
                      "    from app.core.storage import open_store  # noqa: F401\n")
    result = _lint_imports(copy_of_the_tree)
    assert result.returncode == 1, result.stdout
    assert "No import cycles among the modules of app BROKEN" in result.stdout


def _imports_inside_functions() -> set[tuple[str, str]]:
    found = set()
    for path in sorted((ROOT / "app").rglob("*.py")):
        tree = parse_python(path.read_text())
        for function in ast.walk(tree):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                else:
                    continue
                found.update((str(path.relative_to(ROOT)), name) for name in names)
    return found


def test_no_import_hides_inside_a_function_but_optional_dependencies() -> None:
    unexplained = _imports_inside_functions() - set(LATE_IMPORTS)
    assert not unexplained, (
        f"imports inside functions: {sorted(unexplained)}; import at the top of the module "
        "(a cycle is a design to fix, not to dodge), or list an optional dependency in "
        "LATE_IMPORTS with its reason")


# A module that grows past this has grown a second concern: give it a module of its own
# where the code has a seam (issue 35), as app/cli/ and the PostgreSQL store's schema did.
MODULE_LINES_MAX = 600


def test_no_module_of_app_is_over_600_lines() -> None:
    long = {str(path.relative_to(ROOT)): lines for path in sorted((ROOT / "app").rglob("*.py"))
            if (lines := len(path.read_text().splitlines())) > MODULE_LINES_MAX}
    assert not long, (f"modules over {MODULE_LINES_MAX} lines: {long}; split each where its "
                      "code has a seam of its own (a concern, a wing), not by line count")


# The libraries whose internals app/ reaches into: only app/web/<library>_internals.py (or
# app/core/storage/psycopg_internals.py) may, each reach there with its reason, so that an
# upgrade starts by reading one module.
REACHED = ("connexion", "uvicorn", "uvicorn_worker", "a2wsgi", "psycopg")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.endswith("__")


def _defined_names(folder: Path) -> set[str]:
    """Every private name the modules under folder define: functions, methods, classes,
    and names and attributes they assign."""
    names = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(parse_python(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {name for name in names if _private(name)}


@functools.cache
def _their_private_names() -> frozenset[str]:
    """The private names the reached libraries define and app/ does not: an attribute of
    one of these names, read or written, is a reach into a library. (A name app/ defines
    too is taken for app/'s own.)"""
    theirs: set[str] = set()
    for package in REACHED:
        theirs |= _defined_names(Path(importlib.import_module(package).__file__).parent)
    return frozenset(theirs - _defined_names(ROOT / "app"))


def _reaches_in_source(source: str) -> list[str]:
    """Where a module's source imports a private module or name of a reached library, or
    touches an attribute of a private name that only a reached library defines."""
    found = []
    for node in sorted(ast.walk(parse_python(source)), key=lambda node: getattr(node, "lineno", 0)):
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = node.module or "" if isinstance(node, ast.ImportFrom) else ""
            for name in [module, *(alias.name for alias in node.names)]:
                parts = name.split(".")
                if ((module or name).split(".")[0] in REACHED
                        and any(_private(part) for part in parts)):
                    found.append(f"line {node.lineno}: imports {name}")
        elif isinstance(node, ast.Attribute) and node.attr in _their_private_names():
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def _private_overrides(module: Any) -> list[str]:
    """The private methods and attributes a module's classes define over a reached
    library's class they derive from."""
    found = []
    for cls in vars(module).values():
        if not isinstance(cls, type) or cls.__module__ != module.__name__:
            continue
        for base in cls.__mro__[1:]:
            if base.__module__.split(".")[0] not in REACHED:
                continue
            # _abc_impl is ABCMeta's own, written on every class derived from an ABC.
            found += [f"{cls.__name__}.{name} overrides {base.__module__}.{base.__name__}'s"
                      for name in vars(cls) if _private(name) and name in vars(base)
                      and name != "_abc_impl"]
    return found


def _reaches_outside_internals() -> dict[str, list[str]]:
    reaches = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        if path.name.endswith("_internals.py") or path.name == "__main__.py":
            continue
        module = importlib.import_module(
            ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"))
        found = _reaches_in_source(path.read_text()) + _private_overrides(module)
        if found:
            reaches[str(path.relative_to(ROOT))] = found
    return reaches


def test_only_the_internals_modules_reach_into_connexion_uvicorn_and_a2wsgi() -> None:
    assert _reaches_outside_internals() == {}, (
        "move each reach into the library's app/web/<library>_internals.py, with its reason")


def test_a_reach_into_a_library_outside_its_internals_module_is_found() -> None:
    source = ("import uvicorn_worker._workers\n"
              "from connexion.middleware.main import _Options\n"
              "def serve(worker, app):\n"
              "    worker._install_sigquit_handler()\n"
              "    return app._middleware_app\n")
    assert _reaches_in_source(source) == [
        "line 1: imports uvicorn_worker._workers", "line 2: imports _Options",
        "line 4: ._install_sigquit_handler", "line 5: ._middleware_app"]
    from app.web import connexion_internals

    assert _private_overrides(connexion_internals) == [
        "JSONBodyValidator._parse overrides "
        "connexion.validators.json.JSONRequestBodyValidator's",
        "JSONBodyValidator._validate overrides "
        "connexion.validators.json.JSONRequestBodyValidator's",
        "JSONBodyValidator._parse overrides "
        "connexion.validators.abstract.AbstractRequestBodyValidator's",
        "JSONBodyValidator._validate overrides "
        "connexion.validators.abstract.AbstractRequestBodyValidator's"]
