"""``chord_size``: one chord of ``header`` no-op tasks at a time, timed to its callback (issue #16).

The Celery pitfall it shows: a chord's cost grows with its header on a key-value backend. Each
header task stores its result and, on Redis, counts itself into the chord's join key
(``on_chord_part_return``: a round trip per header task), and the last one reads every result back
for the callback. Run ``chords`` chords one after another and report the median time from sending
a chord to its callback's result (``chord_callback_s``) and per header task
(``chord_callback_per_task_s``).

``backend_commands_approx``: the backend Redis server's ``total_commands_processed`` after the
chords minus before, per chord. Server-wide: anything else using that Redis server counts too,
so it is an upper bound on the chords' own commands, not an exact count (hence the name).
"""

from __future__ import annotations

import statistics
import time

from pydantic import Field

from cmx.workloads.catalog.base import DriveTimeout, Workload, WorkloadParams
from cmx.workloads.vocab import metrics as M


class ChordSizeParams(WorkloadParams):
    header: int = Field(100, ge=1, description="header tasks per chord")
    chords: int = Field(3, ge=1, description="chords run one after another (the median is reported)")


class ChordSize(Workload):
    name = "chord_size"
    Params = ChordSizeParams
    needs_backend = True  # a chord's callback needs its header's results
    objective = M.CHORD_CALLBACK_S
    headline_metrics = (M.CHORD_CALLBACK_S, M.CHORD_CALLBACK_PER_TASK_S, M.BACKEND_COMMANDS_APPROX, M.TASKS_COMPLETED)

    def register_tasks(self, app):
        @app.task(name="cmx.chord_size.part", shared=False)
        def part(i: int) -> int:
            return i

        @app.task(name="cmx.chord_size.join", shared=False)
        def join(results: list[int]) -> int:
            return len(results)

    def drive(self, ctx, params: ChordSizeParams):
        from celery import chord
        from celery.exceptions import TimeoutError as CeleryTimeout

        part, join = ctx.app.tasks["cmx.chord_size.part"], ctx.app.tasks["cmx.chord_size.join"]
        ctx.wait_for_workers()
        ctx.start_consuming()
        commands = _commands_processed(ctx.app)
        elapsed = []
        for c in range(params.chords):
            t0 = time.time()
            result = chord([part.s(i) for i in range(params.header)])(join.s())
            try:
                count = result.get(timeout=max(ctx.remaining(), 0.1), interval=0.05)
            except CeleryTimeout:
                raise DriveTimeout(
                    f"run_timeout of {ctx.spec.run_timeout_s:g}s passed while waiting for chord {c} of {params.chords}"
                ) from None
            elapsed.append(time.time() - t0)
            if count != params.header:  # the callback must have seen every header result
                raise RuntimeError(f"chord {c}: the callback saw {count} results of {params.header}")
        after = _commands_processed(ctx.app)
        median = statistics.median(elapsed)
        ctx.metric(M.CHORD_CALLBACK_S, median, "s")
        ctx.metric(M.CHORD_CALLBACK_PER_TASK_S, median / params.header, "s")
        if commands is not None and after is not None:
            ctx.metric(M.BACKEND_COMMANDS_APPROX, (after - commands) / params.chords, "commands")
        # The driver waits on the callbacks; the workers' own count says every task ran.
        ctx.wait_completed(params.chords * (params.header + 1))


def _commands_processed(app) -> int | None:
    """The backend Redis server's command counter (None for other backends)."""
    client = getattr(app.backend, "client", None)
    if client is None or not hasattr(client, "info"):
        return None
    return int(client.info("stats")["total_commands_processed"])
