"""A workload's tasks belong to the app they were registered on.

Celery's ``@app.task`` is shared by default: every app finalized later in the same process is
given the first app's callable under that name, and a closure over the first run's state would
then serve the second (Celery 5.6+ warns "already registered to a different callable").
"""

from __future__ import annotations

import warnings

import pytest
from celery import Celery

from cmx.workloads.catalog.registry import WORKLOADS


# tasks: the user's app; replay: the recorded names (test below)
@pytest.mark.parametrize("name", sorted(n for n in WORKLOADS if n not in ("tasks", "replay")))
def test_each_app_runs_its_own_callables(name):
    apps = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # DuplicateTaskNameWarning included
        for _ in range(2):
            app = Celery(f"t-{name}", set_as_current=False)
            WORKLOADS[name]().register_tasks(app)
            app.finalize()
            apps.append(app)
        later = Celery("later", set_as_current=False)
        later.finalize()
    first, second = ({k: t for k, t in a.tasks.items() if k.startswith("cmx.")} for a in apps)
    assert first and sorted(first) == sorted(second)
    for task_name in first:
        assert first[task_name].run is not second[task_name].run, task_name
    assert not [k for k in later.tasks if k.startswith("cmx.")]  # nothing leaks into other apps


def test_replay_registers_each_recorded_name_on_each_app_apart(tmp_path):
    from cmx.engine.replay import capture
    from cmx.workloads.catalog.replay import Replay, ReplayParams

    rows = [
        {"uuid": u, "name": n, "sent": 1.0 + i, "runtime": 0.01}
        for i, (u, n) in enumerate([("a", "shop.render"), ("b", "shop.charge"), ("c", "celery.chord_unlock")])
    ]
    capture.write_profile([{c: r.get(c) for c in capture.COLUMNS} for r in rows], tmp_path / "p.parquet")
    params = ReplayParams(profile=str(tmp_path / "p.parquet"))
    apps = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            app = Celery("t-replay", set_as_current=False)
            workload = Replay()
            workload.setup(params)
            workload.register_tasks(app)
            app.finalize()
            apps.append(app)
    first, second = ({k: t for k, t in a.tasks.items() if k.startswith("shop.")} for a in apps)
    assert sorted(first) == ["shop.charge", "shop.render"] and sorted(second) == sorted(first)
    assert all(first[k].run is not second[k].run for k in first)  # Celery's own chord_unlock: not replayed
