"""``throughput``: publish N no-op tasks and consume them (reference/throughput-celery-vs-raw.zh.md).

``mode: backlog`` publishes all N while the workers hold off, then lets them consume: publish rate
and consume rate are measured apart, as the study did. ``mode: stream`` publishes at ``rate``
tasks/s while the workers consume: per-task latency is what it measures.

``via: raw`` does the same without Celery, with the broker's own client (workloads/raw_broker.py);
for now its consumers are threads of the driver process, on the driver host.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from workloads.base import Workload, WorkloadParams


class ThroughputParams(WorkloadParams):
    tasks: int = Field(1000, ge=1, description="tasks to publish")
    payload_bytes: int = Field(64, ge=0, description="size of each task's payload")
    mode: Literal["backlog", "stream"] = "backlog"
    rate: float = Field(200.0, gt=0, description="stream mode: tasks published per second")
    via: Literal["celery", "raw"] = Field(
        "celery", description="celery, or raw: the broker's own client (redis-py, pika), consumers in the driver")
    publisher: Literal["fast", "celery"] = Field(
        "fast", description="fast: Celery's message built once and sent in batches (workloads/publisher.py), "
                            "so the driver is never the bottleneck; celery: an apply_async loop, to measure "
                            "Celery's own client")
    stamping: bool = Field(True, description="per-task stamps (the tasks table); false only to measure their "
                                             "cost: the run then has drained_rate but no per-task metrics")


class Throughput(Workload):
    name = "throughput"
    Params = ThroughputParams
    headline_metrics = ("publish_rate", "consume_rate", "latency_p50_s", "latency_p99_s", "peak_rss_bytes",
                        "peak_pss_bytes")

    def register_tasks(self, app):
        @app.task(name="cmx.throughput.noop")
        def noop(payload):
            return None

    def drive(self, ctx, params: ThroughputParams):
        import time

        from workloads.instrument import INTENDED_HEADER

        if params.via == "raw":
            from workloads.raw_broker import drive_raw

            return drive_raw(ctx, params)
        noop = ctx.app.tasks["cmx.throughput.noop"]
        payload = "x" * params.payload_bytes
        ctx.wait_for_workers()
        if params.mode == "stream":
            ctx.start_consuming()
        if params.publisher == "fast":
            from workloads import publisher

            if params.mode == "backlog":
                publisher.publish_backlog(ctx.app, noop.name, (payload,), params.tasks, ctx.host, ctx.check_deadline)
                consuming = time.time()
                ctx.start_consuming()
                ctx.wait_completed(params.tasks)
                # The workers' own completion counts, polled: a consume rate that needs no stamps.
                return ctx.metric("drained_rate", params.tasks / (time.time() - consuming), "tasks/s")
            else:
                behind = publisher.publish_stream(ctx.app, noop.name, (payload,), params.tasks, params.rate, ctx.host,
                                                  ctx.check_deadline)
                if behind:
                    ctx.notes.append(f"driver fell behind the target rate on {behind} of {params.tasks} publishes")
                ctx.metric("publish_behind", behind, "tasks")
            return ctx.wait_completed(params.tasks)
        with ctx.app.producer_or_acquire() as producer:
            if params.mode == "backlog":
                for _ in range(params.tasks):
                    noop.apply_async((payload,), producer=producer)
                    # the deadline check is cheap relative to a publish; keep runs bounded
                ctx.check_deadline("publishing the backlog")
            else:
                t0 = time.time() + 0.05
                interval = 1.0 / params.rate
                behind = 0
                for i in range(params.tasks):
                    intended = t0 + i * interval
                    delay = intended - time.time()
                    if delay > 0:
                        time.sleep(delay)
                    elif delay < -interval:
                        behind += 1
                    noop.apply_async((payload,), producer=producer, headers={INTENDED_HEADER: intended})
                    if i % 1000 == 0:
                        ctx.check_deadline("publishing the stream")
                if behind:
                    ctx.notes.append(f"driver fell behind the target rate on {behind} of {params.tasks} publishes")
                ctx.metric("publish_behind", behind, "tasks")
        if params.mode == "backlog":
            ctx.start_consuming()
        ctx.wait_completed(params.tasks)
