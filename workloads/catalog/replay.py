"""``replay``: a fleet's captured traffic (``cmx capture``), sent again to the run's workers.

The profile (a Parquet file next to the experiment) ships to every host with the user's code
(engine/model/user_code.py: ``cmx_user/<its name>``). Workers register one generic task per
recorded name; each spends its recorded runtime (``work: sleep``, or ``cpu``: spinning) with a
padding kwarg of the recorded args + kwargs size, then sends the tasks it spawned in the capture
(chain links, subtasks). A recorded runtime already holds the original's sends of those tasks
(Celery's chain sends the next link inside the task's runtime), so a task that spawns some spends
its runtime less what sending one takes here (:data:`SENDS`, the median of the last ones): else
a 5 ms chain link ran 2 ms longer replayed than recorded. The driver sends each root task at its
recorded offset / ``speed`` (``mode: exact``) or draws a sequence from what was fitted per name (``mode: fitted``, where
``rate`` scales every name's arrival rate); chords are sent as Celery chords when the run has a
result backend (workloads/catalog/replay_plan.py says how they are recognised).

Every task carries the intended send time, so latency is measured from it, and the run counts
lost and duplicated tasks as any other. Each recorded queue is replayed as a queue of the run
(``cmx.<run id>.q.<recorded name>``: ``RunSpec.extra_queues``, found here on the controller), which
every worker of the run consumes and the run's end removes; a task with no recorded queue goes to
the run's own queue.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from typing import Literal

from pydantic import Field

from cmx.workloads.catalog.base import Workload, WorkloadParams
from cmx.workloads.catalog import usercode
from cmx.workloads.catalog.replay_plan import Call, Unit
from cmx.workloads.vocab import metrics as M


class ReplayParams(WorkloadParams):
    profile: str = Field(
        description="the profile cmx capture wrote (.parquet), relative to the experiment file (shipped to every host)"
    )
    speed: float = Field(1.0, gt=0, description="time scale: 2.0 sends the recorded traffic in half the time")
    names: list[str] | None = Field(None, description="replay only these task names (default: every recorded one)")
    work: Literal["sleep", "cpu"] = Field(
        "sleep", description="how a task spends its recorded runtime: sleep, or cpu (spinning)"
    )
    mode: Literal["exact", "fitted"] = Field(
        "exact",
        description="exact: the recorded sequence; fitted: per "
        "name Poisson arrivals and log-normal runtimes fitted to it",
    )
    rate: float = Field(1.0, gt=0, description="fitted mode: each name's arrival rate × this")
    seed: int = Field(0, ge=0, description="fitted mode: the random draw's seed")
    limit: int | None = Field(
        None,
        ge=1,
        description="replay only the first N units (a root task with what it spawned, or a chord), in send order, "
        "then the first unit of each task name they leave out (so every name runs at least once)",
    )


#: How late (seconds) a send may be before it counts as behind its intended time.
LATE_S = 0.01


class Replay(Workload):
    name = "replay"
    Params = ReplayParams
    #: The driver reads the Parquet profile (DuckDB) and fits distributions (SciPy) on its host.
    host_requirements = ("duckdb", "scipy", "numpy")
    objective = M.LATENCY_P99_S
    smoke_params = {"limit": 20}
    headline_metrics = (
        M.CONSUME_RATE,
        M.LATENCY_P50_S,
        M.LATENCY_P99_S,
        M.queue_wait(50),
        M.queue_wait(99),
        M.service_time(50),
        M.service_time(95),
        M.PEAK_RSS_BYTES,
        M.PEAK_PSS_BYTES,
    )

    def __init__(self) -> None:
        self._params: ReplayParams | None = None
        self._rows: list[dict] | None = None

    def setup(self, params: ReplayParams):
        self._params = params
        return None

    def rows(self, params: ReplayParams, folders=None) -> list[dict]:
        from cmx.workloads.catalog.replay_plan import read_rows, resolve

        if self._rows is None:
            self._rows = read_rows(resolve(params.profile, folders or usercode.user_folders()))
        return self._rows

    def queues(self, params: ReplayParams, folder) -> tuple[str, ...]:
        from cmx.workloads.catalog.replay_plan import queue_suffix, recorded_queues

        self._params = params
        self._rows = None
        rows = self.rows(params, [folder])
        return tuple(queue_suffix(q) for q in recorded_queues(rows, params.names))

    def register_tasks(self, app) -> None:
        from cmx.workloads.catalog.replay_plan import task_names

        for name in task_names(self.rows(self._params), self._params.names):
            _register(app, name)

    def drive(self, ctx, params: ReplayParams) -> None:
        from cmx.workloads.catalog import replay_plan as plan

        rows = self.rows(params)
        if params.mode == "exact":
            units = plan.exact(rows, params.names, params.speed)
        else:
            units, fits = plan.fitted(rows, params.names, params.speed, params.rate, params.seed)
            ctx.notes.append(
                "fitted: "
                + "; ".join(
                    f"{n} {f['tasks']} tasks at {f['rate_per_s']:.3g}/s, runtime {f['runtime']['dist']}"
                    for n, f in fits.items()
                )
            )
        units, added = plan.limited(units, params.limit)
        if added:
            ctx.notes.append(
                f"limit {params.limit}: the first unit of {len(added)} task name(s) the first {params.limit} units "
                f"leave out was added, so every name runs: {', '.join(added)}"
            )
        if note := plan.arrival_note(rows):
            ctx.notes.append(note)
        plan.route(units, ctx.spec.queue)
        if not units:
            raise ValueError(f"profile {params.profile}: no task to replay (names: {params.names})")
        chords = ctx.spec.backend != "none"
        if not chords and any(u.body for u in units):
            ctx.notes.append(
                "the profile has chords and the run has no result backend: each chord's body is "
                "sent by its last header task when it ends"
            )
        total = sum(u.count() for u in units)
        ctx.wait_for_workers()
        ctx.start_consuming()
        behind = _send_all(ctx, units, params.work, chords)
        if behind:
            ctx.notes.append(
                f"driver sent {behind} of {len(units)} replayed units more than {LATE_S * 1000:g} ms "
                "after their intended time"
            )
        ctx.metric(M.PUBLISH_BEHIND, behind, "tasks")
        ctx.wait_completed(total)


def _send_all(ctx, units: list[Unit], work: str, chords: bool) -> int:
    """Send each unit at the clock + its offset; returns how many went out late."""
    from cmx.workloads.runtime.instrument import INTENDED_HEADER

    t0, behind = time.time() + 0.05, 0
    with ctx.app.producer_or_acquire() as producer:
        for i, unit in enumerate(units):
            intended = t0 + unit.at
            delay = intended - time.time()
            if delay > 0:
                time.sleep(delay)
            elif delay < -LATE_S:
                behind += 1
            headers = {INTENDED_HEADER: intended}
            if unit.body is not None and chords:
                from celery import chord

                header = [_signature(ctx.app, c, work, headers) for c in unit.calls]
                chord(header)(_signature(ctx.app, unit.body, work, headers))
            else:
                if unit.body is not None:
                    unit.calls[-1].children.append(unit.body)
                for call in unit.calls:
                    ctx.app.tasks[call.name].apply_async(
                        kwargs=_kwargs(call, work), headers=headers, producer=producer, queue=call.queue
                    )
            if i % 100 == 0:
                ctx.check_deadline("replaying the profile")
    return behind


def _kwargs(call: Call, work: str) -> dict:
    return {
        "runtime": call.runtime,
        "work": work,
        "padding": "x" * call.payload_bytes,
        "queue": call.queue,
        "children": [c.as_spec() for c in call.children],
    }


def _signature(app, call: Call, work: str, headers: dict):
    return app.tasks[call.name].signature(kwargs=_kwargs(call, work), headers=headers, queue=call.queue)


#: Seconds this process took to send a spawned task, the last 20 (their low median is robust to the first,
#: which opens the connection); threads append to it at once safely (a deque's append is atomic).
SENDS: deque[float] = deque(maxlen=20)


def _register(app, name: str) -> None:
    """A generic task called ``name``: spends its runtime, less what sending its children takes here, then
    sends the calls it spawned."""

    @app.task(name=name, shared=False, bind=True)
    def replayed(self, *results, runtime: float = 0.0, work: str = "sleep", padding: str = "", queue=None, children=()):
        send = statistics.median_low(list(SENDS)) if children and SENDS else 0.0  # a copy: other threads append
        spend(max(0.0, runtime - len(children) * send), work)
        for spec in children:
            began = time.perf_counter()
            call = Call.from_spec(spec)
            self.app.tasks[call.name].apply_async(kwargs=_kwargs(call, work), queue=call.queue)
            SENDS.append(time.perf_counter() - began)


def spend(seconds: float, work: str) -> None:
    """``sleep``: wait (cooperatively under gevent/eventlet); ``cpu``: spin on the CPU that long."""
    if work == "sleep":
        time.sleep(seconds)
        return
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
