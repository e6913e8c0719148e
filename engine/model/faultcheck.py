"""Checks of a cell's ``fault`` value beside its other dimensions and the inventory (the value's own
form is checked by workloads/faults.py ``parse``): each a one-line problem at the value.

- ``kill_child`` needs a pool whose children are processes (prefork);
- a fault's TARGET ``N`` (the run's Nth worker host) must be one of the cell's ``machines``;
- ``restart_broker`` may restart only a broker the sweep provisions, or one the inventory marks
  ``cmx_disposable: true`` on its ``brokers`` host: never a user's shared broker by accident.
"""
from __future__ import annotations

from typing import Any

from cmx.workloads import faults, kinds
from cmx.workloads.servers import registry as servers

#: Kinds cmx injects today; the others are refused at validation, saying so.
INJECTED = ("kill_child", "kill_worker", "term_worker", "restart_broker", "partition_worker", "failover_broker")


def cell_problem(values: dict[str, Any]) -> str | None:
    """Why the cell's faults cannot run with its other dimensions (None when they can)."""
    try:
        planned = faults.parse(values.get("fault", faults.NONE))
    except ValueError as exc:
        return str(exc)
    for fault in planned:
        if fault.kind not in INJECTED:
            return (f"fault {fault.text()}: {fault.kind} is not injected by this cmx yet "
                    f"(supported: {', '.join(INJECTED)})")
        server = servers.service_of("broker", values["broker"]) if values.get("broker") in kinds.BROKERS else None
        if fault.kind == "restart_broker" and not (server and server.restartable):
            # The servers that can be (one the sweep provisioned, or a disposable one whose place
            # the inventory gives: the server module's ``place_of``).
            able = " or ".join(s.name for s in servers.with_capability("restartable"))
            return (f"fault {fault.text()}: restart_broker restarts only a {able} broker "
                    f"(this cell's broker is {values.get('broker')})")
        if fault.kind == "failover_broker" and not (server and server.failover):
            able = servers.with_capability("failover")
            sets = " or ".join(s.product for s in able)
            kinds_ = " or ".join(k.name for k in kinds.BROKERS.values() if k.service in {s.name for s in able})
            return (f"fault {fault.text()}: failover_broker fails a {sets} set's master over, which only "
                    f"a {kinds_} broker has (this cell's broker is {values.get('broker')})")
        machines = int(values.get("machines") or 1)
        if fault.host != faults.ALL and int(fault.host) > machines:
            return (f"fault {fault.text()}: it strikes the run's worker host {fault.host}, but this cell "
                    f"runs on {machines} (machines: {machines})")
        if fault.kind == "kill_child" and values.get("pool") not in faults.CHILD_POOLS:
            return (f"fault {fault.text()}: kill_child kills a pool child process, which only the "
                    f"{', '.join(faults.CHILD_POOLS)} pool has (this cell's pool is {values.get('pool')})")
    return None


def broker_problem(values: dict[str, Any], provisioned: bool, disposable: bool,
                   place_problem: str | None = None) -> str | None:
    """Why ``restart_broker`` may not restart the cell's broker: neither provisioned by the sweep
    nor marked ``cmx_disposable: true``, or disposable but the inventory does not say where it
    lives on its host (``place_problem``: what the server module's ``place_of`` asks for)."""
    planned = faults.parse(values.get("fault", faults.NONE))
    if not any(f.kind == "restart_broker" for f in planned) or provisioned:
        return None
    service = kinds.BROKERS[values["broker"]].service
    if not disposable:
        return (f"fault restart_broker: the {service} broker of this cell is not one the sweep provisions "
                "(its URL comes from the inventory): cmx restarts only the brokers it started or ones the "
                "inventory marks cmx_disposable: true on the brokers host, never a shared one")
    if place_problem:
        return f"fault restart_broker: the {service} broker is marked cmx_disposable but cmx cannot restart it: {place_problem}"
    return None
