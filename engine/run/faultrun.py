"""A fault run's faults, timed by the controller (the ``fault`` dimension: workloads/faults/).

The driver's host says when the workload's clock started (a ``clock`` event: its mark, with how
late the agent saw it); from then each fault is sent to the agent of each host it strikes (a
worker fault's TARGET: the run's Nth worker host, or all of them at once), with the delay left
until its time, and that agent injects it (workloads/host/faultinject.py), telling the
driver what it hit. An agent that cannot be reached is told to the driver as the fault's failure,
so the run fails saying so instead of waiting. :class:`FaultScheduler` is a tick of the drive's
wait (engine/run/runsteps.py), never blocking.
"""

from __future__ import annotations

import time

from cmx.engine.hosts.agents import AgentLost, Agents
from cmx.engine.hosts.inventory import Inventory
from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers
from cmx.workloads.faults import Fault
from cmx.workloads.runtime.workerevents import CLOCK, FAULT_END


def broker_place(inventory: Inventory, broker: str) -> dict:
    """The run's broker server for a fault kind that ``needs_place`` (restarts it, or one of its
    nodes): {"service", "place"} (where it lives on the first brokers host, from the inventory:
    the server module's ``place_of``), with "nodes" for a set of nodes the sweep provisioned (its
    ``node_places``); {} when it can be neither restarted nor struck at a node (validation refused
    such a cell: engine/model/faultcheck.py)."""
    service = kinds.BROKERS[broker].service
    server = servers.get(service)
    host = inventory.hosts_of("brokers")[0]
    provisioned = bool(inventory.services_to_provision({broker}, set()))
    nodes = server.node_places(inventory) if provisioned else []
    try:
        place = server.place_of(host, inventory.hostvars.get(host, {}), provisioned)
    except (ValueError, NotImplementedError):
        return {"service": service, "nodes": nodes} if nodes else {}
    return {"service": service, "place": place, **({"nodes": nodes} if nodes else {})}


class FaultScheduler:
    """Sends the run's faults once its clock started; records what could not be sent."""

    def __init__(
        self,
        agents: Agents,
        run_id: str,
        faults: tuple[Fault, ...],
        driver: str,
        workers: tuple[str, ...],
        targets: dict[str, str],
        restart_s: float,
        ready_timeout: float,
        shutdown_timeout: float,
        broker: dict | None = None,
    ):
        self.agents, self.run_id, self.faults, self.driver = agents, run_id, faults, driver
        #: the run's worker hosts, in order (a worker fault's TARGET N is the Nth)
        self.workers = tuple(workers)
        #: where the other target kinds strike: {"broker": host, "driver": host}
        self.targets = targets
        self.restart_s, self.ready_timeout, self.shutdown_timeout = restart_s, ready_timeout, shutdown_timeout
        #: the broker a kind that ``needs_place`` restarts: {"service", "place"} (:func:`broker_place`)
        self.broker = broker or {}
        self.sent = not faults
        self.problems: list[str] = []

    def __call__(self) -> None:
        if self.sent:
            return
        clock = next(
            (e for e in self.agents.events(self.run_id) if e.get("kind") == CLOCK and e.get("host") == self.driver),
            None,
        )
        if clock is None:
            return
        self.sent = True
        age, seen = float(clock.get("age_s") or 0.0), time.monotonic()
        for index, fault in enumerate(self.faults):
            try:
                hosts = self.hosts_of(fault)
            except ValueError as exc:  # validation refuses such a cell: never a blow at another host
                self._failed(index, fault, self.driver, str(exc))
                continue
            for host in hosts:
                try:  # the delay left when this request goes: several hosts are told one after another
                    delay = max(fault.at_s - age - (time.monotonic() - seen), 0.0)
                    self.agents[host].request(
                        "fault",
                        run_id=self.run_id,
                        index=index,
                        fault=fault.text(),
                        delay_s=delay,
                        restart_s=self.restart_s,
                        ready_timeout=self.ready_timeout,
                        shutdown_timeout=self.shutdown_timeout,
                        **self._broker_part(fault),
                    )
                except (AgentLost, KeyError) as exc:
                    self._failed(index, fault, host, f"the cmx agent on {host} cannot be reached: {exc}")

    def hosts_of(self, fault: Fault) -> tuple[str, ...]:
        """The hosts ``fault`` strikes: its TARGET among the run's worker hosts, else the one host
        of its kind's target (the broker's, the driver's)."""
        if fault.target == "worker":
            return fault.hosts_of(self.workers)
        if fault.definition.takes_target:  # :N picks one of several nodes of the run's broker
            return (self._node(fault)["host"],)
        return (self.targets[fault.target],)

    def _node(self, fault: Fault) -> dict:
        """The node of the run's broker set a fault with a ``:N`` strikes (the Nth)."""
        nodes = self.broker.get("nodes") or []
        if not 1 <= int(fault.host) <= len(nodes):
            raise ValueError(
                f"fault {fault.text()} strikes node {fault.host} of the run's broker, which has "
                f"{len(nodes)} the sweep provisioned" + ("" if nodes else " (none: a set given by URL is never struck)")
            )
        return nodes[int(fault.host) - 1]

    def _broker_part(self, fault: Fault) -> dict:
        """What the agent needs of the run's broker for ``fault``: its place (a kind that
        ``needs_place``), and the node it strikes (a broker kind with a ``:N``)."""
        if not fault.definition.needs_place:
            return {}
        part = {k: v for k, v in self.broker.items() if k != "nodes"}
        if fault.target != "worker" and fault.definition.takes_target:
            part["node"] = self._node(fault)
        return part

    def _failed(self, index: int, fault: Fault, host: str, why: str) -> None:
        self.problems.append(f"fault {fault.text()} on {host}: {why}")
        event = {
            "kind": FAULT_END,
            "host": host,
            "at": time.time(),
            "index": index,
            "fault": fault.text(),
            "error": why,
        }
        try:
            self.agents[self.driver].request("tell", run_id=self.run_id, events=[event])
        except AgentLost:  # the drive's own wait says so
            pass
