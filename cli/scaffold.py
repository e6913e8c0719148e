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
# Racing: every cell runs 3 times (the fewest the race's rule tests: its first look already stops
# a cell far worse), then only the cells not yet shown worse than the best get more runs, up to 10,
# until the best is decided (cmx validate says how much worse its looks can tell).
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
    schema_line = (
        f"# yaml-language-server: $schema={os.path.relpath(schema, folder.resolve())}\n" if schema.exists() else ""
    )
    folder.mkdir(parents=True, exist_ok=True)
    experiment.write_text(EXPERIMENT.format(name=name, module=module, path=experiment, schema_line=schema_line))
    tasks.write_text(TASKS.format(name=name))
    return experiment, tasks


FROM_PROFILE = """\
{schema_line}# {name}: which pool, concurrency and prefetch serve the traffic captured in {profile}?
# The replay workload sends that traffic again (recorded names, arrival times, runtimes, payload
# sizes, chains and chords) to workers of each cell; the objective ranks cells on the latency a
# caller of your tasks waits. `cmx run {path} --smoke` first.
# Captured: {summary}.
name: {name}
description: The captured traffic of {profile_name} across pools, concurrency and prefetch
workload:
  name: replay
  params:
    profile: {profile}  # relative to this file; shipped to every host
    mode: exact  # the recorded sequence; fitted: per-name fitted arrivals and runtimes (rate scales them)
    work: sleep  # how a task spends its recorded runtime: sleep (I/O-like) or cpu
    speed: 1.0  # 2.0 replays it in half the time
fixed:
  broker: redis
  backend: {backend}
matrix:
  pool: [prefork, threads, gevent]
  concurrency: {concurrency}  # around the {busy:.1f} tasks the capture kept busy on average (rate × runtime)
  prefetch_multiplier: [1, 4]
repeats: {{min: 3, max: 6, until: decided}}
objective: {{minimize: latency_p99_s, where: {{tasks_lost: "== 0", tasks_failed: "== 0"}}}}
limits: {{run_timeout: {timeout}, max_time: 2h}}
"""


def init_from_profile(name: str, folder: Path, profile: Path) -> Path:
    """Write ``folder/NAME.yaml``: the captured traffic of ``profile`` replayed across pools ×
    concurrency × prefetch, its concurrency values sized from the profile (Little's law)."""
    import math

    from cmx.engine.replay.profile import canvas_kinds, summary
    from cmx.workloads.vocab.services import REDIS

    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]*", name):
        raise InputError(Problem(f"{name!r}: use letters, digits, '_' and '-', starting with a letter", "NAME"))
    rows = summary(profile)
    if not rows:
        raise InputError(Problem("the profile holds no task: capture again while the fleet works", str(profile)))
    experiment = folder / f"{name}.yaml"
    if experiment.exists():
        raise InputError(Problem("already exists: choose another NAME or remove it", str(experiment)))
    busy = sum((r["rate_per_s"] or 0) * (r["runtime_p50"] or 0) for r in rows)
    base = max(1, math.ceil(round(busy, 6)))  # rounded: 4.0 + 2.0 must not ceil to 7
    span = (
        max((r["tasks"] / r["rate_per_s"]) for r in rows if r["rate_per_s"])
        if any(r["rate_per_s"] for r in rows)
        else 0
    )
    schema = Path(COMMITTED).resolve()
    schema_line = (
        f"# yaml-language-server: $schema={os.path.relpath(schema, folder.resolve())}\n" if schema.exists() else ""
    )
    folder.mkdir(parents=True, exist_ok=True)
    experiment.write_text(
        FROM_PROFILE.format(
            name=name,
            path=experiment,
            schema_line=schema_line,
            profile=os.path.relpath(profile.resolve(), folder.resolve()),
            profile_name=profile.name,
            busy=busy,
            concurrency=[base, 2 * base, 4 * base],
            backend=f"{REDIS}  # the captured chords need a result backend"
            if canvas_kinds(profile).get("chord")
            else "none  # no chord captured: no result backend, as a backend's store adds to every task's time",
            timeout=f"{max(5, math.ceil(3 * span / 60))}m",
            summary=", ".join(f"{r['name']} {r['tasks']:,}" for r in rows[:5]) + (" …" if len(rows) > 5 else ""),
        )
    )
    return experiment
