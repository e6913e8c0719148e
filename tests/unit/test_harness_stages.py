"""Pure pieces of the harness's own measurement and housekeeping (issue 11)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

from cmx.engine.hosts import ansible
from cmx.engine.hosts.ansible import PlaybookResult
from cmx.engine.run.runner import (DRIVE_TASK, FINISH_TASK, record_harness_overhead, start_drive_stages,
                           stop_collect_stages)
from cmx.workloads.drive.publisher import BATCH, batch_size


def _result(seconds, task_started=None, stdout=None):
    return PlaybookResult("successful", 0, (), seconds, task_started or {}, stdout or {})


def test_start_is_until_the_driver_task_began_and_drive_the_rest():
    assert start_drive_stages(_result(10.0, {"Begin": 0.4, DRIVE_TASK: 3.5})) == {"start": 3.5, "drive": 6.5}
    # No driver task (the start failed): everything was start.
    assert start_drive_stages(_result(4.0, {"Begin": 0.4})) == {"start": 4.0, "drive": 0.0}


def test_stop_ends_when_the_slowest_host_had_stopped():
    out = {(FINISH_TASK, "h1"): json.dumps({"seconds": {"stop": 0.4, "reset": 0.3}}),
           (FINISH_TASK, "h2"): "noise\n" + json.dumps({"seconds": {"stop": 1.2}}),
           ("Fetch", "h1"): ""}
    assert stop_collect_stages(_result(5.0, {FINISH_TASK: 0.8}, out)) == {"stop": 2.0, "collect": 3.0}
    # Unreadable reports: stop is until the finish task began.
    assert stop_collect_stages(_result(5.0, {FINISH_TASK: 0.8}, {(FINISH_TASK, "h1"): "?"})) == \
        {"stop": 0.8, "collect": 4.2}


def test_harness_overhead_is_wall_minus_tasks_in_flight():
    con = duckdb.connect()
    con.execute("CREATE TABLE tasks (run_id VARCHAR, sent_at DOUBLE, finished_at DOUBLE)")
    con.execute("CREATE TABLE metrics (run_id VARCHAR, name VARCHAR, value DOUBLE, unit VARCHAR)")
    con.execute("INSERT INTO tasks VALUES ('r', 100.0, 101.0), ('r', 100.5, 103.0), ('r', 102.0, NULL)")
    assert record_harness_overhead(con, "r", 10.0) == 7.0
    assert record_harness_overhead(con, "none", 4.0) == 4.0  # no task ran: all of it was harness
    assert con.execute("SELECT run_id, value, unit FROM metrics WHERE name = 'harness_overhead_s' ORDER BY 1"
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
