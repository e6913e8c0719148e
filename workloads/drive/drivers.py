"""Several drivers in one run (the ``drivers`` dimension): each publishes its share, and the
workload's clock starts once, when every worker consumes and every driver is ready.

The run spec names the driver hosts (``driver_hosts``); the first leads. The leader checks the
workers and starts them consuming, as a run of one driver does; the others only publish. They meet
on two queues of the run (``RunSpec.drivers_queues``, removed with the run's other names by
workloads/host/leftovers.py): each other driver says "ready" on the first once it can publish
(stream) or has published its share (backlog); the leader, once it has heard every one, starts the
workers consuming and answers "go" on the second, with the moment the clock started. Every wait
is bounded by the run's deadline; a driver that fails before it is ready says so on the first
queue, and the controller stops waiting for the others once the leader ended
(engine/run/runsteps.py).

The broker carries the meeting because every driver already talks to it: no new port, no path
through the controller, and a driver that cannot reach the broker could not publish anyway.
"""

from __future__ import annotations

import time
from typing import Callable

from celery import Celery
from kombu.simple import SimpleQueue

from cmx.workloads.runtime.spec import RunSpec


class DriversProblem(Exception):
    """The drivers of a run did not all meet in time."""


def index_of(spec: RunSpec, host: str) -> int:
    """This driver's place among the run's drivers (0: the leader; a run of one driver: 0)."""
    return spec.driver_hosts.index(host) if host in spec.driver_hosts else 0


def count(spec: RunSpec) -> int:
    return max(len(spec.driver_hosts), 1)


def share(total: int, index: int, drivers: int) -> int:
    """Driver ``index``'s part of ``total`` tasks: equal parts, the first ``total % drivers``
    drivers one more, so the parts add up to ``total`` exactly."""
    return total // drivers + (1 if index < total % drivers else 0)


def _queue(conn, spec: RunSpec, name: str) -> SimpleQueue:
    queue = SimpleQueue(conn.channel(), name, queue_args=spec.queue_arguments(), serializer="json")
    queue.consumer.qos(prefetch_count=1)  # one "go" per driver: none held back for another
    return queue


def _get(queue: SimpleQueue, until: float, check: Callable[[str], None], what: str) -> dict:
    while True:
        check(what)
        try:
            message = queue.get(block=True, timeout=max(0.05, min(0.5, until - time.monotonic())))
        except queue.Empty:
            if time.monotonic() > until:
                raise DriversProblem(f"{what}: no answer within the bound") from None
            continue
        message.ack()
        return message.payload


def gather(app: Celery, spec: RunSpec, until: float, check: Callable[[str], None]) -> list[str]:
    """The leader: block until every other driver said it is ready; their hosts."""
    ready, _ = spec.drivers_queues
    hosts: list[str] = []
    with app.connection_for_write() as conn:
        queue = _queue(conn, spec, ready)
        try:
            while len(hosts) < count(spec) - 1:
                waiting = sorted(set(spec.driver_hosts[1:]) - set(hosts))
                said = _get(queue, until, check, "waiting for the drivers on " + ", ".join(waiting) + " to be ready")
                if said.get("error"):  # it failed before it was ready: no clock will start
                    raise DriversProblem(f"the driver on {said['host']} failed: {said['error']}")
                hosts.append(said["host"])
        finally:
            queue.close()
    return hosts


def release(app: Celery, spec: RunSpec, consuming_at: float) -> None:
    """The leader: tell every other driver the clock started (at ``consuming_at``)."""
    _, go = spec.drivers_queues
    with app.connection_for_write() as conn:
        queue = _queue(conn, spec, go)
        try:
            for _ in range(count(spec) - 1):
                queue.put({"consuming_at": consuming_at})
        finally:
            queue.close()


def meet(app: Celery, spec: RunSpec, host: str, until: float, check: Callable[[str], None]) -> float:
    """Another driver: say this one is ready, then block until the leader says go; returns when
    the workers started consuming (the leader's clock, time.time())."""
    ready, go = spec.drivers_queues
    with app.connection_for_write() as conn:
        queue = _queue(conn, spec, ready)
        try:
            queue.put({"host": host})
        finally:
            queue.close()
        queue = _queue(conn, spec, go)
        try:
            return float(
                _get(
                    queue,
                    until,
                    check,
                    f"waiting for the leading driver on {spec.driver_hosts[0]} to start the workers",
                )["consuming_at"]
            )
        finally:
            queue.close()


def give_up(app: Celery, spec: RunSpec, host: str, error: str) -> None:
    """Another driver that failed before the clock started: tell the leader, which would otherwise
    wait for it until the run's deadline. Best effort (the broker may be what failed)."""
    ready, _ = spec.drivers_queues
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1)
            queue = _queue(conn, spec, ready)
            try:
                queue.put({"host": host, "error": error})
            finally:
                queue.close()
    except Exception:  # the run fails by its own error either way
        pass
