"""The release check (issue 25): cmx as a new user gets it. The sdist and the wheel are built from
this repository, the wheel is installed into a fresh venv outside the checkout, and in an empty
folder, with no inventory anywhere, `cmx init demo`, `cmx run experiments/demo.yaml --smoke` and
`cmx report demo` all pass; the installed package is byte for byte what it was before.

This is `make test`'s (and so `.ci/run`'s) release check: nothing else is needed to run it. It
builds from a copy of the checkout's files (building writes build/ and *.egg-info beside the
sources), and pip takes the dependencies from its wheel cache or the index, as a user's pip does.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO, query

pytestmark = pytest.mark.integration

VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
#: What must ship, from the folders where it lives (inventory: the three named in pyproject.toml).
SHIPPED = (
    "roles/",
    "experiments/",
    "docs/cmx.schema.json",
    "inventory/local.yml",
    "inventory/local-two-workers.yml",
    "inventory/local-own-redis.yml",
    "inventory/lab.example.yml",
    "engine/hosts/playbooks/",
    "engine/hosts/host-requirements.txt",
    "engine/results/sql/",
    "analysis/sql/",
    "workloads/",
)


def _run(cmd: list[str], cwd: Path, timeout: float, env: dict | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env
    )
    said = proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.returncode == 0, f"{' '.join(cmd)} (exit {proc.returncode}):\n{said}"
    return proc


def _sources() -> list[str]:
    """The checkout's files as git sees them (tracked, and new ones not ignored): never results/,
    .venv/ or a lab inventory holding secrets."""
    out = _run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"], REPO, 60)
    return [f for f in out.stdout.split("\0") if f and (REPO / f).is_file()]


def _snapshot(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "dir"
        for p in sorted(root.rglob("*"))
    }


def test_the_wheel_in_a_fresh_venv_goes_from_init_to_a_report_in_an_empty_folder(tmp_path):
    src, dist, venv, work = (tmp_path / d for d in ("src", "dist", "venv", "work"))
    files = _sources()
    for f in files:
        (src / f).parent.mkdir(parents=True, exist_ok=True)
        (src / f).write_bytes((REPO / f).read_bytes())
    # the sdist, then the wheel built from the sdist: both must carry everything
    built = _run([sys.executable, "-m", "build", "--outdir", str(dist), str(src)], tmp_path, 900)
    # a quiet build (issue 43): every shipped folder is a package setuptools was told of
    assert "Warning" not in built.stdout + built.stderr, (built.stdout + built.stderr)[-3000:]
    [wheel], [sdist] = dist.glob("*.whl"), dist.glob("*.tar.gz")
    assert wheel.name == f"celery_matrix-{VERSION}-py3-none-any.whl"
    wanted = {f for f in files if f.startswith(SHIPPED) and "__pycache__" not in f}
    with zipfile.ZipFile(wheel) as zf:
        in_wheel = {n.removeprefix("cmx/") for n in zf.namelist() if n.startswith("cmx/")}
    with tarfile.open(sdist) as tf:
        in_sdist = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert not wanted - in_wheel, f"missing from the wheel: {sorted(wanted - in_wheel)}"
    assert not wanted - in_sdist, f"missing from the sdist: {sorted(wanted - in_sdist)}"

    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, 300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1"
    )
    _run([str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(wheel)], tmp_path, 1200, env)
    root = Path(
        _run(
            [str(venv / "bin" / "python"), "-c", "from cmx.engine import paths; print(paths.ROOT)"], tmp_path, 120, env
        ).stdout.strip()
    )
    assert root.is_relative_to(venv), root  # the installed cmx, not this checkout
    before = _snapshot(root)

    work.mkdir()
    cmx = str(venv / "bin" / "cmx")
    assert _run([cmx, "--version"], work, 120, env).stdout == f"cmx {VERSION}\n"  # an install claims no commit
    _run([cmx, "init", "demo"], work, 120, env)
    smoke = _run([cmx, "run", "experiments/demo.yaml", "--smoke"], work, 1200, env)
    assert "using the built-in localhost inventory (this machine plays every part" in smoke.stderr.splitlines()[0], (
        smoke.stderr
    )
    assert query(
        work / "results" / "smoke.duckdb",
        "SELECT count(*), count(*) FILTER (WHERE status = 'ok') FROM runs WHERE experiment = 'demo'",
    ) == [(4, 4)]
    report = _run([cmx, "report", "demo"], work, 600, env)
    assert "reporting its smoke runs" in report.stderr and (work / "reports" / "demo" / "index.html").is_file()

    assert _snapshot(root) == before, "cmx wrote into its installed package"
    assert sorted(p.name for p in work.iterdir()) == ["experiments", "reports", "results"]
