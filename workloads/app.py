"""The Celery app factory: one app per run, configured from the run spec and the environment."""
from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from kombu import Queue

from cmx.workloads import effective, failures, instrument  # noqa: F401 (effective: the cmx_config command)
from cmx.workloads.catalog import registry
from cmx.workloads.clientname import client_name
from cmx.workloads.dimensions import worker_config
from cmx.workloads.recorder import Recorder
from cmx.workloads.spec import RunSpec


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


def name_clients(app: Celery, spec: RunSpec, client: str) -> None:
    """Every broker and backend connection of this process carries the run's client name, so the
    connection probes count the run's own clients and nobody else's (workloads/clientname.py).
    Set after the cell's ``celery.*`` settings: merged into them, never replaced by them."""
    broker = client_name(spec.run_id, client, "broker")
    opts = dict(app.conf.broker_transport_options or {})
    if spec.broker == "redis":
        opts["client_name"] = broker
    else:  # py-amqp takes client_properties through kombu's transport options
        opts["client_properties"] = {**(opts.get("client_properties") or {}), "connection_name": broker}
    app.conf.broker_transport_options = opts
    backend = client_name(spec.run_id, client, "backend")
    if spec.backend == "redis":
        app.conf.redis_client_name = backend
    elif spec.backend == "postgres":
        engine = dict(app.conf.database_engine_options or {})
        engine["connect_args"] = {**(engine.get("connect_args") or {}), "application_name": backend}
        app.conf.database_engine_options = engine


def create_app(spec: RunSpec, run_dir: Path, host: str, client: str = "worker") -> Celery:
    """A Celery app wired for this run: broker, backend, queues, the cell's settings, the
    workload's tasks, and the instrumentation that stamps every task. ``client`` (worker, driver)
    names its connections."""
    workload = registry.get(spec.workload)
    own = workload.setup(workload.Params.model_validate(spec.params))
    if own is None:
        app = Celery("cmx", broker=os.environ["CMX_BROKER_URL"], backend=backend_url(spec), set_as_current=True)
    else:  # the user's app: theirs except what the harness owns and the cell sets (recorded below)
        app = own
        app.set_current()
    qargs = queue_arguments(spec)
    harness = dict(
        task_default_queue=spec.queue,
        task_queues=(Queue(spec.queue, queue_arguments=qargs), Queue(spec.hold_queue, queue_arguments=qargs)),
        task_ignore_result=spec.backend == "none",
        **worker_config(spec),  # worker_prefetch_multiplier, broker_heartbeat: workloads/dimensions.py
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    if own is not None:
        from cmx.workloads.catalog.user_app import own_settings
        harness.update(broker_url=os.environ["CMX_BROKER_URL"], result_backend=backend_url(spec), task_routes=None)
        own_settings(app, {**harness, **spec.celery}, run_dir)
    # The cell's celery.* settings first, ours after: RunSpec refuses a spec whose celery.* names
    # a setting of OWNED_SETTINGS, and should one ever slip through, the dimension still wins.
    app.conf.update(spec.celery)
    app.conf.update(harness)
    name_clients(app, spec, client)
    workload.register_tasks(app)
    # throughput's params.stamping: false leaves the per-task stamps out, to measure their cost.
    instrument.install(app, Recorder(run_dir, host), stamping=bool(spec.params.get("stamping", True)))
    failures.install(run_dir)
    return app
