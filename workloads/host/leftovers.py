"""What a run created on its broker and backend, removed at its end whatever the end was.

A run's queues and exchanges are named from its id (``cmx.<run_id>``, ``.hold``, ``.raw``, a workload's
own ``.q.<name>``: RunSpec.workload_queues), its
workers' control queues from their node names (``cmx-<run_id>@HOST``), and its Redis result keys
carry the run's prefix (``run_key_settings`` of workloads/servers/redis.py); a database backend's result rows
are removed by the ids of the tasks each host's workers ran. The driver's remote-control reply
queues are named after its threads, not the run: they are declared with a 10 s expiry (kombu's
Mailbox), auto-deleted, and their shared binding table is kombu's to sweep. The rpc backend's
reply queues, named after the sending thread too, are named with the run's prefix and written
down in the run dir as they are declared (workloads/app/factory.py ``own_rpc_replies``): the
driver's host removes them at the run's end.

Each server removes its own (``remove_run`` of its module in workloads/servers/; Redis
also keeps expiring them, ``keep_expiring``); the host's finish calls :func:`remove_run` (workloads/host/hostctl.py
``reset``), and so does the agent when its lease ends (workloads/host/agent.py). What no process
is left to remove goes through expiry: on RabbitMQ the run's queues carry ``x-expires``
(RunSpec.queue_arguments); on Redis the driver host's sampler keeps a TTL on the run's keys
(its ``keep_expiring``), set anew while the run lives, so they outlive a run killed whole by
``queue_expires_s`` at most; Celery's results expire by ``result_expires``.

Nothing here touches a name another run could own: every deletion is of a name built from this
run's id, or of the results of tasks this run's workers ran.
"""

from __future__ import annotations

import os

from cmx.workloads.servers import registry as servers
from cmx.workloads.servers.base import RunNames
from cmx.workloads.vocab.clients import BACKEND, BROKER

__all__ = ["RunNames", "keep_expiring", "names_of", "remove_run"]

#: Environment variables with the URLs of the run's broker and backend (from the run's secrets).
URL_VARS = {BROKER: "CMX_BROKER_URL", BACKEND: "CMX_BACKEND_URL"}


def names_of(spec, task_ids: tuple[str, ...] = (), replies: tuple[str, ...] = ()) -> RunNames:
    """The run's names, from its spec; ``replies``: the rpc backend's reply queues a host's
    processes declared (workloads/app/factory.py ``rpc_replies``)."""
    table = (spec.celery.get("database_table_names") or {}).get("task", "celery_taskmeta")
    return RunNames(
        spec.run_id,
        (spec.queue, spec.hold_queue, *spec.workload_queues, *spec.drivers_queues),
        (spec.raw_queue, *replies),
        tuple(task_ids),
        table,
    )


def _servers(spec, targets):
    """(target, service name, url) of the run's servers among ``targets``, each URL once."""
    seen: set[tuple[str, str]] = set()
    for target, kind in targets:
        service = servers.service_of(target, kind)
        url = os.environ.get(URL_VARS[target]) or ""
        if service is None or not url or (target, url) in seen:
            continue
        seen.add((target, url))
        yield target, service.name, url


def keep_expiring(spec) -> int:
    """Set the TTL (``spec.queue_expires_s``) on what the run has on servers that need a keeper."""
    if not spec.queue_expires_s:
        return 0
    names = names_of(spec)
    return sum(
        servers.get(service).keep_expiring(target, url, names, spec.queue_expires_s)
        for target, service, url in _servers(spec, ((BROKER, spec.broker), (BACKEND, spec.backend)))
    )


def remove_run(spec, task_ids: tuple[str, ...] = (), replies: tuple[str, ...] = ()) -> dict[str, int]:
    """Remove what the run created on its broker and backend (URLs from the environment, as the
    run's processes got them); {target: how many}. With ``task_ids``: the results of those tasks
    only. ``replies``: the rpc backend's reply queues, removed with the rest. Safe to call twice,
    and for a run that never began."""
    names = names_of(spec, task_ids, replies)
    targets = ((BACKEND, spec.backend),) if task_ids else ((BROKER, spec.broker), (BACKEND, spec.backend))
    return {
        target: servers.get(service).remove_run(target, url, names) for target, service, url in _servers(spec, targets)
    }
