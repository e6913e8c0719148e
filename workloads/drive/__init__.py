"""cmx.workloads.drive: the driver's room (publishing, pacing, waiting for workers).

:class:`DriveTimeout` lives here, where the drive raises it; workloads import it from
cmx.workloads.catalog.base as before. :func:`connection_errors` is what every part of the drive treats as
the broker (or a Redis backend) going away."""

from __future__ import annotations


class DriveTimeout(Exception):
    """The run passed ``limits.run_timeout`` (a workload's ``drive`` raises it past ``ctx.deadline``)."""


def connection_errors() -> tuple[type[BaseException], ...]:
    """What a broker (or a Redis backend) going away mid-run raises, over the clients the run
    uses: a restart, a crash, the network, or a Sentinel closing its clients' connections as it
    turns a master into a replica."""
    import amqp.exceptions
    import redis.exceptions
    from kombu.exceptions import OperationalError

    return (
        ConnectionError,
        TimeoutError,
        OperationalError,
        amqp.exceptions.ConnectionError,
        redis.exceptions.ConnectionError,
        redis.exceptions.TimeoutError,
    )


class TasksLost(Exception):
    """Tasks the driver published that no queue holds and no worker runs any more: the broker
    returned them unroutable, or they vanished before a worker took them (workloads/drive/lost.py).
    The run ends at once, failed, naming how many; its ``tasks_lost`` is that count."""

    def __init__(self, lost: int, total: int, why: str):
        super().__init__(f"{lost} of {total} tasks lost before the queue: {why}")
        self.lost, self.total = lost, total
