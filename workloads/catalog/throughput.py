"""``throughput``: publish N no-op tasks and consume them (reference/throughput-celery-vs-raw.zh.md).

``mode: backlog`` publishes all N while the workers hold off, then lets them consume: publish rate
and consume rate are measured apart, as the study did. ``mode: stream`` publishes at ``rate``
tasks/s while the workers consume: per-task latency is what it measures.

``via: raw`` does the same without Celery, with the broker's own client (workloads/catalog/throughput_raw.py);
for now its consumers are threads of the driver process, on the driver host.
"""

from __future__ import annotations

from cmx.workloads.catalog.base import Workload
from cmx.workloads.catalog.throughput_params import ThroughputParams
from cmx.workloads.vocab import metrics as M

__all__ = ["Throughput", "ThroughputParams"]


class Throughput(Workload):
    name = "throughput"
    Params = ThroughputParams
    smoke_params = {"tasks": 20}
    splits = True
    headline_metrics = (
        M.PUBLISH_RATE,
        M.PUBLISH_BATCH,
        M.CONSUME_RATE,
        M.LATENCY_P50_S,
        M.LATENCY_P99_S,
        M.queue_wait(50),
        M.queue_wait(99),
        M.service_time(50),
        M.PEAK_PSS_BYTES,
        M.PEAK_RSS_BYTES,
    )

    def headline(self, params: ThroughputParams) -> tuple[str, ...]:
        # A backlog's finished - sent is the task's place in the queue, not a latency anyone feels:
        # show its queue wait and service time apart. A stream's latency (from the intended send)
        # is what a caller waits; its queue wait and service time explain it.
        # The raw baseline's batch size sits beside its publish rate (Celery publishes one by one).
        drop = ("latency_" if params.mode == "backlog" else "-", M.PUBLISH_BATCH if params.via != "raw" else "-")
        return tuple(m for m in self.headline_metrics if not m.startswith(drop))

    def split_problem(self, params: ThroughputParams) -> str | None:
        if params.via == "raw":
            return "via: raw consumes in its own driver process, which cannot be split: use drivers: 1"
        if params.mode == "ramp" or params.rate_fraction is not None:
            return (
                "a rate search (mode: ramp, rate_fraction) reads one driver's pace and cannot be split: use drivers: 1"
            )
        return None

    def register_tasks(self, app):
        @app.task(name="cmx.throughput.noop", shared=False)
        def noop(payload):
            return None

    def drive(self, ctx, params: ThroughputParams):
        if params.via == "raw":
            from cmx.workloads.catalog.throughput_raw import drive_raw

            return drive_raw(ctx, params)
        noop = ctx.app.tasks["cmx.throughput.noop"]
        payload = "x" * params.payload_bytes
        if params.mode == "ramp":
            from cmx.workloads.drive.ramp import drive_ramp

            return drive_ramp(ctx, params, noop, payload)
        publish(ctx, noop, (payload,), {}, params.tasks, params.mode, params.rate, publisher=params.publisher)


def publish(
    ctx, task, args: tuple, kwargs: dict, tasks: int, mode: str, rate: float, publisher: str = "celery", **options
) -> None:
    """Publish ``tasks`` calls of ``task`` and wait for them: ``backlog`` publishes all while the
    workers hold off, then lets them consume; ``stream`` publishes at ``rate`` per second while they
    consume, each message carrying when it was meant to be sent. Shared by every workload that
    publishes one task N times (``throughput``, the user's own ``tasks``). ``publisher: fast``
    sends copies of one message Celery built, in batches (workloads/drive/publisher.py), for calls
    without kwargs or options; ``celery`` is a plain ``apply_async`` loop. With several drivers
    each sends its share of ``tasks`` (a stream at its share of ``rate``), and the leader waits
    for all of them."""
    import time

    from cmx.workloads.drive.pacing import Pacer
    from cmx.workloads.runtime.instrument import INTENDED_HEADER

    total, tasks, rate = tasks, ctx.share(tasks), ctx.share_rate(rate)
    ctx.wait_for_workers()
    if mode == "stream":
        ctx.start_consuming()
    if publisher == "fast" and not kwargs and not options:
        from cmx.workloads.drive import publisher as fast

        if mode == "backlog":
            fast.publish_backlog(ctx.app, task.name, args, tasks, ctx.host, ctx.check_deadline, returned=ctx.returned)
            consuming = time.time()
            ctx.start_consuming()
            ctx.wait_completed(total)
            if ctx.leads:  # the workers' own completion counts, polled: a consume rate that needs no stamps
                ctx.metric(M.DRAINED_RATE, total / (time.time() - consuming), "tasks/s")
            return
        behind = fast.publish_stream(
            ctx.app, task.name, args, tasks, rate, ctx.host, ctx.check_deadline, returned=ctx.returned
        )
        if behind:
            ctx.notes.append(f"driver fell behind the target rate on {behind} of {tasks} publishes")
        ctx.metric(M.PUBLISH_BEHIND, behind, "tasks")
        ctx.wait_completed(total)
        return
    with ctx.app.producer_or_acquire() as producer:
        if mode == "backlog":
            for _ in range(tasks):
                task.apply_async(args, kwargs, producer=producer, **options)
                # the deadline check is cheap relative to a publish; keep runs bounded
            ctx.check_deadline("publishing the backlog")
        else:
            pacer = Pacer(rate)
            for i in range(tasks):
                intended = pacer.wait(i)
                task.apply_async(args, kwargs, producer=producer, headers={INTENDED_HEADER: intended}, **options)
                if i % 1000 == 0:
                    ctx.check_deadline("publishing the stream")
            pacer.note_behind(ctx, tasks)
            ctx.metric(M.PUBLISH_BEHIND, pacer.behind, "tasks")
    if mode == "backlog":
        ctx.start_consuming()
    ctx.wait_completed(total)
