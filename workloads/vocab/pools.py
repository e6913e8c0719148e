"""The worker pools (the ``pool`` dimension's choices) and what sets them apart, read wherever a
rule depends on the pool: the driver's wait for workers, the pitfalls, the effective-settings
readers, the workloads that open connections per slot."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Pool:
    name: str
    #: Green threads on one OS thread (gevent, eventlet): monkey-patched I/O, a hub of its own.
    green: bool = False
    #: The worker may answer no control message while a task runs (one thread runs both).
    silent_when_busy: bool = False
    #: Child processes that Celery recycles (``worker_max_tasks_per_child``, ``…_memory_per_child``).
    per_child_limits: bool = False
    #: Celery's module name of the pool class, where it differs from ``name``.
    celery_module: str = ""


PREFORK, THREADS, GEVENT, EVENTLET, SOLO = "prefork", "threads", "gevent", "eventlet", "solo"

#: The pools, in the ``pool`` dimension's order.
POOL_TABLE: tuple[Pool, ...] = (
    Pool(PREFORK, per_child_limits=True),
    Pool(THREADS, celery_module="thread"),
    Pool(GEVENT, green=True, silent_when_busy=True),
    Pool(EVENTLET, green=True, silent_when_busy=True),
    Pool(SOLO, silent_when_busy=True),
)
BY_NAME: dict[str, Pool] = {p.name: p for p in POOL_TABLE}
POOLS: tuple[str, ...] = tuple(BY_NAME)
GREEN: tuple[str, ...] = tuple(p.name for p in POOL_TABLE if p.green)
SILENT_WHEN_BUSY: tuple[str, ...] = tuple(p.name for p in POOL_TABLE if p.silent_when_busy)
PER_CHILD_LIMITS: tuple[str, ...] = tuple(p.name for p in POOL_TABLE if p.per_child_limits)
