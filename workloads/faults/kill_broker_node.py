"""``kill_broker_node@T[:N]``: SIGKILL the Nth node (the first by default) of the run's broker cluster
(a RabbitMQ cluster the sweep provisioned: its server's ``node_loss`` capability) on the host it
runs on, and start it again after ``limits.fault_restart``, as its role starts it (the server's
``kill_node``): do the workers and the queues survive a node's loss? A classic queue whose home
node died is gone with it until the node is back, and a Celery worker whose redeclaration of such a
queue is refused ("home node ... is down") exits: that exit is this fault's finding
(``downs_workers``), the tasks it never finished counted lost once the run settles. A quorum
queue's members on the other nodes elect a new leader."""

from __future__ import annotations

from .base import BROKER, CellView, FaultKind, HostsView, Injection


class KillBrokerNode(FaultKind):
    name = "kill_broker_node"
    strikes = BROKER
    does = (
        "SIGKILL the Nth node (:N, the first by default) of the run's RabbitMQ cluster "
        "(broker rabbitmq-cluster); it starts again after limits.fault_restart"
    )
    cuts_off = True
    downs_workers = True
    needs_place = True
    #: The capability of the broker's server (workloads/servers/base.py) it needs.
    capability = "node_loss"
    #: What its ``:N`` picks.
    target_text = "the Nth node of the run's cluster, from 1"

    @property
    def takes_target(self) -> bool:
        return True

    def check(self, fault, cell: CellView) -> str | None:
        if cell.can(self.capability):
            return None
        able = cell.able(self.capability)
        products = " or ".join(dict.fromkeys(server.product for server in able.values()))
        return (
            f"fault {fault.text()}: {self.name} kills a node of a {products}, which only a "
            f"{' or '.join(able)} broker has (this cell's broker is {cell.values.get('broker')})"
        )

    def check_hosts(self, fault, hosts: HostsView) -> str | None:
        if hosts.provisioned:
            return None
        return (
            f"fault {self.name}: the {hosts.service} broker of this cell is not one the sweep provisions "
            "(its URL comes from the inventory): cmx kills only the nodes of a cluster it started"
        )

    def inject(self, fault, host: Injection) -> None:
        host.strike()
        host.note(pid=host.kill_node())
