"""`cmx run` says Celery's known traps its cells walk into on the terminal before its runs, as
`cmx validate` does, not only in the report (issue 43)."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from tests.conftest import CMX, REPO, run_processes

pytestmark = pytest.mark.integration


def test_run_says_the_pitfalls_on_stderr_before_its_runs(tmp_path):
    """The green-one-slot pitfall's gevent cells on Redis walk into their trap: the warning comes
    before any run (the sweep is stopped at once after it)."""
    db = tmp_path / "results" / "cmx.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [*CMX, "run", "experiments/pitfalls/green-one-slot.yaml", "--db", str(db)],
        cwd=REPO,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first = proc.stderr.readline()
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert "warning: 2 of 5 cells walk into 'A gevent/eventlet worker on Redis" in first, first + stderr
    assert " ok in " not in stdout, stdout  # said before any run ended (a run takes seconds)
    assert proc.returncode == 130, stdout + stderr
    assert run_processes(db) == []
