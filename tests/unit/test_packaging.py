"""A quiet install (issue 43): every folder that ships files is a package pyproject.toml names, so
setuptools packages it on purpose and warns nothing (a folder left out ships only through a
deprecated fallback, 33 warnings of ~40 lines each in `make quickstart`); `make dist` builds the
wheel. (tests/integration/test_installed_wheel.py builds it and checks the build says no warning.)"""

from __future__ import annotations

import fnmatch
import tomllib

from tests.conftest import REPO

SETUPTOOLS = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]


def _folder_of(package: str) -> str | None:
    """The checkout folder of a dotted package name, through package-dir."""
    for name, folder in sorted(SETUPTOOLS["package-dir"].items(), key=lambda kv: -len(kv[0])):
        if package == name or package.startswith(name + "."):
            return folder + package[len(name) :].replace(".", "/")
    return None


def _shipped_files() -> set[str]:
    """Every file the package data globs and the Python packages take, relative to the checkout."""
    shipped: set[str] = set()
    for package, globs in SETUPTOOLS["package-data"].items():
        root = REPO / _folder_of(package)
        for f in root.rglob("*"):
            rel = f.relative_to(root).as_posix()
            if (
                f.is_file()
                and "__pycache__" not in rel
                and any(fnmatch.fnmatch(rel, g) or (g.startswith("**/") and fnmatch.fnmatch(rel, g[3:])) for g in globs)
            ):
                shipped.add(f.relative_to(REPO).as_posix())
    for package in SETUPTOOLS["packages"]:
        shipped |= {f.relative_to(REPO).as_posix() for f in (REPO / _folder_of(package)).glob("*.py")}
    return shipped


def test_every_folder_that_ships_a_file_is_a_listed_package():
    listed = {_folder_of(p) for p in SETUPTOOLS["packages"]}
    folders = {f.rsplit("/", 1)[0] for f in _shipped_files()}
    assert len(folders) > 30
    assert not folders - listed, f"add to [tool.setuptools] packages: {sorted(folders - listed)}"


def test_make_dist_builds_the_wheel():
    makefile = (REPO / "Makefile").read_text()
    assert "\ndist:" in makefile and ".whl" in makefile


def test_make_quietens_pip():
    """pip's own output and the build backend's notes stay off a quickstart's terminal."""
    makefile = (REPO / "Makefile").read_text()
    installs = [line for line in makefile.splitlines() if "pip install" in line and "ansible-lint" not in line]
    assert installs and all("--quiet --quiet" in line for line in installs), installs
