"""The types a run's queues can have on a broker that has several (RabbitMQ's classic and quorum
queues: the ``queue_type`` dimension), and the queue arguments a type asks. Which server has which
types its module says (workloads/servers/: ``queue_types``); a broker kind that is an alias of one
type says so (workloads/vocab/kinds.py: ``Kind.queue_type``). Standard library only."""
from __future__ import annotations

from typing import Any

#: Classic queues carry no ``x-queue-type`` (as before there was a choice); quorum ones say so.
CLASSIC, QUORUM = "classic", "quorum"
QUEUE_TYPES: tuple[str, ...] = (CLASSIC, QUORUM)


def queue_type_of(broker: str, queue_type: str) -> str:
    """The type of the run's queues on ``broker`` for the cell's ``queue_type``: an alias's own
    (``rabbitmq-quorum``: quorum) whatever the dimension says."""
    from cmx.workloads.vocab import kinds  # the kinds name their alias's type from here

    kind = kinds.BROKERS.get(broker)
    return (kind.queue_type if kind else None) or queue_type


def queue_type_arguments(broker: str, queue_type: str, delivery_limit: int = 0) -> dict[str, Any]:
    """The ``queue_arguments`` the queue type asks: ``x-queue-type`` for quorum (and its
    ``x-delivery-limit`` where the cell sets one); none for classic."""
    if queue_type_of(broker, queue_type) != QUORUM:
        return {}
    return {"x-queue-type": QUORUM, **({"x-delivery-limit": delivery_limit} if delivery_limit else {})}
