"""The service installed as an operator installs it, with no checkout on the server: the
wheel and the sdist that `python -m build` makes, each installed into a fresh virtualenv
outside the checkout, and run from an empty folder: `petstore init --demo`, `petstore
serve`, then each version's list, its document and its Swagger UI over HTTP.

Nothing is downloaded: the build runs in this venv (--no-isolation), pip installs with
--no-index, and the new venv finds the service's dependencies, never the service itself,
through a .pth file naming a folder of links to this venv's installed packages.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import yaml

import app
from tests.support import ISSUED_SECRETS, SERVER_LOGS, free_port, stop

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
# This venv's entries that are the service itself (its editable install), left out of
# the dependencies the new venvs see.
OWN_ENTRIES = ("petstore_orders", "__editable__")
BUILD_LOG = "build.log"  # what `python -m build` printed, beside what it built


def checkout_files() -> list[str]:
    """The checkout's files as git sees them: those it tracks and the new ones it does not
    ignore, as they are in the working tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [name for name in listed.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`python -m build`: the sdist, then the wheel built from the unpacked sdist; of a copy
    of the checkout's files, because setuptools also packs the files an earlier build listed
    in the checkout's petstore_orders.egg-info, which hid a document the configuration left
    out."""
    source = tmp_path_factory.mktemp("source")
    for name in checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=300, env=_offline(dict(os.environ)))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    (out / BUILD_LOG).write_text(done.stdout + done.stderr)
    return out


def test_the_build_leaves_no_folder_of_app_out_of_its_packages(dist: Path) -> None:
    """setuptools warns of a folder it would ship only as data (the console's templates
    and static files were): such a folder is listed in pyproject.toml's packages."""
    unlisted = re.findall(r"Package '([\w.]+)' is absent from the `packages` configuration",
                          (dist / BUILD_LOG).read_text())
    assert not unlisted, f"list {sorted(set(unlisted))} in [tool.setuptools] packages"


@pytest.fixture(scope="module")
def dependencies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of links to every package installed in this venv but the service."""
    folder = tmp_path_factory.mktemp("dependencies")
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(OWN_ENTRIES):
            (folder / entry.name).symlink_to(entry)
    return folder


def _offline(env: dict[str, str]) -> dict[str, str]:
    """env with pip kept off every index, and nothing from this checkout on the path."""
    env = {name: value for name, value in env.items()
           if not name.startswith("PETSTORE_") and name not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def install(artifact: Path, venv: Path, dependencies: Path) -> dict[str, str]:
    """A fresh venv with artifact (a wheel or an sdist) installed by pip; the environment to
    run its commands in."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site_packages(venv) / "petstore-dependencies.pth").write_text(f"{dependencies}\n")
    env = _offline({**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"})
    # --no-build-isolation: an sdist is built with the setuptools the dependencies hold.
    done = subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-build-isolation",
         str(artifact)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return env


def site_packages(venv: Path) -> Path:
    """Where pip installs packages in venv."""
    script = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.run([venv / "bin" / "python", "-c", script], capture_output=True,
                               text=True, check=True).stdout.strip())


def source_files() -> set[str]:
    """What the package must hold, as paths inside site-packages: every file of app/ and
    openapi/ (installed as app/openapi/), and wsgi.py."""
    files = [name for name in checkout_files()
             if name == "wsgi.py" or name.startswith(("app/", "openapi/"))]
    assert "openapi/petstore-v2.yaml" in files, files
    return {f"app/{name}" if name.startswith("openapi/") else name for name in files}


@contextmanager
def serving(petstore: Path, folder: Path, env: dict[str, str]) -> Iterator[str]:
    """`petstore serve` run from folder on a free port; its base URL. Its log goes beside
    the folder, which holds only what the service makes."""
    port = free_port()
    log = folder.parent / f"serve-{port}.log"
    SERVER_LOGS.append(log)
    with log.open("w") as out:
        process = subprocess.Popen([petstore, "serve", "--bind", f"127.0.0.1:{port}"],
                                   cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, f"petstore serve exited:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"no answer within 30 s:\n{log.read_text()}"
            try:
                if httpx.get(f"{base}/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        yield base
    finally:
        stop(process)
    errors = [line for line in log.read_text().splitlines()
              if json.loads(line)["level"] in ("ERROR", "CRITICAL")]
    assert not errors, errors


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_installed_from_its_package_it_serves_from_an_empty_folder(
        kind: str, dist: Path, dependencies: Path, tmp_path: Path) -> None:
    (artifact,) = dist.glob("*.whl" if kind == "wheel" else "*.tar.gz")
    venv = tmp_path / "venv"
    env = {**install(artifact, venv, dependencies), "TMPDIR": str(tmp_path)}
    shop = tmp_path / "shop"
    shop.mkdir()

    def run(*argv: str | Path) -> str:
        done = subprocess.run(argv, cwd=shop, env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    # The service is the one pip installed, not this checkout's.
    found = run(venv / "bin" / "python", "-c",
                "import app, importlib.resources as r; print(app.__file__); "
                "print(r.files('app.openapi'))").split()
    site = site_packages(venv)
    assert found == [str(site / "app" / "__init__.py"), str(site / "app" / "openapi")]
    installed = {str(path.relative_to(site)) for path in [*(site / "app").rglob("*"),
                                                         site / "wsgi.py"]
                 if path.is_file() and "__pycache__" not in path.parts}
    missing = source_files() - installed
    assert not missing, (f"the {kind} lacks {sorted(missing)}: a new package of app/ goes "
                         "in pyproject.toml's [tool.setuptools] packages, a data file in "
                         "its package-data")

    petstore = venv / "bin" / "petstore"
    assert run(petstore, "--version") == f"petstore, version {app.__version__}\n"
    assert list(shop.iterdir()) == []
    key = run(petstore, "init", "--demo").strip()
    ISSUED_SECRETS.add(key)
    assert key.startswith("psk_")
    with serving(petstore, shop, env) as base, \
            httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        v1 = http.get("/v1/store/orders")
        assert v1.status_code == 200 and len(v1.json()) == 6, v1.text
        v2 = http.get("/v2/store/orders")
        assert v2.status_code == 200 and len(v2.json()["orders"]) == 6, v2.text
        for document in ("petstore-v1", "petstore-v2"):
            base_path = "/" + document.split("-")[1]
            served = http.get(f"{base_path}/openapi.json")
            assert served.status_code == 200, served.text
            held = yaml.safe_load((site / "app" / "openapi" / f"{document}.yaml").read_text())
            assert served.json()["info"]["version"] == held["info"]["version"]
            ui = http.get(f"{base_path}/ui/")
            assert ui.status_code == 200 and ui.headers["content-type"].startswith("text/html")
            assets = re.findall(r'(?:src|href)="\./([^"]+)"', ui.text)
            assert "swagger-ui-bundle.js" in assets, ui.text
            for asset in assets:
                assert http.get(f"{base_path}/ui/{asset}").status_code == 200, asset
    assert sorted(path.name for path in shop.iterdir()) == ["instance"]
