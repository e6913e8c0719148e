"""Faults: a worker SIGKILLed mid-run (issue #14). The run ends failed, its error naming the dead
worker, its host and how it died; published = completed + lost, and nothing is counted as done
by the dead worker after it died; the sweep's next run is ok; what was stored before is still
there, the database opens, and no process of the run is left.

This machine plays two worker hosts (w1, w2; w1 is also the driver) through real Ansible; the
workers use the machine's Redis. tests/integration/test_workers_multihost.py kills one over SSH
and checks how soon the run gives up.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from tests.conftest import query, write
from tests.faults import common

pytestmark = [pytest.mark.integration, pytest.mark.faults]

NAME = "worker-killed"


def test_a_worker_killed_mid_run(tmp_path):
    db = tmp_path / "results" / "cmx.duckdb"
    before = common.seed(db, NAME)
    inv, hosts = common.two_hosts(tmp_path, ("w1", "w2"))
    exp = write(
        tmp_path / "kill.yaml",
        f"""
        name: {NAME}
        # the first run streams for 30 s; w2's worker is killed 3 s in. The second is the next run.
        workload: {{name: throughput, params: {{mode: stream, rate: 100}}}}
        fixed: {{pool: threads, concurrency: 2, broker: redis, machines: 2}}
        matrix: {{params.tasks: [3000, 100]}}
        limits: {{run_timeout: 2m}}
        on_error: continue
    """,
    )
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

    runs = query(
        db,
        """SELECT "params.tasks", status, error, run_id FROM runs
                        WHERE experiment = ? AND run_id NOT LIKE 'earlier-%' ORDER BY started_at""",
        [NAME],
    )
    assert [(n, s) for n, s, *_ in runs] == [(3000, "failed"), (100, "ok")], runs
    (_, _, error, run_id), (_, _, _, next_id) = runs
    assert run_id == fault.run_id
    # w2's host tells of the death at once (its supervisor), before the 10 s of silence count.
    assert f"worker on w2 exited, signal 9 (SIGKILL) (pid {killed['pid']})" in error, error
    assert "stopped answering" not in error, error
    assert "w1 " not in error, error  # the live worker is not blamed

    # Honest accounting: every published task is completed or lost; the dead worker did some
    # work before the kill and none after it (same machine: one clock).
    m = common.assert_accounting(db, run_id)
    assert 0 < m["tasks_published"] < 3000 and m["tasks_completed"] > 0, m
    by_host = dict(
        query(
            db,
            """SELECT host, max(finished_at) FROM tasks WHERE run_id = ? AND state <> 'LOST'
                                GROUP BY host""",
            [run_id],
        )
    )
    assert set(by_host) == {"w1", "w2"}, by_host
    assert by_host["w2"] <= fault.at + 0.5, by_host["w2"] - fault.at
    assert query(
        db, "SELECT count(*) FROM tasks WHERE run_id = ? AND host = 'w2' AND started_at > ?", [run_id, fault.at + 0.5]
    ) == [(0,)]

    # The next run of the sweep is ok, on both hosts, and lost nothing.
    m = common.assert_accounting(db, next_id)
    assert (m["tasks_published"], m["tasks_completed"], m["tasks_lost"]) == (100, 100, 0), m
    assert query(db, "SELECT DISTINCT host FROM tasks WHERE run_id = ? ORDER BY 1", [next_id]) == [("w1",), ("w2",)]
    status = common.cmx_status(db)
    assert "failed" in status and "Traceback" not in status, status
    assert common.stored(db, NAME) == before  # the database opens; the earlier run is intact
    common.assert_nothing_left(db)


BUSY = "busy-worker-killed"
#: Every pool with every slot busy in a task that sleeps far longer than the test: a one-thread
#: pool (solo) or a green one (gevent, eventlet) answers no control message then, so only the
#: worker's host can tell that it died.
POOLS = {"prefork": 2, "threads": 2, "gevent": 2, "eventlet": 2, "solo": 1}


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_a_busy_worker_killed_fails_its_run_within_10_s_on_every_pool(tmp_path, broker):
    db = tmp_path / "results" / "cmx.duckdb"
    # The worker runs on w2, the driver on w1: word of the death must travel from w2's agent
    # through the controller to the driver's.
    inv, hosts = common.two_hosts(tmp_path, ("w2",))
    exp = write(
        tmp_path / "busy.yaml",
        f"""
        name: {BUSY}
        workload: {{name: concurrent_sleep, params: {{tasks: 3, sleep_s: 600}}}}
        fixed: {{broker: {broker}}}
        zip:
          - {{pool: {list(POOLS)}, concurrency: {list(POOLS.values())}}}
        limits: {{run_timeout: 5m}}
        on_error: continue
    """,
    )
    killed: dict[str, dict] = {}  # run_id -> pid, at
    stop = threading.Event()

    def kill_busy_workers() -> None:
        """Each run: once its worker took its tasks (its first receipt is on disk) and a moment
        more for every slot to start its sleep, SIGKILL the worker."""
        while not stop.wait(0.1):
            for recv in (hosts / "w2" / "runs").glob("*/recv-*.rows"):
                run_dir = recv.parent
                if run_dir.name in killed:
                    continue
                time.sleep(2.0)
                pid = int((run_dir / "worker.pid").read_text())
                os.kill(pid, signal.SIGKILL)
                killed[run_dir.name] = {"pid": pid, "at": time.time()}

    killer = threading.Thread(target=kill_busy_workers, daemon=True)
    killer.start()
    proc = common.cmx_run(exp, db, "--inventory", str(inv))
    out, err = common.finish(proc)
    stop.set()
    killer.join(5)
    common.assert_no_traceback(out, err)
    assert proc.returncode == 1, out[-3000:] + err[-3000:]

    runs = query(
        db,
        """SELECT pool, status, error, run_id, epoch(finished_at) FROM runs
                        WHERE experiment = ? ORDER BY started_at""",
        [BUSY],
    )
    assert [(p, s) for p, s, *_ in runs] == [(p, "failed") for p in POOLS], runs
    for pool, _, error, run_id, finished in runs:
        assert run_id in killed, (pool, "its worker was never seen busy", error)
        assert "worker on w2 exited, signal 9 (SIGKILL)" in error, (pool, error)
        assert f"pid {killed[run_id]['pid']}" in error, (pool, error)
        assert "stopped answering" not in error and "timeout" not in error, (pool, error)
        driver = json.loads((db.parent / "artifacts" / run_id / "w1" / "driver.json").read_text())
        noticed = driver["finished_at"] - killed[run_id]["at"]
        assert noticed <= 10, (pool, noticed)
        # The run's end (stored once its processes are stopped and its artifacts are in) too:
        # 1.2-2.5 s after the kill here.
        (stages,) = query(db, "SELECT stage_seconds FROM run_ends WHERE run_id = ?", [run_id])[0]
        assert finished - killed[run_id]["at"] <= 10, (pool, finished - killed[run_id]["at"], stages)
        m = common.assert_accounting(db, run_id)
        assert m["tasks_published"] == 3 and m["tasks_completed"] == 0, (pool, m)
        # The fact itself comes back with the run: host, pid, signal, time.
        events = json.loads((db.parent / "artifacts" / run_id / "run.json").read_text())["worker_events"]
        exits = [e for e in events if e["kind"] == "exited"]
        assert [(e["host"], e["pid"], e["signal"]) for e in exits] == [("w2", killed[run_id]["pid"], "SIGKILL")]
        assert abs(exits[0]["at"] - killed[run_id]["at"]) < 2, (pool, exits)
    common.assert_nothing_left(db)
