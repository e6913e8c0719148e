"""What a worker really runs with, read from the running worker (``cmx_config`` control command).

The driver asks every worker of the run once it is ready, stores the answers (``worker_config``)
and fails the run when the cell asked for something else: a number cmx stores must be what ran,
whatever the app factory, the command line or the pool did with our intent. Each value is read
from the live consumer and pool where Celery keeps it, not from our own configuration; a setting
a pool does not implement reads as ``None``.

Settings a task can set for itself (``@shared_task(acks_late=False)``, ``task_annotations``) run
as the task object has them, whatever ``app.conf`` says: those are read from each of the run's own
tasks, one key per task and setting (:func:`task_key`).
"""

from __future__ import annotations

import inspect
import json
from typing import Any, Callable

from celery import Task
from celery.worker.control import control_command

from cmx.workloads.vocab.dimensions import ON_WORKER, PACKAGE_PREFIX
from cmx.workloads.runtime.fingerprint import versions as package_versions
from cmx.workloads.runtime.instrument import own_tasks
from cmx.workloads.vocab import pools

#: Our pool names (the ``pool`` dimension) by the module of Celery's pool class (threads: ``thread``).
POOL_NAMES = {p.celery_module or p.name: p.name for p in pools.POOL_TABLE}


def _pool_name(c) -> str:
    return POOL_NAMES.get(type(c.pool).__module__.rsplit(".", 1)[-1], type(c.pool).__module__)


def _pool_size(c) -> int | None:
    """The pool's real number of slots (processes, threads or greenlets)."""
    pool, name = c.pool, _pool_name(c)
    if name == pools.THREADS:
        return pool.executor._max_workers
    if name in pools.GREEN:
        return pool._pool.size
    return pool.num_processes  # prefork: the billiard pool's processes; solo: 1


def _prefork_only(attr: str) -> Callable:
    """A recycling limit that only the prefork pool implements; other pools run without it."""

    def read(c):
        return (getattr(c.pool._pool, attr, None) or None) if _pool_name(c) in pools.PER_CHILD_LIMITS else None

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


#: The settings a task can set for itself, {setting: Task attribute}: Celery's own table
#: (``Task.from_config``: ``Task.bind`` gives an attribute the task left None its setting's value),
#: plus ``compression``, which Celery takes from the task at publish and otherwise from
#: ``task_compression`` (celery/app/amqp.py), not through ``from_config``.
TASK_SETTINGS: dict[str, str] = {setting: attr for attr, setting in Task.from_config} | {
    "task_compression": "compression"
}
_TASK_PREFIX = "task."


def task_key(task: str, setting: str) -> str:
    """The key of ``setting`` as ``task`` runs it, in the worker's report and ``worker_config``:
    ``task.<task name>.<setting>`` (a setting's name has no dot, a task's may)."""
    return f"{_TASK_PREFIX}{task}.{setting}"


def parse_task_key(key: str) -> tuple[str, str] | None:
    """(task name, setting) of a :func:`task_key`; None for any other key."""
    if not key.startswith(_TASK_PREFIX) or "." not in key[len(_TASK_PREFIX) :]:
        return None
    task, setting = key[len(_TASK_PREFIX) :].rsplit(".", 1)
    return task, setting


def _pool_passes(c, option: str) -> bool:
    """Whether the pool's apply takes ``option`` (``timeout``, ``soft_timeout``: the time limits
    the worker's request hands it) to where it acts. Prefork's takes both, gevent's the hard one;
    threads, solo and eventlet drop them unread (``**_``), so their tasks run without."""
    try:
        return option in inspect.signature(c.pool.on_apply).parameters
    except (TypeError, ValueError):
        return False


#: Task attributes whose effect lives outside the task object: read where it acts.
TASK_READERS: dict[str, Callable[[Any, Task], Any]] = {
    "time_limit": lambda c, task: task.time_limit if _pool_passes(c, "timeout") else None,
    "soft_time_limit": lambda c, task: task.soft_time_limit if _pool_passes(c, "soft_timeout") else None,
    # The consumer's token bucket for the task limits it; none when the worker disables rate limits.
    "rate_limit": lambda c, task: (
        task.rate_limit if not c.disable_rate_limits and c.task_buckets.get(task.name) is not None else None
    ),
    "compression": lambda c, task: getattr(task, "compression", None) or c.app.conf.task_compression,
}


def task_config(consumer, settings: list[str]) -> dict[str, Any]:
    """Each task-level setting of ``settings`` as each of the run's own tasks runs it, by :func:`task_key`."""
    out: dict[str, Any] = {}
    for name in own_tasks(consumer.app):
        task = consumer.app.tasks[name]
        for setting in sorted(s for s in settings if s in TASK_SETTINGS):
            attr = TASK_SETTINGS[setting]
            read = TASK_READERS.get(attr)
            out[task_key(name, setting)] = read(consumer, task) if read else getattr(task, attr, None)
    return out


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
        # Which broker it consumes from: the transport's scheme (sentinel for a Sentinel set) and,
        # for a set, the master's name its connection asked the sentinels for.
        "broker_scheme": getattr(consumer.connection, "transport_cls", None),
        "broker_master_name": (getattr(consumer.connection, "transport_options", None) or {}).get("master_name"),
    }
    for d in ON_WORKER:  # any other dimension the worker runs with: read where its setting acts
        if d.name not in out:
            read = EFFECTIVE_SETTINGS.get(d.setting)
            out[d.name] = read(consumer) if read else consumer.app.conf.get(d.setting)
    for key in settings:
        read = EFFECTIVE_SETTINGS.get(key)
        out["celery." + key] = read(consumer) if read else consumer.app.conf.get(key)
    out |= task_config(consumer, settings)
    # The versions this worker process imported: what a cell's package.* dimensions are checked against.
    out |= {PACKAGE_PREFIX + name: found for name, found in package_versions().items()}
    return {k: _plain(v) for k, v in out.items()}


@control_command(args=[("settings", list)], signature="[settings]")
def cmx_config(state, settings=None):
    """This worker's effective configuration (pool, sizes, prefetch, heartbeat, the given settings,
    the task-level ones per task)."""
    return effective_config(state.consumer, list(settings or []))
