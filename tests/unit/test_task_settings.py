"""The settings a task really runs with: read from each of the run's own task objects in a real
worker (Celery's in-process test worker on the in-memory transport: no service needed), and a
task that runs other than the cell asks is named with the setting and both values."""

from __future__ import annotations

import pytest
from celery import Celery, Task
from celery.contrib.testing.worker import start_worker

from cmx.workloads.runtime import instrument
from cmx.workloads.drive.workerwatch import mismatches, wanted_config
from cmx.workloads.runtime.effective import TASK_SETTINGS, effective_config, parse_task_key, task_key
from cmx.workloads.runtime.spec import RunSpec

CELL = {
    "task_acks_late": True,
    "task_time_limit": 30,
    "task_soft_time_limit": 20,
    "task_default_rate_limit": "5/s",
    "task_compression": "gzip",
    "task_serializer": "json",
    "worker_max_tasks_per_child": None,
}


@pytest.fixture(scope="module")
def app():
    """An app configured as the cell says, with a task that sets its own options, one that does
    not, and the harness's wake task."""
    app = Celery("cell", broker="memory://", backend="cache+memory://", set_as_current=False)
    app.conf.update(CELL, broker_transport_options={"polling_interval": 0.05})  # a prompt stop

    @app.task(
        name="user.pkg.own",
        acks_late=False,
        time_limit=7,
        rate_limit="1/s",
        compression="zlib",
        serializer="pickle",
        shared=False,
    )
    def own():
        return None

    @app.task(name="user.pkg.plain", shared=False)
    def plain():
        return None

    instrument.register_wake(app)
    return app


_reports: dict[tuple, dict] = {}


def _report(app, pool: str, **worker) -> dict:
    """The worker's report (each worker's stop takes seconds: one per pool for the module)."""
    key = (pool, *sorted(worker.items()))
    if key not in _reports:
        with start_worker(app, pool=pool, concurrency=1, perform_ping_check=False, shutdown_timeout=30, **worker) as w:
            _reports[key] = effective_config(w.consumer, sorted(CELL))
    return _reports[key]


def _tasks(report: dict) -> dict:
    return {parse_task_key(k): v for k, v in report.items() if parse_task_key(k)}


def test_each_of_the_runs_tasks_reports_what_it_runs_with(app):
    runs = _tasks(_report(app, "prefork"))
    # only the run's own tasks: not Celery's built-ins (celery.chord_unlock...) nor cmx.wake (a
    # shared task other tests imported joins every app, as a user's module does in a worker)
    tasks = {task for task, _ in runs}
    assert {"user.pkg.own", "user.pkg.plain"} <= tasks
    assert not any(t.startswith("celery.") or t == instrument.WAKE_TASK for t in tasks), tasks
    runs = {(task, s): v for (task, s), v in runs.items() if task.startswith("user.pkg.")}
    # only the task-level settings the cell names (worker_max_tasks_per_child is the worker's)
    assert {setting for _, setting in runs} == set(CELL) - {"worker_max_tasks_per_child"}
    assert {s: runs["user.pkg.plain", s] for s in CELL if ("user.pkg.plain", s) in runs} == {
        k: v for k, v in CELL.items() if k != "worker_max_tasks_per_child"
    }
    assert {s: v for (task, s), v in runs.items() if task == "user.pkg.own"} == {
        "task_acks_late": False,
        "task_time_limit": 7,
        "task_soft_time_limit": 20,
        "task_default_rate_limit": "1/s",
        "task_compression": "zlib",
        "task_serializer": "pickle",
    }


def test_a_time_limit_the_pool_drops_runs_as_none(app):
    # threads and solo hand no time limit to where it would act (their apply drops it)
    for runs, pool in (
        (_tasks(_report(app, "threads", disable_rate_limits=True)), "threads"),
        (_tasks(_report(app, "solo")), "solo"),
    ):
        assert runs["user.pkg.plain", "task_time_limit"] is None, pool
        assert runs["user.pkg.plain", "task_soft_time_limit"] is None, pool
        assert runs["user.pkg.plain", "task_acks_late"] is True, pool


def test_rate_limits_a_worker_disables_run_as_none(app):
    runs = _tasks(_report(app, "threads", disable_rate_limits=True))
    assert runs["user.pkg.own", "task_default_rate_limit"] is None
    assert runs["user.pkg.plain", "task_default_rate_limit"] is None


def test_a_task_running_otherwise_than_the_cell_names_task_setting_and_both_values(app):
    spec = RunSpec(
        run_id="r1",
        experiment="e",
        cell_id="c",
        repeat=1,
        workload="tasks",
        celery={"task_acks_late": True, "task_serializer": "json"},
    )
    want = {k: v for k, v in wanted_config(spec).items() if k.startswith("celery.")}  # not the test worker's pool
    report = _report(app, "prefork")
    assert mismatches(want, report) == [
        "cell asks celery.task_acks_late True; task user.pkg.own runs False",
        "cell asks celery.task_serializer 'json'; task user.pkg.own runs 'pickle'",
    ]
    assert (
        mismatches(
            want,
            {
                **report,
                task_key("user.pkg.own", "task_acks_late"): True,
                task_key("user.pkg.own", "task_serializer"): "json",
            },
        )
        == []
    )


def test_task_keys_and_celerys_own_table():
    assert parse_task_key(task_key("pkg.mod.work", "task_acks_late")) == ("pkg.mod.work", "task_acks_late")
    assert parse_task_key("celery.task_acks_late") is None and parse_task_key("pool") is None
    # every setting Celery's Task takes a default from is one a task can set for itself
    assert all(TASK_SETTINGS[setting] == attr for attr, setting in Task.from_config)
