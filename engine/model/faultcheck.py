"""Checks of a cell's ``fault`` value beside its other dimensions and the inventory (the value's own
form is checked by workloads/faults/values.py ``parse``): each a one-line problem at the value.

- a fault's TARGET ``N`` (the run's Nth worker host) must be one of the cell's ``machines``;
- each kind's own rules, its module's ``check`` (workloads/faults/: a pool whose children are
  processes, a broker whose server has the capability it needs) and ``check_hosts`` (beside the
  inventory: a broker the sweep provisions or one marked disposable, a worker host reached over
  SSH). The servers declare their capabilities (workloads/servers/).
"""

from __future__ import annotations

from typing import Any

from cmx.workloads import faults

from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers


def _brokers() -> dict[str, Any]:
    """Every broker kind's server: a kind's check reads their capabilities."""
    return {name: servers.get(kind.service) for name, kind in kinds.BROKERS.items() if kind.service}


def cell_problem(values: dict[str, Any]) -> str | None:
    """Why the cell's faults cannot run with its other dimensions (None when they can)."""
    try:
        planned = faults.parse(values.get("fault", faults.NONE))
    except ValueError as exc:
        return str(exc)
    cell = faults.CellView(values, _brokers())
    for fault in planned:
        kind = fault.definition
        if not kind.injected:
            supported = ", ".join(name for name, k in faults.registry.KINDS.items() if k.injected)
            return f"fault {fault.text()}: {fault.kind} is not injected by this cmx yet (supported: {supported})"
        machines = int(values.get("machines") or 1)
        if fault.target == faults.WORKER and fault.host != faults.ALL and int(fault.host) > machines:
            return (
                f"fault {fault.text()}: it strikes the run's worker host {fault.host}, but this cell "
                f"runs on {machines} (machines: {machines})"
            )
        why = kind.check(fault, cell)
        if why:
            return why
    return None


def hosts_problem(values: dict[str, Any], hosts: faults.HostsView) -> str | None:
    """Why the cell's faults cannot run on the sweep's ``hosts`` (None when they can): each kind's
    ``check_hosts``, the kinds in the registry's order."""
    planned = {f.kind: f for f in reversed(faults.parse(values.get("fault", faults.NONE)))}
    for name, kind in faults.registry.KINDS.items():
        if name in planned:
            why = kind.check_hosts(planned[name], hosts)
            if why:
                return why
    return None
