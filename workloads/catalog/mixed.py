"""``mixed``: a stream of short tasks with a long one every ``long_every`` (Celery's pitfalls, issue #16).

Built to show traps rather than to measure a study: prefetch head-of-line blocking (short tasks a
busy worker reserved wait behind its long one), with ``countdown_s``, Redis's visibility
timeout (a message unacknowledged for longer than ``visibility_timeout`` is delivered again, so an
ETA task further ahead than that runs twice), and, with ``blocking``, broker heartbeats under
gevent (a task blocking the loop gets the connection dropped: its prefetched task runs twice).

Task names tell short from long (``cmx.mixed.short`` / ``cmx.mixed.long``), so SQL splits them:
``short_latency_p99_s``, ``short_latency_p50_s`` and ``short_delayed_share`` (the share of short
tasks that took longer than half a long task, i.e. that waited behind one) in engine/results/sql/metrics.sql.
Latency is from the intended send time; with a countdown it includes the countdown (the latency
metrics are for the prefetch experiment, which has none).
"""

from __future__ import annotations

import time

from pydantic import Field

from cmx.workloads.catalog.base import Workload, WorkloadParams
from cmx.workloads.vocab import metrics as M


class MixedParams(WorkloadParams):
    tasks: int = Field(200, ge=1, description="tasks to publish, long ones included")
    long_every: int = Field(10, ge=0, description="every Nth task is long (0: none)")
    long_s: float = Field(2.0, ge=0, description="seconds a long task sleeps")
    short_s: float = Field(0.01, ge=0, description="seconds a short task sleeps")
    rate: float = Field(20.0, gt=0, description="tasks published per second")
    countdown_s: float = Field(0.0, ge=0, description="Celery countdown of every task (an ETA this far ahead)")
    blocking: bool = Field(
        False,
        description="sleep with the unpatched time.sleep: under gevent/eventlet the "
        "whole worker blocks (its event loop and heartbeats too); a "
        "task longer than 2 s yields for its first 2 s",
    )
    settle_s: float = Field(
        0.0, ge=0, description="seconds to wait after the last task finished, for late duplicate executions to show up"
    )


#: The task names engine/results/sql/metrics.sql splits on (keep the two in step).
SHORT, LONG = "cmx.mixed.short", "cmx.mixed.long"


class Mixed(Workload):
    name = "mixed"
    Params = MixedParams
    objective = M.SHORT_LATENCY_P99_S
    headline_metrics = (
        M.SHORT_LATENCY_P50_S,
        M.SHORT_LATENCY_P99_S,
        M.SHORT_DELAYED_SHARE,
        M.TASKS_DUPLICATED,
        M.CONSUME_RATE,
    )

    def register_tasks(self, app):
        # time.sleep: cooperative in gevent/eventlet workers (they patch it), blocking in prefork;
        # blocking=True stands for CPU work or an unpatched C call: nothing else runs meanwhile.
        @app.task(name=SHORT, shared=False)
        def short(seconds: float, blocking: bool = False) -> None:
            _sleep(seconds, blocking)

        @app.task(name=LONG, shared=False)
        def long(seconds: float, blocking: bool = False) -> None:
            _sleep(seconds, blocking)

    def drive(self, ctx, params: MixedParams):
        from cmx.workloads.drive.pacing import Pacer
        from cmx.workloads.runtime.instrument import INTENDED_HEADER

        short, long = ctx.app.tasks[SHORT], ctx.app.tasks[LONG]
        ctx.wait_for_workers()
        ctx.start_consuming()
        countdown = params.countdown_s or None
        pacer = Pacer(params.rate)
        with ctx.app.producer_or_acquire() as producer:
            for i in range(params.tasks):
                intended = pacer.wait(i)
                is_long = params.long_every and i % params.long_every == 0
                task, seconds = (long, params.long_s) if is_long else (short, params.short_s)
                task.apply_async(
                    (seconds, params.blocking),
                    producer=producer,
                    countdown=countdown,
                    headers={INTENDED_HEADER: intended},
                )
                if i % 100 == 0:
                    ctx.check_deadline("publishing the mix")
        pacer.note_behind(ctx, params.tasks)
        ctx.wait_completed(params.tasks)
        end = time.monotonic() + params.settle_s
        while time.monotonic() < end:
            ctx.check_deadline("settling after the last task")
            time.sleep(min(0.2, max(end - time.monotonic(), 0)))


#: A blocking task longer than this first sleeps this long cooperatively, then blocks for the rest:
#: the worker answers the run's watchdog (workloads/drive/workerwatch.py) at least once with the
#: task running, so the silence that follows reads as "busy", not as a dead worker.
YIELD_FIRST_S = 2.0


def _sleep(seconds: float, blocking: bool) -> None:
    if blocking and seconds > YIELD_FIRST_S:
        time.sleep(YIELD_FIRST_S)
        seconds -= YIELD_FIRST_S
    (_unpatched_sleep() if blocking else time.sleep)(seconds)


def _unpatched_sleep():
    """time.sleep as it was before gevent or eventlet patched it (time.sleep when neither did)."""
    import sys

    if "gevent.monkey" in sys.modules:
        from gevent import monkey

        if monkey.is_module_patched("time"):
            return monkey.get_original("time", "sleep")
    if "eventlet.patcher" in sys.modules:
        from eventlet import patcher

        if patcher.is_monkey_patched("time"):
            return patcher.original("time").sleep
    return time.sleep
