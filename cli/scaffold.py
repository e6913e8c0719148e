"""``cmx init NAME``: an experiment and a tasks module beside it that run as they are.

The tasks module is plain Celery (``shared_task``), the experiment uses the built-in ``tasks``
workload; both are meant to be edited into the user's own benchmark.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from cmx.engine.errors import InputError, Problem
from cmx.engine.model.schema import COMMITTED

EXPERIMENT = """\
{schema_line}# {name}: your own Celery tasks under cmx. Put your task in {module}.py (plain Celery, nothing
# from cmx), name it below, and choose what to vary. `cmx run {path} --smoke` first.
name: {name}
description: Your tasks across pools and concurrency
workload:
  name: tasks
  params:
    module: {module}.py  # a .py file or a package folder, relative to this file
    task: {module}.work  # the task's registered name
    args: [20000]  # JSON-able arguments of each call (kwargs: {{}} too)
    tasks: 200
    mode: backlog  # or stream, with rate: calls per second
fixed:
  broker: redis
matrix:
  pool: [prefork, threads]
  concurrency: [1, 2]
# Racing: every cell runs 3 times, then only the cells not yet shown worse than the best get more
# runs, up to 10, until the best is decided (cmx run says what it can show before it starts).
repeats: {{min: 3, max: 10, until: decided}}
# What "best" means: cmx recommend and the report rank on it; where drops cells that break a constraint.
objective: {{maximize: consume_rate, where: {{tasks_failed: "== 0"}}}}
limits: {{run_timeout: 5m, max_time: 30m}}  # max_time: the race's budget
"""

TASKS = '''\
"""Tasks of the {name} experiment: plain Celery, nothing from cmx. Replace work() with your own."""
from celery import shared_task


@shared_task
def work(size):
    """A CPU-bound stand-in for your task: the sum of the first `size` squares."""
    return sum(i * i for i in range(size))
'''


def init(name: str, folder: Path) -> tuple[Path, Path]:
    """Write ``folder/NAME.yaml`` and ``folder/NAME_tasks.py``; refuses to overwrite either."""
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        raise InputError(Problem(f"{name!r}: use letters, digits, '_' and '-', starting with a letter", "NAME"))
    module = name.replace("-", "_") + "_tasks"
    experiment, tasks = folder / f"{name}.yaml", folder / f"{module}.py"
    for path in (experiment, tasks):
        if path.exists():
            raise InputError(Problem("already exists: choose another NAME or remove it", str(path)))
    schema = Path(COMMITTED).resolve()
    schema_line = (f"# yaml-language-server: $schema={os.path.relpath(schema, folder.resolve())}\n"
                   if schema.exists() else "")
    folder.mkdir(parents=True, exist_ok=True)
    experiment.write_text(EXPERIMENT.format(name=name, module=module, path=experiment, schema_line=schema_line))
    tasks.write_text(TASKS.format(name=name))
    return experiment, tasks
