"""The house's rules hold, and the checks that state them can fail: the HTTP wing stands on
a core that imports no web framework, no module of app/ is part of an import cycle, and no
import hides inside a function to dodge one (import-linter's contracts in pyproject.toml,
run by `make lint`; the last rule is checked here)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
        tree = ast.parse(path.read_text())
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
