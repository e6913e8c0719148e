"""The params of ``throughput``, apart from it so that its Celery drive (throughput.py) and its raw
drive (throughput_raw.py) both read them without importing each other."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from cmx.workloads.catalog.base import WorkloadParams


class ThroughputParams(WorkloadParams):
    tasks: int = Field(1000, ge=1, description="tasks to publish")
    payload_bytes: int = Field(64, ge=0, description="size of each task's payload")
    mode: Literal["backlog", "stream", "ramp"] = "backlog"
    rate: float = Field(200.0, gt=0, description="stream mode: tasks published per second; ramp: the first step's")
    via: Literal["celery", "raw"] = Field(
        "celery", description="celery, or raw: the broker's own client (redis-py, pika), consumers in the driver"
    )
    rate_fraction: float | None = Field(
        None,
        gt=0,
        le=1.5,
        description="stream mode: publish at this fraction of the cell's maximum sustainable "
        "rate, which cmx finds first with one ramp run of the cell (overrides rate)",
    )
    ramp_steps: int = Field(10, ge=2, le=30, description="ramp mode: at most this many steps")
    ramp_step_s: float = Field(2.0, ge=0.5, le=60, description="ramp mode: seconds per step")
    ramp_factor: float = Field(1.5, gt=1, le=4, description="ramp mode: each step's rate is the previous one's × this")

    @model_validator(mode="after")
    def _fraction_needs_stream(self):
        if self.rate_fraction is not None and (self.mode != "stream" or self.via != "celery"):
            raise ValueError("rate_fraction needs mode: stream (and via: celery)")
        if self.mode == "ramp" and self.via != "celery":
            raise ValueError("mode: ramp needs via: celery")
        return self

    raw_batch: int = Field(
        500,
        ge=1,
        description="via raw, backlog: messages per round trip the server acknowledges "
        "(1: one call per message, each acknowledged, as the study did)",
    )
    publisher: Literal["fast", "celery"] = Field(
        "fast",
        description="fast: Celery's message built once and sent in batches (workloads/drive/publisher.py), "
        "so the driver is never the bottleneck; celery: an apply_async loop, to measure "
        "Celery's own client",
    )
    stamping: bool = Field(
        True,
        description="per-task stamps (the tasks table); false only to measure their "
        "cost: the run then has drained_rate but no per-task metrics",
    )
