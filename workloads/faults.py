"""The ``fault`` dimension's vocabulary: which faults a cell may inject, and how its value is read.

``fault: none`` or ``KIND@TIME[/DURATION][:TARGET]`` (TIME in seconds from the workload's clock start:
``3``, ``3s``, ``1.5s``, ``250ms``), several joined with ``+``; ``partition_worker@T/D`` holds for D
seconds. A kind that strikes a worker host takes a TARGET: ``N``, the run's Nth worker host (1, the
default), or ``all``, every worker host of the run at once (``kill_worker@2s:2``,
``partition_worker@3s/20s:all``). The engine
validates a cell's faults with :func:`parse` (engine/model/dimensions.py, engine/model/faultcheck.py);
the controller schedules them (engine/run/faultrun.py), the hosts' agents inject them
(workloads/host/faultinject.py), the driver lets a fault's own damage pass and ends a fault run by
``limits.settle`` (workloads/drive/settle.py). It ships to the hosts: standard library only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from cmx.workloads.vocab import pools

NONE = "none"

#: kind -> (where it strikes, what it does). ``worker``: the worker host(s) the fault's TARGET names
#: (the run's first by default);
#: ``broker``: the run's broker server; ``driver``: the run's (leading) driver host, which reaches
#: the broker as a client does.
KINDS: dict[str, tuple[str, str]] = {
    "kill_child": ("worker", "SIGKILL one prefork pool child that is running a task of the run"),
    "kill_worker": ("worker", "SIGKILL the worker's main process; a replacement starts after limits.fault_restart"),
    "term_worker": ("worker", "SIGTERM the worker's main process (warm shutdown); a replacement starts once it "
                              "exited, after limits.fault_restart"),
    "restart_broker": ("broker", "stop and start the run's broker server (one cmx provisioned or marked "
                                 "cmx_disposable: true)"),
    "partition_worker": ("worker", "drop the worker host's traffic to the broker for D seconds (KIND@T/D)"),
    "failover_broker": ("driver", "SENTINEL FAILOVER on the run's Redis Sentinel set (broker redis-sentinel): "
                                  "the replica becomes the master; do the workers follow?"),
}
#: Kinds that end the worker's main process (the driver lets that exit pass; a replacement starts).
ENDS_WORKER = ("kill_worker", "term_worker")
#: Kinds that cut workers off the broker: it goes away (restart_broker) or moves (failover_broker),
#: or the worker host's traffic to it is dropped (partition_worker). From the strike on, a worker
#: cut off may stay silent (reconnecting, or never again): that is the fault's finding (a stall; the
#: tasks it never finishes are counted lost once the run settles), not a lost worker. Those that
#: strike the broker cut off every worker of the run, partition_worker the host it struck.
CUTS_OFF = ("restart_broker", "partition_worker", "failover_broker")
#: A TARGET naming every worker host of the run.
ALL = "all"
#: Kinds that need a duration (``@T/D``).
WITH_DURATION = ("partition_worker",)
#: The pools whose children are processes the harness can kill one of (kill_child).
CHILD_POOLS = (pools.PREFORK,)
#: Seconds kill_child waits for a pool child that runs a task before the run fails saying so.
BUSY_CHILD_WAIT_S = 5.0

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """Seconds from a number of seconds or a string like ``"10m"``, ``"1.5s"``, ``"250ms"``, ``"1h30m"``."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30s, 10m or 1h, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return float(text)
        except ValueError:
            pass
        parts = _DURATION_PART.findall(text)
        if parts and "".join(n + u for n, u in parts) == text:
            return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    raise ValueError(f"expected a duration such as 30s, 10m, 1h or 250ms (or a number of seconds), "
                     f"got {value!r}")


@dataclass(frozen=True)
class Fault:
    """One fault of a cell: ``kind`` at ``at_s`` seconds from the clock start (for ``duration_s``)."""

    kind: str
    at_s: float
    duration_s: float | None = None
    #: Which worker host(s) of the run it strikes (kinds whose target is ``worker``): the Nth (1-based)
    #: or :data:`ALL`.
    host: int | str = 1

    @property
    def target(self) -> str:
        return KINDS[self.kind][0]

    def text(self) -> str:
        """The canonical form: ``kill_child@3``, ``partition_worker@2/5``, ``kill_worker@2:2``
        (the default target, the first worker host, is not written: cell ids stay as they were)."""
        return (f"{self.kind}@{self.at_s:g}" + (f"/{self.duration_s:g}" if self.duration_s is not None else "")
                + (f":{self.host}" if self.host != 1 else ""))

    def hosts_of(self, workers: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        """The worker hosts it strikes among the run's ``workers`` (in order): all, or the Nth."""
        if self.host == ALL:
            return tuple(workers)
        if not 1 <= int(self.host) <= len(workers):
            raise ValueError(f"fault {self.text()} strikes worker host {self.host}, but the run has "
                             f"{len(workers)} (machines)")
        return (workers[int(self.host) - 1],)

    def strikes(self, machines: int) -> int:
        """How many hosts it strikes in a run of ``machines`` worker hosts (1 for other targets)."""
        return machines if self.target == "worker" and self.host == ALL else 1


def parse(value: Any) -> tuple[Fault, ...]:
    """The faults of a ``fault`` value, in time order; () for ``none``. ValueError with a one-line
    message for anything else."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"fault must be none or KIND@TIME[/DURATION][:TARGET] (KIND one of {', '.join(KINDS)}), got {value!r}")
    if value.strip() == NONE:
        return ()
    faults = []
    for part in value.split("+"):
        part = part.strip()
        kind, at, when = part.partition("@")
        if kind not in KINDS:
            raise ValueError(f"unknown fault kind {kind!r} in {value!r} (known: {', '.join(KINDS)})")
        if not at:
            raise ValueError(f"fault {part!r} needs a time: {kind}@TIME, seconds from the clock start (e.g. {kind}@3s)")
        when, colon, target = when.partition(":")
        host: int | str = 1
        if colon:
            if KINDS[kind][0] != "worker":
                raise ValueError(f"fault {part!r}: {kind} strikes the run's {KINDS[kind][0]}, it takes no :TARGET "
                                 f"(only the kinds that strike a worker host do)")
            target = target.strip()
            if target == ALL:
                host = ALL
            elif target.isdigit() and int(target) >= 1:
                host = int(target)
            else:
                raise ValueError(f"fault {part!r}: the target must be N (the run's Nth worker host, from 1) "
                                 f"or {ALL}, got {target!r}")
        when, slash, length = when.partition("/")
        try:
            at_s = parse_duration(when)
            duration = parse_duration(length) if slash else None
        except ValueError:
            raise ValueError(f"fault {part!r}: the time must be a duration such as 3, 3s or 250ms") from None
        if at_s < 0 or (duration is not None and duration <= 0):
            raise ValueError(f"fault {part!r}: times must be >= 0 and durations > 0")
        if kind in WITH_DURATION and duration is None:
            raise ValueError(f"fault {part!r} needs a duration: {kind}@T/D (D seconds, e.g. {kind}@3s/5s)")
        if kind not in WITH_DURATION and duration is not None:
            raise ValueError(f"fault {part!r}: {kind} takes no duration (only {', '.join(WITH_DURATION)} does)")
        faults.append(Fault(kind, at_s, duration, host))
    return tuple(sorted(faults, key=lambda f: f.at_s))


def canonical(value: Any) -> str:
    """The canonical text of a ``fault`` value (``kill_child@3s`` -> ``kill_child@3``)."""
    faults = parse(value)
    return "+".join(f.text() for f in faults) if faults else NONE
