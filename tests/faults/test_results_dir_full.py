"""Faults: the results directory fills up (issue #14). Nothing already stored is lost, the
database still opens, the user gets one line and a non-zero exit, and no process is left behind.

The results directory is a small tmpfs of the test's own (needs root, like the multi-host tests).
Real services, real Ansible, real Celery workers, real DuckDB.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cmx.engine.results import db as results_db
from tests.conftest import REPO, query, run_processes, write
from tests.prereqs import require
from tests.results_fixture import add_run

pytestmark = [pytest.mark.integration]

EXPERIMENT = """
    name: full
    workload:
      name: throughput
      params: {tasks: 200, mode: backlog}
    matrix:
      pool: [solo, threads, prefork]
    limits: {run_timeout: 2m}
"""


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs mounted for the test, unmounted after (lazily, should a process still hold it)."""
    require(None if os.geteuid() == 0 else "needs root (mounts a small tmpfs as the results directory)")

    def mount(size: str) -> Path:
        where = tmp_path / "results"
        where.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True)
        mounted.append(where)
        return where

    mounted: list[Path] = []
    yield mount
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], check=False)


def _stored(db: Path) -> list[tuple]:
    return query(db, "SELECT run_id, status FROM runs WHERE experiment = 'full' ORDER BY run_id")


def _seed(db: Path) -> list[tuple]:
    """One run already stored (as a sweep would have), to check it survives."""
    with results_db.connect(db) as con:
        add_run(con, "full", "earlier-run", {"pool": "solo"}, metrics={"consume_rate": 123.0})
    return _stored(db)


def _cmx_run(exp: Path, db: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "cmx.cli.main", "run", str(exp), "--db", str(db)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _fill(where: Path) -> None:
    """Take every free byte of the filesystem."""
    filler = where / "filler"
    stat = os.statvfs(where)
    subprocess.run(["fallocate", "-l", str(stat.f_bavail * stat.f_frsize), str(filler)], check=False)
    with open(filler, "ab") as f:  # fallocate may leave a few blocks: write until refused
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass


def test_full_before_the_sweep(tmp_path, small_disk):
    results = small_disk("3m")
    db = results / "cmx.duckdb"
    before = _seed(db)
    _fill(results)  # full before the sweep writes anything (its wheelhouse is in the user's cache)
    exp = write(tmp_path / "full.yaml", EXPERIMENT)
    proc = _cmx_run(exp, db)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode in (1, 2), out[-2000:] + err[-2000:]
    assert "Traceback" not in err + out, err[-3000:]
    assert "No space left on device" in err, err[-2000:]
    assert _stored(db) == before  # the database opens, the stored run is there, unchanged


def test_full_during_a_run(tmp_path, small_disk):
    results = small_disk("200m")
    db = results / "cmx.duckdb"
    before = _seed(db)
    exp = write(tmp_path / "full.yaml", EXPERIMENT)
    proc = _cmx_run(exp, db)
    deadline = time.monotonic() + 600
    while not (results / "artifacts").exists():  # the first run has started (provisioning is done)
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no run started within 10 minutes"
        time.sleep(0.2)
    _fill(results)
    out, err = proc.communicate(timeout=900)
    assert proc.returncode in (1, 2), out[-2000:] + err[-2000:]
    assert "Traceback" not in err + out, err[-3000:]
    stored = _stored(db)
    assert set(before) <= set(stored)  # nothing already stored is lost; the database opens
    assert all(status in ("ok", "failed", "timeout", "interrupted") for _, status in stored)
    time.sleep(2)
    assert not run_processes(db), "processes of the sweep are still running"
