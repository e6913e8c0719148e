"""The ``fault`` dimension: which faults a cell may inject, how its value is read, and each kind's
part in every stage.

A fault kind is one module of this package (``kill_child.py``, ``restart_broker.py``…: a
:class:`~.base.FaultKind` with its facts, its checks, its injection on the host and its undo),
listed in ``registry.py``. The engine validates a cell's faults with :func:`parse` and each kind's
``check`` (engine/model/dimensions.py, engine/model/faultcheck.py, cli/checks.py); the
controller schedules them (engine/run/faultrun.py); the hosts' agents inject them through each
kind's ``inject`` (workloads/host/faultinject.py); the driver lets a fault's own damage pass
(``cuts_off``) and ends a fault run by ``limits.settle`` (workloads/drive/settle.py). It ships to
the hosts: standard library only. Nothing outside this package spells a kind's name
(tests/unit/test_fault_kinds_home.py).
"""

from __future__ import annotations

from . import registry
from .base import ALL, BROKER, DRIVER, NONE, WORKER, CellView, FaultFailed, FaultKind, HostsView, Injection
from .kill_child import BUSY_CHILD_WAIT_S, CHILD_POOLS
from .values import Fault, canonical, parse, parse_duration

#: kind -> (where it strikes, what it does), in the registry's order.
KINDS: dict[str, tuple[str, str]] = {name: (kind.strikes, kind.does) for name, kind in registry.KINDS.items()}
#: Kinds that end the worker's main process (the driver lets that exit pass; a replacement starts).
ENDS_WORKER = tuple(name for name, kind in registry.KINDS.items() if kind.ends_worker)
#: Kinds that cut workers off the broker (:attr:`FaultKind.cuts_off`).
CUTS_OFF = tuple(name for name, kind in registry.KINDS.items() if kind.cuts_off)
#: Kinds whose blow may end the run's workers (:attr:`FaultKind.downs_workers`).
DOWNS_WORKERS = tuple(name for name, kind in registry.KINDS.items() if kind.downs_workers)
#: Kinds that need a duration (``@T/D``).
WITH_DURATION = registry.with_duration()
#: The ``fault`` dimension's help (and its JSON Schema's description).
DESCRIPTION = (
    "none, or faults to inject: KIND@TIME (seconds from the clock start) joined with +; KIND one of "
    + ", ".join(registry.KINDS)
    + "".join(f"; {name}@T/D lasts D seconds" for name in WITH_DURATION)
    + f"; :N strikes the run's Nth worker host (default 1), :{ALL} every one"
    + "".join(
        f"; {name}@T:N the Nth node of the run's cluster"
        for name, kind in registry.KINDS.items()
        if kind.takes_target and kind.strikes != WORKER
    )
)

__all__ = [
    "ALL",
    "BROKER",
    "BUSY_CHILD_WAIT_S",
    "CHILD_POOLS",
    "CUTS_OFF",
    "DESCRIPTION",
    "DOWNS_WORKERS",
    "DRIVER",
    "ENDS_WORKER",
    "KINDS",
    "NONE",
    "WITH_DURATION",
    "WORKER",
    "CellView",
    "Fault",
    "FaultFailed",
    "FaultKind",
    "HostsView",
    "Injection",
    "canonical",
    "parse",
    "parse_duration",
    "registry",
]
