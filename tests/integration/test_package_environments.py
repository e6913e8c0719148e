"""Versions as dimensions: ``package.celery: [...]`` sweeps two real Celery releases side by side,
each run's worker and driver import the version of their cell (table ``packages``, read from the
processes themselves), a host environment that drifted from its cell fails the run naming the
package, and a version the registry does not have is refused before any host is touched."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from cmx.engine.hosts.provision import WHEELHOUSES
from cmx.engine.hosts.wheelhouse import SITE_MARK
from tests.conftest import cmx, local_inventory, query, write

pytestmark = pytest.mark.integration

OLD = "5.5.3"  # an earlier Celery release (kombu 5.5) beside the one this venv has
NEW = version("celery")


def _inventory(path: Path, workdir: Path) -> Path:
    """Empty hosts (not seeded): provisioning an environment per version set is the subject."""
    return local_inventory(path, workdir, brokers={"broker_url": "redis://127.0.0.1:6379/0"}, backends={}, seeded=False)


def _experiment(path: Path, name: str, versions: list[str]) -> Path:
    listed = ", ".join(f'"{v}"' for v in versions)
    return write(
        path,
        f"""
        name: {name}
        workload:
          name: throughput
          params: {{tasks: 40, mode: backlog}}
        fixed: {{broker: redis, pool: threads, concurrency: 2}}
        matrix:
          package.celery: [{listed}]
        limits: {{run_timeout: 2m}}
    """,
    )


@pytest.fixture(scope="module")
def two_releases(tmp_path_factory):
    """One sweep of two Celery releases; its folder, inventory, host work dir and database."""
    root = tmp_path_factory.mktemp("versions")
    workdir = root / "hostwork"
    inv = _inventory(root / "inv.yml", workdir)
    exp = _experiment(root / "two.yaml", "two-celeries", [OLD, NEW])
    db = root / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root, inv, workdir, db


def test_each_run_imports_the_celery_of_its_cell(two_releases):
    _, _, workdir, db = two_releases
    assert OLD != NEW
    rows = query(
        db,
        """SELECT r."package.celery", p.role, p.version FROM packages p JOIN runs r USING (run_id)
                        WHERE p.name = 'celery' AND r.status = 'ok' ORDER BY 1, 2""",
    )
    assert rows == [(OLD, "driver", OLD), (OLD, "worker", OLD), (NEW, "driver", NEW), (NEW, "worker", NEW)]
    kombu = dict(
        query(
            db,
            """SELECT r."package.celery", p.version FROM packages p JOIN runs r USING (run_id)
                              WHERE p.name = 'kombu' AND p.role = 'worker'""",
        )
    )
    assert kombu[OLD].startswith("5.5."), kombu  # pip fitted celery 5.5's own kombu into its environment
    # One environment per version set on the host, beside the base venv.
    assert len([p for p in (workdir / "envs").iterdir() if p.is_dir()]) == 2


def test_a_host_environment_that_drifted_from_its_cell_fails_the_run(two_releases):
    root, inv, workdir, _ = two_releases
    # The environment of celery OLD is made to hold NEW (an upgrade by hand on the host; hosts have
    # no pip, so the controller's, offline, from the base venv's wheelhouse: it holds this venv's celery).
    env = next(
        p
        for p in (workdir / "envs").iterdir()
        if p.is_dir() and f"celery=={OLD}" in next(p.glob(f"lib/python*/site-packages/{SITE_MARK}")).read_text()
    )
    base_house = next(
        h
        for h in WHEELHOUSES.iterdir()
        if h.is_dir() and list(h.glob(f"celery-{NEW}-*.whl")) and list(h.glob("kombu-5.7*.whl"))
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env / "bin" / "python"),
            "install",
            "--quiet",
            "--no-index",
            "--find-links",
            str(base_house),
            f"celery=={NEW}",
        ],
        check=True,
        timeout=300,
    )
    exp = _experiment(root / "drift.yaml", "drifted", [OLD])
    db = root / "drift" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db), timeout=600)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    [(status, error)] = query(db, "SELECT status, error FROM runs")
    assert status == "failed"
    assert f"cell asks package.celery '{OLD}'" in error and f"runs '{NEW}'" in error, error


def test_a_version_the_registry_lacks_is_refused_before_any_host_is_touched(tmp_path):
    workdir = tmp_path / "hostwork"
    inv = _inventory(tmp_path / "inv.yml", workdir)
    exp = _experiment(tmp_path / "none.yaml", "no-such-celery", ["0.0.1"])
    db = tmp_path / "results" / "cmx.duckdb"
    for args in (["validate", str(exp)], ["run", str(exp), "--inventory", str(inv), "--db", str(db)]):
        proc = cmx(*args, timeout=300)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"{exp}:7:"), lines
        assert "package.celery: no version 0.0.1 of celery" in lines[0], lines
    assert not workdir.exists() and not db.exists()
