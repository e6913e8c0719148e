"""``partition_worker@T/D[:N]``: the worker host's traffic to and from the broker's address and port
dropped for D seconds (a packet filter: nftables, else iptables; a blackhole route where neither
exists: workloads/host/netcut.py; ``method`` in faults.csv says which), restored after, on every
error, when the run ends first, and when the agent's lease ends (:meth:`PartitionWorker.undo`).
Refused for a worker host that is the controller's own machine: its network is everyone's."""

from __future__ import annotations

from .base import WORKER, FaultKind, HostsView, Injection


class PartitionWorker(FaultKind):
    name = "partition_worker"
    strikes = WORKER
    does = "drop the worker host's traffic to the broker for D seconds (KIND@T/D)"
    with_duration = True
    cuts_off = True

    def check_hosts(self, fault, hosts: HostsView) -> str | None:
        if hosts.worker and hosts.worker_local():
            return (
                f"fault {self.name}: it changes the worker host's network (packet filter or routes), and "
                f"worker host {hosts.worker} is this machine (ansible_connection: local): give a worker "
                "host reached over SSH"
            )
        return None

    def inject(self, fault, host: Injection) -> None:
        host.strike(pid=host.worker())
        host.partition(fault.duration_s or 0.0, self.name)

    def undo(self, host: Injection) -> None:
        host.heal()
