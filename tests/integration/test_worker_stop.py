"""A drained worker told to stop stops on its own, at once, and keeps every row it recorded.

A real worker (``hostrun.begin``, as the agent starts it) on real Redis and RabbitMQ runs a few
tasks, then gets the stop a run's finish gives it (``hostctl.stop``). Before workloads/app/workerstop.py
an idle worker read Celery's stop flag only when its event loop woke (RabbitMQ: its next timer,
5 to 9 s; Redis: the BRPOP in flight, 1 s) and a prefork pool process slept 1 s before it exited,
so the host's grace killed it. A worker now leaves without the interpreter's teardown
(workloads/runtime/quickexit.py), which must keep its exit code and its rows, on every pool. The worker must
end by itself with exit code 0 within the grace, and every task it ran must have its execution row.

The grace is 2.5 s for every pool. Hub pools (prefork, threads, solo) stop 0.05-0.09 s after
their TERM. A green pool's loop (``synloop``) read the stop flag only when its
``drain_events(timeout=2.0)`` timed out, drained once more, and its control greenlet drained in
turns of 1 s: gevent and eventlet ended 4.0 s after their TERM, every time, and this grace
killed them. The worker now wakes both (workloads/app/workerstop.py): 0.05-0.6 s measured, on a
machine busy with the test suite.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

pytestmark = pytest.mark.integration

URLS = {"redis": "redis://127.0.0.1:6379/0", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}
TASKS = 20
GRACE_S = 2.5


def _drained_worker(tmp_path, monkeypatch, broker: str, pool: str):
    """A worker of a run begun as the agent begins it, that ran :data:`TASKS` tasks; (run dir, app)."""
    from cmx.workloads.app.factory import create_app
    from cmx.workloads.drive.workerwatch import start_consuming
    from cmx.workloads.host import hostrun
    from cmx.workloads.runtime.spec import RunSpec, node_name

    run_id = f"stop{uuid.uuid4().hex[:8]}"
    spec = RunSpec(
        run_id=run_id,
        experiment="e",
        cell_id="c",
        repeat=1,
        workload="throughput",
        broker=broker,
        pool=pool,
        concurrency=2,
        worker_nodes=[node_name(run_id, "localhost")],
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    monkeypatch.setenv("CMX_RUN_DIR", str(run_dir))
    monkeypatch.setenv("CMX_HOST", "localhost")
    payload = {
        "spec": spec.model_dump(mode="json"),
        "secrets": {"CMX_BROKER_URL": URLS[broker]},
        "worker": {"ready_timeout": 60},
    }
    assert hostrun.begin(run_dir, "localhost", payload) == 0, hostrun.begin_error(run_dir)
    (tmp_path / "driver").mkdir()
    app = create_app(spec, tmp_path / "driver", "localhost", client="driver")
    start_consuming(app, spec, 30)
    for _ in range(TASKS):
        app.tasks["cmx.throughput.noop"].apply_async(("x",), queue=spec.queue)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        done = app.control.broadcast(
            "cmx_progress", reply=True, timeout=1.0, limit=1, destination=list(spec.worker_nodes)
        )
        if done and next(iter(done[0].values())).get("completed", 0) >= TASKS:
            return run_dir
        time.sleep(0.2)
    pytest.fail("the worker did not run every task within 60 s")


@pytest.mark.parametrize("pool", ["prefork", "threads", "solo", "gevent", "eventlet"])
@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_a_drained_worker_stops_itself_and_keeps_its_rows(tmp_path, monkeypatch, broker, pool):
    from cmx.workloads.host import hostctl
    from cmx.workloads.runtime.recorder import write_csv

    run_dir = tmp_path / "run"
    try:
        _drained_worker(tmp_path, monkeypatch, broker, pool)
        hostctl.stop(run_dir, GRACE_S)
    finally:
        hostctl.stop(run_dir, 1.0)  # nothing of the test outlives it, whatever failed
        hostctl.reset(run_dir)
    ended = json.loads((run_dir / "worker.exit").read_text())
    assert ended.get("exit_code") == 0, f"the worker did not stop itself within {GRACE_S:g} s: {ended}"
    write_csv(run_dir)
    rows = sum(len(p.read_text().splitlines()) - 1 for p in run_dir.glob("exec-*.csv"))
    assert rows == TASKS


def test_a_term_that_is_not_the_runs_stop_gets_celerys_own_warm_shutdown(tmp_path, monkeypatch):
    """A fault's TERM (term_worker) measures Celery's shutdown: none of the harness's wakes. A gevent
    worker on Redis then leaves when its loop's drains time out (2 s after it saw the flag, and its
    control greenlet's 1 s turn: 4.0 s measured), not in the 0.05-0.6 s of the run's stop."""
    import os
    import signal

    from cmx.workloads.host import hostctl

    run_dir = tmp_path / "run"
    try:
        _drained_worker(tmp_path, monkeypatch, "redis", "gevent")
        worker = int((run_dir / "worker.pid").read_text().split()[0])
        t0 = time.monotonic()
        os.kill(worker, signal.SIGTERM)
        while not (run_dir / "worker.exit").exists():  # its supervisor writes it (atomically) once it left
            assert time.monotonic() - t0 < 30, "the worker did not leave within 30 s of its TERM"
            time.sleep(0.02)
        took = time.monotonic() - t0
    finally:
        hostctl.stop(run_dir, 1.0)
        hostctl.reset(run_dir)
    assert json.loads((run_dir / "worker.exit").read_text()).get("exit_code") == 0
    assert took >= 2.0, f"the worker left {took:.2f} s after a TERM that was not the run's stop: woken by cmx"
