"""What a worker really runs with, read from the running worker (``cmx_config`` control command).

The driver asks every worker of the run once it is ready, stores the answers (``worker_config``)
and fails the run when the cell asked for something else: a number cmx stores must be what ran,
whatever the app factory, the command line or the pool did with our intent. Each value is read
from the live consumer and pool where Celery keeps it, not from our own configuration; a setting
a pool does not implement reads as ``None``.
"""
from __future__ import annotations

import json
from typing import Any, Callable

from celery.worker.control import control_command

from cmx.workloads.dimensions import ON_WORKER, POOLS

#: Our pool names (the ``pool`` dimension) by the module of Celery's pool class (threads: ``thread``).
POOL_NAMES = {pool: pool for pool in POOLS} | {"thread": "threads"}


def _pool_name(c) -> str:
    return POOL_NAMES.get(type(c.pool).__module__.rsplit(".", 1)[-1], type(c.pool).__module__)


def _pool_size(c) -> int | None:
    """The pool's real number of slots (processes, threads or greenlets)."""
    pool, name = c.pool, _pool_name(c)
    if name == "threads":
        return pool.executor._max_workers
    if name in ("gevent", "eventlet"):
        return pool._pool.size
    return pool.num_processes  # prefork: the billiard pool's processes; solo: 1


def _prefork_only(attr: str) -> Callable:
    """A recycling limit that only the prefork pool implements; other pools run without it."""
    def read(c):
        return (getattr(c.pool._pool, attr, None) or None) if _pool_name(c) == "prefork" else None
    return read


#: Settings whose effect lives outside ``app.conf`` in a running worker: read where it acts.
#: Every other ``celery.*`` setting reads as the app has it.
EFFECTIVE_SETTINGS: dict[str, Callable[[Any], Any]] = {
    "worker_concurrency": _pool_size,
    "worker_prefetch_multiplier": lambda c: c.prefetch_multiplier,
    "broker_heartbeat": lambda c: c.amqheartbeat,
    "worker_pool": _pool_name,
    "worker_max_tasks_per_child": _prefork_only("_maxtasksperchild"),
    "worker_max_memory_per_child": _prefork_only("max_memory_per_child"),
}


def _plain(value: Any) -> Any:
    """JSON-safe (tuples become lists, anything else its text), as stored."""
    return json.loads(json.dumps(value, default=str))


def effective_config(consumer, settings: list[str]) -> dict[str, Any]:
    """The worker's effective configuration, as the run's records name it."""
    qos = getattr(consumer, "qos", None)
    negotiated = getattr(getattr(consumer.connection, "connection", None), "heartbeat", None)
    out = {
        "pool": _pool_name(consumer),
        "pool_class": f"{type(consumer.pool).__module__}.{type(consumer.pool).__name__}",
        "concurrency": _pool_size(consumer),
        "prefetch_multiplier": consumer.prefetch_multiplier,
        "prefetch_count": getattr(qos, "value", None),
        "acks_late": bool(consumer.app.conf.task_acks_late),
        "heartbeat": consumer.amqheartbeat,
        "heartbeat_negotiated": negotiated,
    }
    for d in ON_WORKER:  # any other dimension the worker runs with: read where its setting acts
        if d.name not in out:
            read = EFFECTIVE_SETTINGS.get(d.setting)
            out[d.name] = read(consumer) if read else consumer.app.conf.get(d.setting)
    for key in settings:
        read = EFFECTIVE_SETTINGS.get(key)
        out["celery." + key] = read(consumer) if read else consumer.app.conf.get(key)
    return {k: _plain(v) for k, v in out.items()}


@control_command(args=[("settings", list)], signature="[settings]")
def cmx_config(state, settings=None):
    """This worker's effective configuration (pool, sizes, prefetch, heartbeat, the given settings)."""
    return effective_config(state.consumer, list(settings or []))
