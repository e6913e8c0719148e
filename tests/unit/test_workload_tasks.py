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


@pytest.mark.parametrize("name", sorted(n for n in WORKLOADS if n != "tasks"))  # tasks: the user's app
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
