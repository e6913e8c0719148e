"""``restart_broker@T``: stop and start the run's broker server on its host, through that server's
module (workloads/servers/: ``restart``), where the controller says it lives (its ``place_of``).
Only on a server that can (its ``restartable`` capability), and only one the sweep provisioned or
one the inventory marks ``cmx_disposable: true`` on its ``brokers`` host: never a user's shared
broker by accident."""

from __future__ import annotations

from .base import BROKER, CellView, FaultKind, HostsView, Injection


class RestartBroker(FaultKind):
    name = "restart_broker"
    strikes = BROKER
    does = "stop and start the run's broker server (one cmx provisioned or marked cmx_disposable: true)"
    cuts_off = True
    needs_place = True
    #: The capability of the broker's server (workloads/servers/base.py) it needs.
    capability = "restartable"

    def check(self, fault, cell: CellView) -> str | None:
        if cell.can(self.capability):
            return None
        able = " or ".join(dict.fromkeys(server.name for server in cell.able(self.capability).values()))
        return (
            f"fault {fault.text()}: {self.name} restarts only a {able} broker "
            f"(this cell's broker is {cell.values.get('broker')})"
        )

    def check_hosts(self, fault, hosts: HostsView) -> str | None:
        if hosts.provisioned:
            return None
        if not hosts.disposable:
            return (
                f"fault {self.name}: the {hosts.service} broker of this cell is not one the sweep provisions "
                "(its URL comes from the inventory): cmx restarts only the brokers it started or ones the "
                "inventory marks cmx_disposable: true on the brokers host, never a shared one"
            )
        if hosts.place_problem:
            return (
                f"fault {self.name}: the {hosts.service} broker is marked cmx_disposable but cmx cannot "
                f"restart it: {hosts.place_problem}"
            )
        return None

    def inject(self, fault, host: Injection) -> None:
        host.strike()
        host.note(pid=host.restart_server())
