"""The Celery app factory: one app per run, configured from the run spec and the environment."""

from __future__ import annotations

import os
from pathlib import Path

from celery import Celery
from kombu import Queue

from cmx.workloads.runtime import effective, failures, instrument  # noqa: F401 (effective: the cmx_config command)

from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers
from cmx.workloads.catalog import registry
from cmx.workloads.vocab.clientname import client_name
from cmx.workloads.vocab.dimensions import worker_config
from cmx.workloads.runtime.recorder import Recorder
from cmx.workloads.runtime.spec import RunSpec
from cmx.workloads.vocab.clients import BACKEND, BROKER


def backend_url(spec: RunSpec) -> str | None:
    """Celery's ``result_backend`` for the run's backend kind (None: no backend)."""
    kind = kinds.BACKENDS[spec.backend]
    if kind.service is None:
        return kind.celery_url
    return servers.get(kind.service).celery_backend_url(os.environ["CMX_BACKEND_URL"])


def broker_settings(spec: RunSpec) -> tuple[str, dict]:
    """Celery's ``broker_url`` for the run (``CMX_BROKER_URL``) and the transport options its
    server needs besides (a Sentinel set's master name and password: workloads/servers/)."""
    return servers.get(kinds.BROKERS[spec.broker].service).celery_broker(os.environ["CMX_BROKER_URL"])


def name_clients(app: Celery, spec: RunSpec, client: str) -> None:
    """Every broker and backend connection of this process carries the run's client name, so the
    connection probes count the run's own clients and nobody else's (workloads/vocab/clientname.py),
    and every key it writes carries the run's prefix, so the run's end finds it.
    Set after the cell's ``celery.*`` settings: merged into them, never replaced by them."""
    for target, kind in ((BROKER, spec.broker), (BACKEND, spec.backend)):
        server = servers.service_of(target, kind)
        if server is not None:
            app.conf.update(server.client_name_settings(target, client_name(spec.run_id, client, target), app.conf))
            app.conf.update(server.run_key_settings(target, spec.key_prefix + ".", app.conf))


def own_replies(app: Celery, prefix: str) -> None:
    """Reply queues of this process's control calls (ping, broadcasts with replies, the worker's
    mingle) named ``PREFIX.<oid>.reply.celery.pidbox``: the run owns them, so its end removes what a
    killed process left, the queue and (kombu 5.7 binds expiring queues through a table with
    deadlines) its member of Redis' shared reply table. The worker's reply goes to the message's
    ``reply_to``, so nothing else changes."""
    from kombu.common import oid_from

    mailbox = app.control.mailbox
    mailbox.__class__ = type(
        "RunMailbox", (type(mailbox),), {"oid": property(lambda self: f"{prefix}.{oid_from(self)}")}
    )


#: The run dir's list of the rpc backend's reply queues its processes declared (one name a line).
RPC_REPLIES = "rpc_replies.txt"


def own_rpc_replies(app: Celery, prefix: str, run_dir: Path) -> None:
    """With the ``rpc`` backend, a process that sends a task declares the queue its results come
    back on and names it in the message's ``reply_to``: Celery's ``app.thread_oid``, a uuid of the
    sending thread, kept for ``result_expires`` (a day) when no one consumes it. A driver that
    sends and never reads results left one on the user's broker per run, holding every result.
    Named here ``PREFIX.<oid>.reply`` (the app's ``thread_oid``, which the rpc backend's queue and
    the messages' ``reply_to`` both read) and written down in the run dir when a thread first
    asks, so the run's end removes it (workloads/host/hostctl.py ``reset``, on the driver's host;
    on Redis the run's prefix finds it on any host)."""
    from kombu.common import oid_from

    if not str(app.conf.result_backend or "").startswith("rpc://"):  # Celery's own scheme for it
        return
    record = Path(run_dir) / RPC_REPLIES

    def thread_oid(self) -> str:
        try:
            return self._local.oid
        except AttributeError:
            name = self._local.oid = f"{prefix}.{oid_from(self, threads=True)}.reply"
            with open(record, "a") as f:  # one short line: appends of several threads stay whole
                f.write(name + "\n")
            return name

    app.__class__ = type("RunApp", (type(app),), {"thread_oid": property(thread_oid)})


def rpc_replies(run_dir: Path) -> tuple[str, ...]:
    """The reply queues :func:`own_rpc_replies` wrote down in ``run_dir`` (none: an empty tuple)."""
    try:
        return tuple(sorted(set((Path(run_dir) / RPC_REPLIES).read_text().split())))
    except OSError:
        return ()


def create_app(spec: RunSpec, run_dir: Path, host: str, client: str = "worker") -> Celery:
    """A Celery app wired for this run: broker, backend, queues, the cell's settings, the
    workload's tasks, and the instrumentation that stamps every task. ``client`` (worker, driver)
    names its connections."""
    workload = registry.get(spec.workload)
    own = workload.setup(workload.Params.model_validate(spec.params))
    broker, transport = broker_settings(spec)
    if own is None:
        # Its task class stamps every task (workloads/runtime/instrument.py), the user's shared_task too.
        app = Celery(
            "cmx", broker=broker, backend=backend_url(spec), set_as_current=True, task_cls=instrument.StampedTask
        )
    else:  # the user's app: theirs except what the harness owns and the cell sets (recorded below)
        app = own
        app.set_current()
    qargs = spec.queue_arguments()
    harness = dict(
        task_default_queue=spec.queue,
        task_queues=tuple(
            Queue(q, queue_arguments=qargs) for q in (spec.queue, spec.hold_queue, *spec.workload_queues)
        ),
        task_ignore_result=spec.backend == "none",
        **worker_config(spec),  # worker_prefetch_multiplier, broker_heartbeat: workloads/vocab/dimensions.py
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        worker_redirect_stdouts=False,
    )
    if own is not None:
        from cmx.workloads.catalog.user_app import own_settings

        harness.update(broker_url=broker, result_backend=backend_url(spec), task_routes=None)
        own_settings(app, {**harness, **spec.celery}, run_dir)
    # The cell's celery.* settings first, ours after: RunSpec refuses a spec whose celery.* names
    # a setting of OWNED_SETTINGS, and should one ever slip through, the dimension still wins.
    app.conf.update(spec.celery)
    app.conf.update(harness)
    if transport:  # merged into the user's broker_transport_options (their visibility_timeout...)
        app.conf.broker_transport_options = {**(app.conf.get("broker_transport_options") or {}), **transport}
    name_clients(app, spec, client)
    own_replies(app, spec.key_prefix)
    own_rpc_replies(app, spec.key_prefix, run_dir)
    workload.register_tasks(app)
    instrument.register_wake(app)
    # throughput's params.stamping: false leaves the per-task stamps out, to measure their cost.
    instrument.install(app, Recorder(run_dir, host), stamping=bool(spec.params.get("stamping", True)))
    failures.install(run_dir)
    if spec.fault != "none" and client == "worker":  # kill_child finds a busy child; no stamp dies with one
        instrument.fault_cell(run_dir)
    return app
