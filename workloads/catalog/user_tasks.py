"""``tasks``: the user's own Celery tasks, published N times (backlog or stream) to real workers.

The user's module is plain Celery code (``from celery import shared_task``) that imports nothing
from cmx. The engine ships it with the run (``workloads/catalog/usercode.py`` says where it lands); the
workers and the driver import it before the app is finalized, so ``shared_task`` binds its tasks to
the run's app and cmx's signal handlers stamp them like any other task.

With ``app: pkg.mod:app`` the run uses the user's Celery app object and its configuration,
except what the harness owns (broker, backend, queues, routes) and what the cell sets
(``workloads/app/factory.py`` applies those on top and records what it overrode).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from cmx.workloads.catalog import usercode
from cmx.workloads.catalog.base import Workload, WorkloadParams
from cmx.workloads.runtime.instrument import own_tasks
from cmx.workloads.vocab import metrics as M


class UserTasksParams(WorkloadParams):
    module: str | None = Field(
        None,
        description="your tasks: a .py file or a package folder, relative to the "
        "experiment file (shipped to every worker)",
    )
    task: str = Field(description="the registered name of the task to call, e.g. mytasks.resize")
    args: list[Any] = Field(default_factory=list, description="JSON-able positional arguments of each call")
    kwargs: dict[str, Any] = Field(default_factory=dict, description="JSON-able keyword arguments of each call")
    tasks: int = Field(100, ge=1, description="calls to publish")
    mode: Literal["backlog", "stream"] = Field(
        "backlog", description="backlog: publish all, then consume; stream: publish at rate while workers consume"
    )
    rate: float = Field(100.0, gt=0, description="stream mode: calls published per second")
    app: str | None = Field(
        None,
        description="your Celery app, pkg.mod:attr, inside module: its settings are "
        "used except broker, backend, queues and the cell's own",
    )

    @model_validator(mode="after")
    def _module_or_app(self):
        if self.module is None and self.app is None:
            raise ValueError("set module (your tasks file or package), or app (pkg.mod:app)")
        if self.app is not None:
            usercode.parse_object_ref(self.app)
        return self


def import_user_code(params: UserTasksParams, folder) -> Any:
    """Import the user's module (and app, if one is named) from ``folder``; the app object or None."""
    if params.module is not None:
        usercode.import_module(usercode.module_name(params.module), folder)
    if params.app is None:
        return None
    where, attr = usercode.parse_object_ref(params.app)
    return getattr(usercode.import_module(where, folder), attr)


def find_task(app, name: str, folder) -> Any:
    """The task ``name`` on ``app``, importing the module its name points into when the package's
    ``__init__`` did not (``pkg.tasks.resize`` -> ``pkg.tasks``); KeyError listing what is there."""
    if name not in app.tasks:
        parts = name.split(".")
        for end in range(len(parts) - 1, 0, -1):
            candidate = ".".join(parts[:end])
            try:
                usercode.import_module(candidate, folder)
                break
            except ModuleNotFoundError as exc:
                if exc.name is None or not candidate.startswith(exc.name):
                    raise  # the module is there but needs something missing: say that, not "no task"
                continue
    if name not in app.tasks:
        mine = own_tasks(app)
        raise KeyError(f"no task registered as {name!r} (registered: {', '.join(mine) or 'none'})")
    return app.tasks[name]


class UserTasks(Workload):
    name = "tasks"
    Params = UserTasksParams
    splits = True  # throughput's publish: each driver its share
    #: What the user's own tasks are judged by (and ``cmx trend`` gates on): how fast they are consumed,
    #: how long they wait and run, whether they fail, the workers' memory. The driver's publish rate
    #: is the broker's and cmx's, not the tasks': shown, never gating.
    headline_metrics = (
        M.CONSUME_RATE,
        M.LATENCY_P50_S,
        M.LATENCY_P99_S,
        M.queue_wait(50),
        M.queue_wait(99),
        M.service_time(50),
        M.service_time(95),
        M.TASKS_FAILED,
        M.PEAK_RSS_BYTES,
        M.PEAK_PSS_BYTES,
    )
    smoke_params = {"tasks": 5}

    def __init__(self) -> None:
        self._params: UserTasksParams | None = None

    def headline(self, params: UserTasksParams) -> tuple[str, ...]:
        # A backlog's finished - sent is the task's place in the queue, not a latency anyone feels:
        # its queue wait and service time are the figures (as throughput's).
        if params.mode == "backlog":
            return tuple(m for m in self.headline_metrics if not m.startswith("latency_"))
        return self.headline_metrics

    def setup(self, params: UserTasksParams):
        self._params = params
        return import_user_code(params, usercode.USER_DIR)

    def register_tasks(self, app) -> None:
        # Fails the worker's start (named in worker.log) when the task is not there.
        find_task(app, self._params.task, usercode.USER_DIR)

    def drive(self, ctx, params: UserTasksParams) -> None:
        from cmx.workloads.catalog.throughput import publish

        task = ctx.app.tasks[params.task]
        # The task's own `queue` option would send it where no worker of the run listens.
        publish(
            ctx,
            task,
            tuple(params.args),
            dict(params.kwargs),
            params.tasks,
            params.mode,
            params.rate,
            queue=ctx.spec.queue,
        )


def check_script() -> str:
    """Python run by ``python -c`` on the controller to list the tasks a module registers (imported
    in a subprocess, so the user's import-time code never runs inside cmx; bounded by a timeout)."""
    return (
        "import sys\n"
        "sys.path[:] = [p for p in sys.path if p not in ('', '.')]  # the user's folder goes last, not first\n"
        "import json\n"
        "from celery import Celery\n"
        "from cmx.workloads.catalog import user_tasks\n"
        "params = user_tasks.UserTasksParams.model_validate(json.loads(sys.argv[1]))\n"
        "folder = sys.argv[2]\n"
        "out = {}\n"
        "try:\n"
        "    ours = Celery('cmx-validate', set_as_current=True)\n"
        "    app = user_tasks.import_user_code(params, folder) or ours\n"
        "    user_tasks.find_task(app, params.task, folder)\n"
        "except BaseException as exc:\n"
        "    import traceback\n"
        "    tb = traceback.extract_tb(exc.__traceback__)\n"
        "    where = next((f'{f.filename}:{f.lineno}' for f in reversed(tb) if f.filename.startswith(folder)), '')\n"
        "    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)\n"
        "    out['error'] = (type(exc).__name__ + ': ' + str(text)).splitlines()[0]\n"
        "    out['where'] = where\n"
        "print(json.dumps(out))\n"
    )
