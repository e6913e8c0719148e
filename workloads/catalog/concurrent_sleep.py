"""``concurrent_sleep``: N tasks sleeping at once; memory per concurrent task (reference/concurrent-tasks-memory.txt).

The study started N tasks that each wait 10 s and read the program's peak memory. Here the driver
publishes ``tasks`` tasks that each ``time.sleep(sleep_s)`` (cooperative in gevent and eventlet
workers), then lets the workers consume: with ``concurrency >= tasks`` (the experiment's job, not
validated here) they are all in flight at once. The finding is memory per concurrent task,
``memory_per_task_bytes``: the workers' peak PSS above their idle PSS, over the most tasks in flight
at once (``tasks_in_flight_max``; engine/results/sql/metrics.sql), what the workload ranks on. The
peaks themselves stay beside it (a runtime heavy at one task may be light per task).
"""

from __future__ import annotations

import time

from pydantic import Field

from cmx.workloads.catalog.base import Workload, WorkloadParams
from cmx.workloads.vocab import metrics as M


class ConcurrentSleepParams(WorkloadParams):
    tasks: int = Field(100, ge=1, description="tasks published, all meant to sleep at the same time")
    sleep_s: float = Field(10.0, ge=0, description="seconds each task sleeps (time.sleep)")


class ConcurrentSleep(Workload):
    name = "concurrent_sleep"
    Params = ConcurrentSleepParams
    splits = True
    smoke_params = {"tasks": 4, "sleep_s": 0.2}
    objective = M.MEMORY_PER_TASK_BYTES
    headline_metrics = (
        M.MEMORY_PER_TASK_BYTES,
        M.TASKS_IN_FLIGHT_MAX,
        M.MAKESPAN_S,
        M.PEAK_PSS_BYTES,
        M.PEAK_RSS_BYTES,
        M.PEAK_PSS_PER_SLOT_BYTES,
        M.PEAK_RSS_PER_SLOT_BYTES,
    )

    def register_tasks(self, app):
        @app.task(name="cmx.concurrent_sleep.sleep", shared=False)
        def sleep(seconds: float) -> None:
            time.sleep(seconds)

    def drive(self, ctx, params: ConcurrentSleepParams):
        sleep = ctx.app.tasks["cmx.concurrent_sleep.sleep"]
        ctx.wait_for_workers()
        # Publish everything first, then consume: the tasks start in one burst and overlap fully,
        # instead of trickling in at the publish rate (10,000 publishes take seconds).
        with ctx.app.producer_or_acquire() as producer:
            for i in range(ctx.share(params.tasks)):  # several drivers: each its share
                sleep.apply_async((params.sleep_s,), producer=producer)
                if i % 1000 == 0:
                    ctx.check_deadline("publishing the sleeping tasks")
        ctx.start_consuming()
        ctx.wait_completed(params.tasks)
