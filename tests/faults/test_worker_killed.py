"""Faults: a worker SIGKILLed mid-run (issue #14). The run ends failed, its error naming the dead
worker, its host and how it died; published = completed + lost, and nothing is counted as done
by the dead worker after it died; the sweep's next run is ok; what was stored before is still
there, the database opens, and no process of the run is left.

This machine plays two worker hosts (w1, w2; w1 is also the driver) through real Ansible; the
workers use the machine's Redis. tests/integration/test_workers_multihost.py kills one over SSH
and checks how soon the run gives up.
"""
from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import query, write
from tests.faults import common

pytestmark = [pytest.mark.integration, pytest.mark.faults]

NAME = "worker-killed"


def test_a_worker_killed_mid_run(tmp_path):
    db = tmp_path / "results" / "cmx.duckdb"
    before = common.seed(db, NAME)
    hosts = tmp_path / "hosts"
    inv = write(tmp_path / "inv.yml", f"""
        all:
          vars:
            ansible_connection: local
            ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
            python_env_interpreter: "{{{{ ansible_playbook_python }}}}"
          hosts:
            w1: {{cmx_workdir: {hosts}/w1}}
            w2: {{cmx_workdir: {hosts}/w2}}
          children:
            brokers: {{hosts: {{w1: {{broker_url: "redis://127.0.0.1:6379/0"}}}}}}
            drivers: {{hosts: {{w1: }}}}
            workers: {{hosts: {{w1: , w2: }}}}
    """)
    exp = write(tmp_path / "kill.yaml", f"""
        name: {NAME}
        # the first run streams for 30 s; w2's worker is killed 3 s in. The second is the next run.
        workload: {{name: throughput, params: {{mode: stream, rate: 100}}}}
        fixed: {{pool: threads, concurrency: 2, broker: redis, machines: 2}}
        matrix: {{params.tasks: [3000, 100]}}
        limits: {{run_timeout: 2m}}
        on_error: continue
    """)
    killed: dict = {}

    def kill_w2_worker(run_id: str) -> None:
        pid = int((hosts / "w2" / "runs" / run_id / "worker.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        killed["pid"] = pid

    fault = common.Fault(hosts / "w1", delay=3.0, inject=kill_w2_worker)
    fault.start()
    proc = common.cmx_run(exp, db, "--inventory", str(inv))
    out, err = common.finish(proc)
    fault.finish()
    assert fault.error is None, fault.error
    assert killed, "w2's worker was never seen running"
    common.assert_no_traceback(out, err)
    assert proc.returncode == 1, out[-3000:] + err[-3000:]
    assert f"1 of 2 run(s) did not succeed; see `cmx status --db {db}`" in " ".join(err.split()), err

    runs = query(db, """SELECT "params.tasks", status, error, run_id FROM runs
                        WHERE experiment = ? AND run_id NOT LIKE 'earlier-%' ORDER BY started_at""", [NAME])
    assert [(n, s) for n, s, *_ in runs] == [(3000, "failed"), (100, "ok")], runs
    (_, _, error, run_id), (_, _, _, next_id) = runs
    assert run_id == fault.run_id
    assert f"worker cmx-{run_id}@w2 on host w2 stopped answering" in error, error
    assert "worker on host w2 exited, signal 9 (SIGKILL)" in error, error
    assert "w1 " not in error, error  # the live worker is not blamed

    # Honest accounting: every published task is completed or lost; the dead worker did some
    # work before the kill and none after it (same machine: one clock).
    m = common.assert_accounting(db, run_id)
    assert 0 < m["tasks_published"] < 3000 and m["tasks_completed"] > 0, m
    by_host = dict(query(db, """SELECT host, max(finished_at) FROM tasks WHERE run_id = ? AND state <> 'LOST'
                                GROUP BY host""", [run_id]))
    assert set(by_host) == {"w1", "w2"}, by_host
    assert by_host["w2"] <= fault.at + 0.5, (by_host["w2"] - fault.at)
    assert query(db, "SELECT count(*) FROM tasks WHERE run_id = ? AND host = 'w2' AND started_at > ?",
                 [run_id, fault.at + 0.5]) == [(0,)]

    # The next run of the sweep is ok, on both hosts, and lost nothing.
    m = common.assert_accounting(db, next_id)
    assert (m["tasks_published"], m["tasks_completed"], m["tasks_lost"]) == (100, 100, 0), m
    assert query(db, "SELECT DISTINCT host FROM tasks WHERE run_id = ? ORDER BY 1", [next_id]) == [("w1",), ("w2",)]
    status = common.cmx_status(db)
    assert "failed" in status and "Traceback" not in status, status
    assert common.stored(db, NAME) == before  # the database opens; the earlier run is intact
    common.assert_nothing_left(db)
