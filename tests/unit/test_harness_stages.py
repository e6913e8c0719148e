"""Pure pieces of the harness's own measurement and housekeeping (issue 11)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cmx.engine.hosts import ansible
from cmx.engine.results import db
from cmx.engine.run.runner import record_harness_overhead
from cmx.engine.run.runsteps import StepResult, start_drive_stages, stop_collect_stages
from cmx.workloads.drive.publisher import BATCH, batch_size


def test_start_is_until_the_drive_began_and_drive_the_rest():
    assert start_drive_stages(StepResult("successful", (), 10.0, {"drive": 3.5})) == {"start": 3.5, "drive": 6.5}
    # No drive (the start failed): everything was start.
    assert start_drive_stages(StepResult("failed", (), 4.0)) == {"start": 4.0, "drive": 0.0}


def test_stop_ends_when_the_slowest_host_had_stopped():
    reports = {"h1": {"seconds": {"stop": 0.4, "reset": 0.3}}, "h2": {"seconds": {"stop": 1.2}}}
    assert stop_collect_stages(StepResult("successful", (), 5.0, {}, reports)) == {"stop": 1.2, "collect": 3.8}
    # No host reported (none answered): nothing counts as stopping, all of it as collecting.
    assert stop_collect_stages(StepResult("failed", (), 5.0)) == {"stop": 0.0, "collect": 5.0}


def test_harness_overhead_is_wall_minus_tasks_in_flight(tmp_path):
    with db.connect(tmp_path / "r.duckdb") as con:
        con.execute(
            "INSERT INTO tasks (run_id, sent_at, finished_at) VALUES ('r', 100.0, 101.0), ('r', 100.5, 103.0), "
            "('r', 102.0, NULL)"
        )
        assert record_harness_overhead(con, "r", 10.0) == 7.0
        assert record_harness_overhead(con, "none", 4.0) == 4.0  # no task ran: all of it was harness
        assert con.execute(
            "SELECT run_id, value, unit FROM metrics WHERE name = 'harness_overhead_s' ORDER BY 1"
        ).fetchall() == [("none", 4.0, "s"), ("r", 7.0, "s")]


def test_a_backlog_is_sent_in_at_least_twenty_batches_of_at_most_batch():
    assert batch_size(1) == 1 and batch_size(200) == 10 and batch_size(10**6) == BATCH
    for n in (1, 19, 20, 399, 10_000, 123_457):
        size = batch_size(n)
        assert 1 <= size <= BATCH and (n < 20 or -(-n // size) >= 20)


def test_private_dirs_of_dead_owners_are_removed_and_live_ones_kept():
    dead = Path(tempfile.mkdtemp(prefix=ansible.PRIVATE_PREFIX))
    live = Path(tempfile.mkdtemp(prefix=ansible.PRIVATE_PREFIX))
    fresh = Path(tempfile.mkdtemp(prefix=ansible.PRIVATE_PREFIX))  # being created: no owner yet
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (dead / "owner.pid").write_text(str(gone.pid))
    (dead / "env").mkdir()
    (live / "owner.pid").write_text(str(os.getpid()))
    try:
        ansible.remove_stale_private_dirs()
        assert not dead.exists() and live.exists() and fresh.exists()
        old = time.time() - 3600
        os.utime(fresh, (old, old))
        ansible.remove_stale_private_dirs()
        assert not fresh.exists()
    finally:
        for d in (dead, live, fresh):
            subprocess.run(["rm", "-rf", str(d)])
