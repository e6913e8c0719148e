"""Faults at the start barrier (issue #24): every worker of a run must consume before the
workload's clock starts. A solo worker that adds the run's queue starts its first task at once
and answers no control message until that task ends, so its host's word that it took a task is
what confirms it; a worker that is truly silent (stopped, hung) still fails the run, named as
such.

The driver runs on w1 and the worker on w2 (this machine playing both, through real Ansible and
the machine's Redis or RabbitMQ): the word travels from w2's agent through the controller to the driver. The
barrier's bound is the worker host's ``celery_worker_ready_timeout``, made small here.
"""

from __future__ import annotations

import os
import signal

import pytest

from tests.conftest import query, write
from tests.faults import common

pytestmark = [pytest.mark.integration, pytest.mark.faults]

BOUND_S = 8


def _inventory(tmp_path):
    return common.two_hosts(tmp_path, ("w2",), f"celery_worker_ready_timeout: {BOUND_S}")


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_a_solo_worker_busy_in_its_first_task_counts_as_consuming(tmp_path, broker):
    db = tmp_path / "results" / "cmx.duckdb"
    inv, _ = _inventory(tmp_path)
    # Each task sleeps longer than the barrier waits: the worker cannot answer it before then.
    exp = write(
        tmp_path / "solo.yaml",
        f"""
        name: solo-long-first-task
        workload: {{name: concurrent_sleep, params: {{tasks: 3, sleep_s: {BOUND_S + 3}}}}}
        fixed: {{pool: solo, concurrency: 1, broker: {broker}}}
        limits: {{run_timeout: 3m}}
    """,
    )
    proc = common.cmx_run(exp, db, "--inventory", str(inv))
    out, err = common.finish(proc)
    common.assert_no_traceback(out, err)
    assert proc.returncode == 0, out[-3000:] + err[-3000:]
    ((status, error, run_id),) = query(db, "SELECT status, error, run_id FROM runs")
    assert (status, error) == ("ok", None)
    m = common.assert_accounting(db, run_id)
    assert (m["tasks_published"], m["tasks_completed"], m["tasks_lost"]) == (3, 3, 0), m
    common.assert_nothing_left(db)


def test_a_worker_silent_at_the_barrier_still_fails_as_hung(tmp_path):
    db = tmp_path / "results" / "cmx.duckdb"
    inv, hosts = _inventory(tmp_path)
    # 5,000 publishes before the workers are told to consume (a few seconds): the worker is
    # stopped (SIGSTOP: alive, silent) among them, before it can take a task.
    exp = write(
        tmp_path / "hung.yaml",
        """
        name: hung-at-the-barrier
        workload: {name: concurrent_sleep, params: {tasks: 5000, sleep_s: 0}}
        fixed: {pool: threads, concurrency: 2, broker: redis}
        limits: {run_timeout: 3m}
    """,
    )
    stopped: dict = {}

    def stop_worker(run_id: str) -> None:
        pid = int((hosts / "w2" / "runs" / run_id / "worker.pid").read_text())
        os.kill(pid, signal.SIGSTOP)
        stopped["pid"] = pid

    fault = common.Fault(hosts / "w1", delay=0.3, inject=stop_worker)
    fault.start()
    proc = common.cmx_run(exp, db, "--inventory", str(inv))
    out, err = common.finish(proc)
    fault.finish()
    assert fault.error is None, fault.error
    assert stopped, "the worker was never seen running"
    common.assert_no_traceback(out, err)
    assert proc.returncode == 1, out[-3000:] + err[-3000:]
    ((status, error, run_id),) = query(db, "SELECT status, error, run_id FROM runs")
    assert status == "failed", (status, error)
    assert f"never confirmed consuming the run's queue within {BOUND_S}s" in error, error
    assert "worker on w2 was still running but not answering (hung?)" in error, error
    common.assert_accounting(db, run_id)
    common.assert_nothing_left(db)
