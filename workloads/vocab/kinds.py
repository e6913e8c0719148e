"""Broker and backend kinds: the one table everything else reads.

A *kind* is what an experiment's ``broker`` or ``backend`` dimension names (``rabbitmq-quorum``,
``rpc``); a *service* is the server a kind talks to (``rabbitmq``), which is also the name of its
module in workloads/servers/ (its schemes, URL, variables, capabilities and behaviour), of the
Ansible role that provisions it, of its inventory variables (``<service>_password``,
``<service>_port``), of its controller secret (``CMX_<SERVICE>_PASSWORD``) and of its
connection probe (workloads/host/connprobes.py).

Readers: the inventory (what can be provisioned), the runner (what to watch and count), the app
factory (queue arguments, the backend's Celery URL), workloads/servers/registry.py (the server a
kind needs). To add a kind on an existing server: an entry in BROKERS or BACKENDS. To add a
server: docs/architecture.md, "Where to add". Standard library only: shipped to every host.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from cmx.workloads.vocab.queues import QUORUM
from cmx.workloads.vocab.services import POSTGRES, RABBITMQ, RABBITMQ_CLUSTER, REDIS, REDIS_SENTINEL


def _frozen(mapping: dict) -> Mapping:
    return MappingProxyType(mapping)


@dataclass(frozen=True)
class Kind:
    """A value of the ``broker`` or ``backend`` dimension."""

    name: str
    #: The server it needs (a workloads/vocab/services.py name); None when it has none of its own (``none``, ``rpc``).
    service: str | None
    #: Whether a sweep starts the server itself where the inventory gives no URL for the kind.
    provisionable: bool = True
    #: Broker: ``queue_arguments`` of the run's queues.
    queue_arguments: Mapping[str, Any] = field(default_factory=lambda: _frozen({}))
    #: Backend without a server: Celery's ``result_backend`` (``rpc://``), or None (no backend).
    celery_url: str | None = None
    #: Redis: the database number cmx's own server gives this target.
    db: int = 0
    #: An alias's queue type (workloads/vocab/queues.py): ``rabbitmq-quorum`` is ``{broker: rabbitmq,
    #: queue_type: quorum}``, its cells' ids unchanged.
    queue_type: str | None = None


BROKERS: Mapping[str, Kind] = _frozen(
    {
        k.name: k
        for k in (
            Kind(REDIS, REDIS, db=0),
            Kind(RABBITMQ, RABBITMQ),
            Kind("rabbitmq-quorum", RABBITMQ, queue_type=QUORUM),
            Kind("redis-sentinel", REDIS_SENTINEL, db=0),
            Kind("rabbitmq-cluster", RABBITMQ_CLUSTER),
        )
    }
)
BACKENDS: Mapping[str, Kind] = _frozen(
    {
        k.name: k
        for k in (
            Kind("none", None, provisionable=False),
            Kind(REDIS, REDIS, db=1),
            Kind("rpc", None, provisionable=False, celery_url="rpc://"),
            Kind(POSTGRES, POSTGRES),
        )
    }
)
#: What the run's clients talk to: its broker and its result backend.
TARGETS: Mapping[str, Mapping[str, Kind]] = _frozen({"broker": BROKERS, "backend": BACKENDS})


def queue_type_of(broker: str, queue_type: str) -> str:
    """The type of the run's queues on ``broker`` for the cell's ``queue_type``: an alias's own
    (``rabbitmq-quorum``: quorum) whatever the dimension says."""
    kind = BROKERS.get(broker)
    return (kind.queue_type if kind else None) or queue_type


def queue_type_arguments(broker: str, queue_type: str, delivery_limit: int = 0) -> dict[str, Any]:
    """The ``queue_arguments`` the queue type asks: ``x-queue-type`` for quorum (and its
    ``x-delivery-limit`` where the cell sets one); none for classic."""
    if queue_type_of(broker, queue_type) != QUORUM:
        return {}
    return {"x-queue-type": QUORUM, **({"x-delivery-limit": delivery_limit} if delivery_limit else {})}
