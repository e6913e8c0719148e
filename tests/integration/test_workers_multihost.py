"""The workers of a run, over real SSH to test hosts in network namespaces (tests/nethosts.py):
machines=2 means both hosts do a fair share; a worker that cannot honour a setting fails the run
with both values; a worker SIGKILLed mid-run fails its run within 30 s with the cause, and the
sweep goes on. h1 runs Redis (provisioned by the sweep) and the driver; h2 and h3 are workers.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from tests.conftest import cmx, query, write
from tests.integration.test_multihost import _describe, _is_ssh
from tests.nethosts import NetHosts

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("nethosts_can_be_made")]

TASKS = 400


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("workers-lab")
    with NetHosts(root / "net", 3) as net:
        inv = net.inventory(
            root / "lab.yml",
            {"brokers": ["h1"], "drivers": ["h1"], "workers": ["h2", "h3"]},
            workdir_root=root / "hosts",
            seeded=True,
        )
        yield net, inv, root


def _leftovers(net) -> dict[str, list[str]]:
    return {h.name: [_describe(p) for p in net.pids(h) if not _is_ssh(p)] for h in net.hosts}


def test_both_hosts_do_a_fair_share_and_a_setting_the_worker_cannot_honour_fails(lab):
    net, inv, root = lab
    exp = write(
        root / "fair.yaml",
        f"""
        name: fair
        workload: {{name: throughput, params: {{tasks: {TASKS}, rate: 200}}}}
        fixed: {{pool: threads, concurrency: 4, broker: redis, machines: 2}}
        matrix: {{params.mode: [stream, backlog]}}
        include:
          # the threads pool recycles nothing: the worker runs without this limit
          - {{params.mode: stream, celery.worker_max_tasks_per_child: 10}}
        limits: {{run_timeout: 2m}}
        on_error: continue
    """,
    )
    db = root / "fair" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr  # the mismatch run failed, the others not
    runs = query(
        db,
        """SELECT "params.mode", "celery.worker_max_tasks_per_child", status, error, run_id
                        FROM runs ORDER BY ALL""",
    )
    by = {(mode, limit): (status, error, run_id) for mode, limit, status, error, run_id in runs}
    assert by[("stream", None)][0] == "ok" and by[("backlog", None)][0] == "ok", runs
    status, error, run_id = by[("stream", 10)]
    assert status == "failed", runs
    assert f"cmx-{run_id}@h2 on host h2" in error and f"cmx-{run_id}@h3 on host h3" in error, error
    assert "cell asks celery.worker_max_tasks_per_child 10; worker runs None" in error, error
    assert query(db, "SELECT count(*) FROM tasks WHERE run_id = ?", [run_id]) == [(0,)]  # nothing ran

    # Both hosts did work, counted from the tasks each one executed.
    shares = query(
        db,
        """SELECT r."params.mode", t.host, count(DISTINCT t.task_id)
                          FROM tasks t JOIN runs r USING (run_id) WHERE r.status = 'ok' AND t.state = 'SUCCESS'
                          GROUP BY ALL ORDER BY ALL""",
    )
    done = {(mode, host): n for mode, host, n in shares}
    for mode in ("stream", "backlog"):
        assert done[(mode, "h2")] + done[(mode, "h3")] == TASKS, shares
        # stream: arrivals go to whichever worker polls, an even split is the rule; backlog: the
        # workers start together, then each takes what its CPU allows (one shared CPU here).
        floor = 0.25 if mode == "stream" else 0.10
        assert min(done[(mode, "h2")], done[(mode, "h3")]) >= floor * TASKS, shares
    # ... and the stored figures say the same.
    stored = query(
        db,
        """SELECT r."params.mode", h.host, h.tasks_completed, m.value FROM host_tasks h
                          JOIN runs r USING (run_id) JOIN metrics m ON m.run_id = r.run_id AND m.name = 'host_share_min'
                          WHERE r.status = 'ok' ORDER BY ALL""",
    )
    for mode, host, n, share_min in stored:
        assert n == done[(mode, host)]
        assert share_min == pytest.approx(min(done[(mode, "h2")], done[(mode, "h3")]) / TASKS)
    # what each worker reported it ran with is stored per host
    config = dict(
        query(
            db,
            """SELECT w.key, any_value(w.value) FROM worker_config w JOIN runs r USING (run_id)
                               WHERE r.status = 'ok' GROUP BY w.key HAVING count(DISTINCT w.value) = 1""",
        )
    )
    assert config["pool"] == '"threads"' and config["concurrency"] == "4" and config["prefetch_count"] == "16"
    assert query(db, "SELECT DISTINCT host FROM worker_config ORDER BY 1") == [("h2",), ("h3",)]
    status = cmx("status", "--db", str(db))
    assert "work per worker host" in status.stdout and "h2" in status.stdout and "h3" in status.stdout
    assert _leftovers(net) == {"h1": [], "h2": [], "h3": []}


def test_a_worker_killed_mid_run_fails_its_run_within_30_s_with_the_cause(lab):
    net, inv, root = lab
    exp = write(
        root / "kill.yaml",
        """
        name: kill
        workload: {name: throughput, params: {mode: stream, rate: 50}}
        fixed: {pool: threads, concurrency: 2, broker: redis, machines: 2}
        matrix: {params.tasks: [3000, 100]}
        limits: {run_timeout: 5m}
        on_error: continue
    """,
    )
    db = root / "kill" / "cmx.duckdb"
    killed: dict = {}

    def kill_h3_worker() -> None:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            # the driver writes worker_config.json once every worker answered, just before it
            # starts them consuming: 3 s later the 60 s stream is well under way
            for checked in (root / "hosts" / "h1" / "runs").glob("*/worker_config.json"):
                time.sleep(3)
                pid = int((root / "hosts" / "h3" / "runs" / checked.parent.name / "worker.pid").read_text())
                os.kill(pid, signal.SIGKILL)
                killed.update(pid=pid, at=time.time(), run_id=checked.parent.name)
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_h3_worker, daemon=True)
    killer.start()
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
    killer.join(timeout=5)
    assert killed, "the h3 worker was never seen running"
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr
    rows = query(
        db,
        """SELECT "params.tasks", status, error, run_id, epoch(finished_at) FROM runs
                        ORDER BY started_at""",
    )
    assert [(n, s) for n, s, *_ in rows] == [(3000, "failed"), (100, "ok")], rows
    _, _, error, run_id, finished = rows[0]
    assert run_id == killed["run_id"]
    assert f"worker on h3 exited, signal 9 (SIGKILL) (pid {killed['pid']})" in error, error
    # The driver gives the run up within 30 s of the kill (h3's agent tells it in about a second); the
    # end is stored once the run's processes are stopped on every host and its artifacts fetched
    # (that stage, timed in stage_seconds, is Ansible over SSH: tens of seconds on a loaded box).
    driver = json.loads((db.parent / "artifacts" / run_id / "h1" / "driver.json").read_text())
    assert driver["finished_at"] - killed["at"] <= 30, (driver["finished_at"] - killed["at"], error)
    (stages,) = query(db, "SELECT stage_seconds FROM run_ends WHERE run_id = ?", [run_id])[0]
    cleanup = sum(json.loads(stages).get(k, 0) for k in ("stop", "collect", "ingest"))
    assert finished - killed["at"] <= 30 + cleanup + 5, (finished - killed["at"], stages)
    assert _leftovers(net) == {"h1": [], "h2": [], "h3": []}
