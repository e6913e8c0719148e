"""Every fault kind by its name: ``registry.get(name)``. Adding a kind is one module of this package
(a :class:`~cmx.workloads.faults.base.FaultKind` subclass) and one line below; validation, the
JSON Schema, the controller's scheduling, the driver's wait and the hosts' agents all read this
table, never a kind's name."""

from __future__ import annotations

from .base import FaultKind
from .failover_broker import FailoverBroker
from .kill_broker_node import KillBrokerNode
from .kill_child import KillChild
from .kill_worker import KillWorker
from .partition_worker import PartitionWorker
from .restart_broker import RestartBroker
from .term_worker import TermWorker

#: Every kind by its name, in the order messages and the docs list them.
KINDS: dict[str, FaultKind] = {
    k.name: k
    for k in (
        KillChild(),
        KillWorker(),
        TermWorker(),
        RestartBroker(),
        PartitionWorker(),
        FailoverBroker(),
        KillBrokerNode(),
    )
}


def get(name: str) -> FaultKind:
    """The kind named ``name``; an unknown name is an error, never another kind's branch."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown fault kind {name!r} (known: {', '.join(KINDS)})") from None


def with_duration() -> tuple[str, ...]:
    """The kinds that take a duration (``KIND@T/D``)."""
    return tuple(name for name, kind in KINDS.items() if kind.with_duration)
