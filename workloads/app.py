"""The Celery app factory: one app per run, configured from the run spec and the environment."""
from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from kombu import Queue

from workloads import instrument, registry
from workloads.recorder import Recorder
from workloads.spec import RunSpec


def queue_arguments(spec: RunSpec) -> dict:
    return {"x-queue-type": "quorum"} if spec.broker == "rabbitmq-quorum" else {}


def backend_url(spec: RunSpec) -> str | None:
    if spec.backend == "none":
        return None
    if spec.backend == "rpc":
        return "rpc://"
    url = os.environ["CMX_BACKEND_URL"]
    if spec.backend == "postgres":
        # Celery's database backend takes SQLAlchemy URLs; name the driver the hosts have
        # (SQLAlchemy 2.1 would pick psycopg 3 for a bare postgresql://).
        url = url.removeprefix("db+")
        for bare in ("postgresql://", "postgres://"):
            if url.startswith(bare):
                url = "postgresql+psycopg2://" + url[len(bare):]
        url = "db+" + url
    return url


def create_app(spec: RunSpec, run_dir: Path, host: str) -> Celery:
    """A Celery app wired for this run: broker, backend, queues, the cell's settings, the
    workload's tasks, and the instrumentation that stamps every task."""
    app = Celery("cmx", broker=os.environ["CMX_BROKER_URL"], backend=backend_url(spec), set_as_current=True)
    qargs = queue_arguments(spec)
    app.conf.update(
        task_default_queue=spec.queue,
        task_queues=(Queue(spec.queue, queue_arguments=qargs), Queue(spec.hold_queue, queue_arguments=qargs)),
        task_ignore_result=spec.backend == "none",
        worker_prefetch_multiplier=spec.prefetch_multiplier,
        broker_heartbeat=spec.heartbeat,
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    app.conf.update(spec.celery)  # celery.* dimensions win over our defaults
    registry.get(spec.workload).register_tasks(app)
    # throughput's params.stamping: false leaves the per-task stamps out, to measure their cost.
    instrument.install(app, Recorder(run_dir, host), stamping=bool(spec.params.get("stamping", True)))
    return app
