"""``throughput`` with ``mode: ramp``: one bounded run that steps the publish rate up, so cmx can
find a cell's maximum sustainable rate (engine/plan/ratesearch.py judges the steps after ingest).

Step k publishes at ``rate × ramp_factor**k`` tasks/s for ``ramp_step_s`` seconds, every task
stamped with its intended send time. The ramp stops early, to keep the drain short, when the
queue holds more than half a step's tasks at the end of a step (the cell is clearly behind), or
when the driver itself falls behind the schedule (then the publisher, not the cell, is the limit:
said in a note). At most ``ramp_steps`` steps: the run is bounded by
``ramp_steps × ramp_step_s`` plus the drain of the last step.
"""

from __future__ import annotations

import time

from cmx.workloads.runtime.instrument import INTENDED_HEADER
from cmx.workloads.vocab import metrics as M

#: Stop when the queue holds more than this share of a step's tasks at the step's end.
BACKLOG_SHARE = 0.5
#: ...or when publishing a step overran its schedule by more than this share of a step.
OVERRUN_SHARE = 0.25


def drive_ramp(ctx, params, task, payload) -> None:
    ctx.wait_for_workers()
    ctx.start_consuming()
    sent = steps = 0
    start = time.time() + 0.05
    # The schedule is strict (step k starts at start + k × ramp_step_s) so the judge can rebuild the
    # steps from intended send times alone; a late publish counts as latency, as it should.
    with ctx.app.connection_for_read() as conn, ctx.app.producer_or_acquire() as producer:
        for k in range(params.ramp_steps):
            rate = params.rate * params.ramp_factor**k
            n = max(1, round(rate * params.ramp_step_s))
            interval = params.ramp_step_s / n
            for i in range(n):
                intended = start + i * interval
                delay = intended - time.time()
                if delay > 0:
                    time.sleep(delay)
                task.apply_async((payload,), producer=producer, headers={INTENDED_HEADER: intended})
                if i % 500 == 0:
                    ctx.check_deadline("ramping up the rate")
            sent, steps = sent + n, k + 1
            start += params.ramp_step_s
            overrun = time.time() - start
            depth = ctx.queue_depth(conn)
            if depth is not None:
                ctx.queue_samples.append((time.time(), depth))
            if depth is not None and depth > BACKLOG_SHARE * n:
                ctx.notes.append(f"ramp stopped after step {steps} ({rate:,.0f}/s): {depth} tasks waiting")
                break
            if overrun > OVERRUN_SHARE * params.ramp_step_s:
                ctx.notes.append(
                    f"ramp stopped after step {steps} ({rate:,.0f}/s): the driver could not publish "
                    "faster (the publisher, not the cell, is the limit here)"
                )
                break
    # What the judge needs to rebuild the steps from the tasks' intended send times.
    ctx.metric(M.RAMP_STEPS_RUN, steps, "steps")
    ctx.metric(M.RAMP_START_RATE, params.rate, "tasks/s")
    ctx.metric(M.RAMP_FACTOR, params.ramp_factor, "")
    ctx.metric(M.RAMP_STEP_S, params.ramp_step_s, "s")
    ctx.wait_completed(sent)
