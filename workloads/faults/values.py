"""A ``fault`` value read: ``none`` or ``KIND@TIME[/DURATION][:TARGET]`` (TIME in seconds from the
workload's clock start: ``3``, ``3s``, ``1.5s``, ``250ms``), several joined with ``+``. A kind that
takes a duration holds for D seconds (``KIND@T/D``). A kind that strikes a worker host takes a
TARGET: ``N``, the run's Nth worker host (1, the default), or ``all``, every worker host of the run
at once (``KIND@2s:2``, ``KIND@3s/20s:all``). What each kind is, and whether it takes a duration
or a TARGET, its module says (``registry.py``); this module only reads the form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from . import registry
from .base import ALL, NONE, WORKER, FaultKind

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
    raise ValueError(f"expected a duration such as 30s, 10m, 1h or 250ms (or a number of seconds), got {value!r}")


@dataclass(frozen=True)
class Fault:
    """One fault of a cell: ``kind`` at ``at_s`` seconds from the clock start (for ``duration_s``)."""

    kind: str
    at_s: float
    duration_s: float | None = None
    #: Which worker host(s) of the run it strikes (kinds whose target is ``worker``): the Nth (1-based)
    #: or :data:`ALL`; for a kind that strikes one of several broker nodes, the Nth node.
    host: int | str = 1

    @property
    def definition(self) -> FaultKind:
        """Its kind's module's class: the facts and stages every caller reads (registry.py)."""
        return registry.get(self.kind)

    @property
    def target(self) -> str:
        return self.definition.strikes

    def text(self) -> str:
        """The canonical form: ``kill_child@3``, ``partition_worker@2/5``, ``kill_worker@2:2``
        (the default target, the first worker host, is not written: cell ids stay as they were)."""
        return (
            f"{self.kind}@{self.at_s:g}"
            + (f"/{self.duration_s:g}" if self.duration_s is not None else "")
            + (f":{self.host}" if self.host != 1 else "")
        )

    def hosts_of(self, workers: tuple[str, ...] | list[str]) -> tuple[str, ...]:
        """The worker hosts it strikes among the run's ``workers`` (in order): all, or the Nth."""
        if self.host == ALL:
            return tuple(workers)
        if not 1 <= int(self.host) <= len(workers):
            raise ValueError(
                f"fault {self.text()} strikes worker host {self.host}, but the run has {len(workers)} (machines)"
            )
        return (workers[int(self.host) - 1],)

    def strikes(self, machines: int) -> int:
        """How many hosts it strikes in a run of ``machines`` worker hosts (1 for other targets)."""
        return machines if self.target == WORKER and self.host == ALL else 1


def parse(value: Any) -> tuple[Fault, ...]:
    """The faults of a ``fault`` value, in time order; () for ``none``. ValueError with a one-line
    message for anything else."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(
            f"fault must be none or KIND@TIME[/DURATION][:TARGET] "
            f"(KIND one of {', '.join(registry.KINDS)}), got {value!r}"
        )
    if value.strip() == NONE:
        return ()
    faults = []
    for part in value.split("+"):
        part = part.strip()
        kind, at, when = part.partition("@")
        if kind not in registry.KINDS:
            raise ValueError(f"unknown fault kind {kind!r} in {value!r} (known: {', '.join(registry.KINDS)})")
        strikes, timed, targeted = (
            registry.KINDS[kind].strikes,
            registry.KINDS[kind].with_duration,
            registry.KINDS[kind].takes_target,
        )
        if not at:
            raise ValueError(f"fault {part!r} needs a time: {kind}@TIME, seconds from the clock start (e.g. {kind}@3s)")
        when, colon, target = when.partition(":")
        host: int | str = 1
        if colon:
            if not targeted:
                raise ValueError(
                    f"fault {part!r}: {kind} strikes the run's {strikes}, it takes no :TARGET "
                    f"(only the kinds that strike a worker host or a broker node do)"
                )
            target = target.strip()
            if target == ALL and strikes != WORKER:
                raise ValueError(
                    f"fault {part!r}: the target must be N ({registry.KINDS[kind].target_text}), got {target!r}"
                )
            if target == ALL:
                host = ALL
            elif target.isdigit() and int(target) >= 1:
                host = int(target)
            else:
                raise ValueError(
                    f"fault {part!r}: the target must be N ({registry.KINDS[kind].target_text})"
                    + (f" or {ALL}" if strikes == WORKER else "")
                    + f", got {target!r}"
                )
        when, slash, length = when.partition("/")
        try:
            at_s = parse_duration(when)
            duration = parse_duration(length) if slash else None
        except ValueError:
            raise ValueError(f"fault {part!r}: the time must be a duration such as 3, 3s or 250ms") from None
        if at_s < 0 or (duration is not None and duration <= 0):
            raise ValueError(f"fault {part!r}: times must be >= 0 and durations > 0")
        if timed and duration is None:
            raise ValueError(f"fault {part!r} needs a duration: {kind}@T/D (D seconds, e.g. {kind}@3s/5s)")
        if not timed and duration is not None:
            raise ValueError(
                f"fault {part!r}: {kind} takes no duration (only {', '.join(registry.with_duration())} does)"
            )
        faults.append(Fault(kind, at_s, duration, host))
    return tuple(sorted(faults, key=lambda f: f.at_s))


def canonical(value: Any) -> str:
    """The canonical text of a ``fault`` value (``kill_child@3s`` -> ``kill_child@3``)."""
    faults = parse(value)
    return "+".join(f.text() for f in faults) if faults else NONE
