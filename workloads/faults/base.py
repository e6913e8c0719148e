"""What every fault kind is (:class:`FaultKind`), and what its stages hand it: the cell a check reads
(:class:`CellView`, :class:`HostsView`) and the host an injection acts on (:class:`Injection`).

A kind is one module of this package, listed in ``registry.py``. It declares its facts as class
attributes (where it strikes, whether it ends the worker, cuts workers off the broker, takes a
duration, which capability of the broker's server it needs) and implements the stages it takes
part in: ``check`` (validation, beside the cell's other dimensions), ``check_hosts`` (beside the
inventory), ``inject`` (on the host it strikes) and ``undo`` (what it may leave on the host, when
the agent's lease ends). Nothing outside this package branches on a kind's name: callers read the
attributes, or call the stage.

This package is the vocabulary's (tests/unit/test_layout.py): standard library and vocab only. It
ships to the hosts, and the controller's validation reads it; a kind reaches servers, processes
and the network only through what its caller hands it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol

NONE = "none"
#: A TARGET naming every worker host of the run.
ALL = "all"
#: Where a kind strikes. ``WORKER``: the worker host(s) the fault's TARGET names (the run's first by
#: default); ``BROKER``: the run's broker server's host; ``DRIVER``: the run's (leading) driver
#: host, which reaches the broker as a client does.
WORKER, BROKER, DRIVER = "worker", "broker", "driver"


class FaultFailed(Exception):
    """The fault could not be injected; the message says why, plainly."""


@dataclass(frozen=True)
class CellView:
    """What a kind's :meth:`FaultKind.check` reads of a cell: its dimension values, and the server
    (a workloads/servers module's ``Server``) of every broker kind, which declares the server's
    capabilities (``restartable``, ``failover``)."""

    values: Mapping[str, Any]
    brokers: Mapping[str, Any]

    @property
    def broker(self) -> Any | None:
        """The server of the cell's broker (None for a kind cmx does not know)."""
        return self.brokers.get(self.values.get("broker"))

    def can(self, capability: str) -> bool:
        return bool(getattr(self.broker, capability, False))

    def able(self, capability: str) -> dict[str, Any]:
        """The broker kinds whose server has ``capability``, each with its server, in kind order."""
        return {kind: server for kind, server in self.brokers.items() if getattr(server, capability, False)}


@dataclass(frozen=True)
class HostsView:
    """What a kind's :meth:`FaultKind.check_hosts` reads of the sweep's inventory for one cell
    (cli/checks.py gathers it)."""

    #: The server of the cell's broker (its service name).
    service: str
    #: The sweep provisions the cell's broker.
    provisioned: bool
    #: The inventory marks the broker's host ``cmx_disposable: true``.
    disposable: bool
    #: Why cmx cannot tell where the broker lives on its host (its server's ``place_of``); None when it can.
    place_problem: str | None
    #: The cell's first worker host ("" when there is none).
    worker: str
    #: Whether that host is this machine (``ansible_connection: local``): asked only when needed.
    worker_local: Callable[[], bool]


class Injection(Protocol):
    """What a kind's :meth:`FaultKind.inject` can do on the host it strikes, for the run's own
    processes only (workloads/host/faultinject.py implements it). Each step is bounded and raises
    :class:`FaultFailed` saying why it could not be done; all but ``strike`` and ``note`` give up
    when the run ends first."""

    #: Seconds the run's warm shutdown may take (a TERMed worker waits for its tasks).
    shutdown_timeout: float
    #: Seconds before a replacement worker starts (``limits.fault_restart``).
    restart_s: float

    def worker(self) -> int:
        """The pid of the run's worker on this host (FaultFailed when none runs here)."""

    def supervisor(self) -> int | None:
        """The pid of that worker's supervisor, if one runs."""

    def strike(self, pid: int | None = None, task_id: str | None = None) -> None:
        """Record the blow's time, the process and task it hits, and tell the driver (a ``fault``
        event), just before it lands."""

    def note(self, **fields: Any) -> None:
        """Record more of what the blow did (``faults.csv`` columns: ``pid``, ``method``)."""

    def busy_child(self, worker: int, wait_s: float) -> tuple[int, str]:
        """(pid, task id) of a pool child of ``worker`` running a task of the run, within ``wait_s``."""

    def wait_gone(self, pid: int | None, timeout: float, what: str) -> None:
        """Wait until process ``pid`` (the ``what``) is gone, at most ``timeout`` seconds."""

    def wait_supervisor(self, pid: int | None) -> None:
        """Wait until the supervisor ``pid`` ended what its worker left (bounded by the host's rule)."""

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``."""

    def start_worker(self) -> int:
        """Start a replacement worker of the same node name; its exit code (0: it consumes)."""

    def restart_server(self) -> int | None:
        """Stop and start the run's broker server on this host where the controller said it lives;
        its pid before the restart."""

    def partition(self, duration_s: float, what: str) -> str:
        """Drop this host's traffic to and from the broker for ``duration_s``, then restore it; the
        method used. ``what`` names the fault in a refusal."""

    def heal(self) -> None:
        """Undo the run's partition on this host, if one holds."""

    def failover(self) -> None:
        """Fail the run's broker set's master over, as a client of the set (bounded)."""

    def kill_node(self) -> int:
        """SIGKILL the node of the run's broker set the controller sent (its ``node``: one of the
        server's ``node_places``, on this host) and start it again after :attr:`restart_s`, as its
        role does; its pid before. Bounded."""


class FaultKind:
    """One kind of fault: its facts, and its part in each stage. Subclasses set :attr:`name` (the
    text in a ``fault`` value, in ``faults.csv`` and the database's ``faults.kind``) and the facts
    that differ from the defaults, and implement :meth:`inject`."""

    name: str = ""
    #: Where it strikes: :data:`WORKER`, :data:`BROKER` or :data:`DRIVER`.
    strikes: str = WORKER
    #: What it does, in a sentence (the docs, ``KINDS``).
    does: str = ""
    #: It needs a duration (``KIND@T/D``); no other kind takes one.
    with_duration: bool = False
    #: It ends the worker's main process (the driver lets that exit pass; a replacement starts).
    ends_worker: bool = False
    #: It cuts workers off the broker: the broker goes away or moves, or a worker host's traffic to it
    #: is dropped. From the strike on, a worker cut off may stay silent (reconnecting, or never
    #: again): that is the fault's finding (a stall; the tasks it never finishes are counted lost
    #: once the run settles), not a lost worker. A kind that strikes the broker or the driver cuts
    #: off every worker of the run, one that strikes a worker host the host it struck.
    cuts_off: bool = False
    #: The controller sends it where the run's broker lives on its host (engine/run/faultrun.py's
    #: ``broker_place``: ``service`` and ``place``; a cluster's ``nodes``).
    needs_place: bool = False
    #: Its blow may end the run's workers themselves (a broker node lost takes the queues whose home
    #: it was, and a worker whose queue is gone exits): a worker's exit after its strike is the
    #: fault's finding (its tasks counted lost once the run settles), not a harness failure.
    downs_workers: bool = False
    #: What a ``:N`` picks, in a refusal of a bad one.
    target_text: str = "the run's Nth worker host, from 1"

    @property
    def takes_target(self) -> bool:
        """It takes a ``:TARGET`` (``N``: the Nth host of those it may strike, or ``all``): by default
        the kinds that strike worker hosts. A kind that strikes one of several other hosts sets it."""
        return self.strikes == WORKER

    @property
    def injected(self) -> bool:
        """This cmx injects it (a kind only planned is refused at validation, saying so)."""
        return type(self).inject is not FaultKind.inject

    def check(self, fault, cell: CellView) -> str | None:
        """Why ``fault`` (a :class:`~cmx.workloads.faults.values.Fault` of this kind) cannot run
        with the cell's other dimensions, in one line; None when it can."""
        return None

    def check_hosts(self, fault, hosts: HostsView) -> str | None:
        """Why ``fault`` cannot run on the sweep's hosts, in one line; None when it can."""
        return None

    def inject(self, fault, host: Injection) -> None:
        """Strike: wait for nothing (the caller waited for the fault's time), tell the driver
        (``host.strike``) just before the blow, land it, and return once it is over."""
        raise FaultFailed(f"{self.name} is not injected on the hosts by this cmx")

    def undo(self, host: Injection) -> None:
        """Undo what the fault may still hold on this host for the run (the agent's lease end)."""
