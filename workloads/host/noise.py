"""The host's noise over a run: what else the host did while the run's processes ran (issue 37).

The sampler (sampler.py) keeps one :class:`NoiseMeter`: it reads, over the sampler's life (the
run's window on this host), the host's CPU counters (/proc/stat: busy and steal jiffies over
all CPUs), its load average (/proc/loadavg, at most once a second: the kernel updates it every
5 s) and its pressure stall counters (/proc/pressure/{cpu,memory}: ``total=`` microseconds,
differenced over the window; a kernel without PSI has no such files: no value, no error). The
sampler adds the CPU of every process it samples (the run's own, itself included) as it reads
them, so CPU outside the run = the host's busy CPU minus the run's own.

Hosts that share one kernel (the tests' network-namespace hosts) each read the whole machine's
counters: there, another host's share of the run counts as outside this one's.

``noise.json`` in the run dir (rewritten atomically at every flush of the sampler) holds the raw
counts; ingest (engine/results/ingest_noise.py) turns them into the ``noise_*`` metrics:

- ``cpus``: CPUs /proc/stat lists (``cpuN`` lines); ``clk_tck``: the unit of the tick counts.
- ``total_ticks``, ``busy_ticks``, ``steal_ticks``: /proc/stat's summed ``cpu`` line over the
  window (total = user + nice + system + idle + iowait + irq + softirq + steal; busy = user +
  nice + system + irq + softirq; guest time is inside user and nice already), each from the
  window's start to the last tick.
- ``own_ticks``: utime + stime the sampled processes used inside the window (a process first seen
  after the window began, and started after it, counts from its start; one seen before it from
  its first reading), plus the sampler's finished helpers (rabbitmqctl). CPU a run's process
  used after its last tick, or a child too short-lived for any tick, is not in it: it reads as
  outside.
- ``load1_mean``, ``load1_max``, ``load_readings``: the 1-minute load average over the window.
- ``psi``: ``{"cpu": {"some_us": …, "full_us": …, "seconds": …}, "memory": {…}}`` for each
  pressure file the kernel has (``full`` absent where the kernel gives none), ``seconds`` being
  the window the counters were differenced over.

Standard library only (Linux).
"""

from __future__ import annotations

import os
import time
from typing import NamedTuple

from cmx.workloads.host.procfs import CLK_TCK, read_proc

NOISE_FILE = "noise.json"
#: The pressure files read (their resource name → path).
PRESSURE = {"cpu": "/proc/pressure/cpu", "memory": "/proc/pressure/memory"}
#: Seconds between two readings of /proc/loadavg (the kernel recomputes it every 5 s).
LOAD_EVERY_S = 1.0
#: Bytes a tick reads of /proc/stat: its first line (the summed ``cpu`` line: 10 numbers).
STAT_HEAD = 512


class CpuTimes(NamedTuple):
    """Jiffies summed over all CPUs, and how many CPUs /proc/stat lists."""

    total: int
    busy: int
    steal: int
    cpus: int


def parse_proc_stat(data: bytes, count_cpus: bool = True) -> CpuTimes:
    """The summed ``cpu`` line of /proc/stat; ValueError when there is none. ``count_cpus``: also
    count the ``cpuN`` lines (else ``cpus`` is 0: each tick reads only the first line's worth).

    Fields: user nice system idle iowait irq softirq steal guest guest_nice (older kernels stop
    earlier: missing ones count 0). Guest time is counted inside user/nice already.
    """
    end = data.find(b"\n")
    head = (data if end < 0 else data[:end]).split()
    if not head or head[0] != b"cpu":
        raise ValueError("/proc/stat: no summed cpu line")
    f = [int(x) for x in head[1:9]] + [0] * (8 - len(head[1:9]))
    user, nice, system, idle, iowait, irq, softirq, steal = f
    cpus = sum(1 for line in data.split(b"\n")[1:] if line[:3] == b"cpu" and line[3:4].isdigit()) if count_cpus else 0
    return CpuTimes(total=sum(f), busy=user + nice + system + irq + softirq, steal=steal, cpus=cpus)


def parse_loadavg(data: bytes) -> float:
    """The 1-minute load average of /proc/loadavg (``0.52 0.58 0.59 1/467 12345``)."""
    return float(data.split(maxsplit=1)[0])


def parse_pressure(data: bytes) -> dict[str, int]:
    """``{"some_us": …, "full_us": …}`` from a /proc/pressure file's ``total=`` counters (µs);
    ``full`` is absent where the kernel writes no such line (older kernels' cpu file)."""
    out = {}
    for line in data.decode().splitlines():
        kind, _, rest = line.partition(" ")
        for field in rest.split():
            if field.startswith("total=") and kind in ("some", "full"):
                out[f"{kind}_us"] = int(field[len("total=") :])
    return out


def read_pressure(path: str) -> dict[str, int] | None:
    """The file's counters, or None when the kernel has no such file (no PSI, or not enabled)."""
    try:
        return parse_pressure(read_proc(path, 1024))
    except (OSError, ValueError):
        return None


class NoiseMeter:
    """The host's counters at the window's start and at its last tick; see the module docstring."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self._stat_fd: int | None = None
        self._first: CpuTimes | None = None
        self._last: CpuTimes | None = None
        self.own_ticks = 0
        self._children0 = 0.0
        self._load: list[float] = []
        self._next_load = 0.0
        self._psi0: dict[str, tuple[float, dict[str, int]]] = {}
        self.start_boot_ticks = 0.0

    def start(self) -> None:
        """The window opens: the counters' first readings."""
        try:
            self._stat_fd = os.open("/proc/stat", os.O_RDONLY)
            self._first = self._last = parse_proc_stat(os.pread(self._stat_fd, 1 << 20, 0))
        except (OSError, ValueError) as exc:
            self._close_stat()
            self.errors.append(f"/proc/stat: {type(exc).__name__}: {exc}")
        for name, path in PRESSURE.items():
            counters = read_pressure(path)
            if counters is not None:
                self._psi0[name] = (time.monotonic(), counters)
        times = os.times()
        self._children0 = times.children_user + times.children_system
        self.start_boot_ticks = time.clock_gettime(time.CLOCK_BOOTTIME) * CLK_TCK

    def process(self, previous: int | None, cpu_ticks: int, start_ticks: int) -> None:
        """A sampled process's CPU reading: ``previous`` its last one (None: first seen)."""
        if previous is not None:
            self.own_ticks += max(0, cpu_ticks - previous)
        elif start_ticks >= self.start_boot_ticks:  # began inside the window: all of it is the run's
            self.own_ticks += cpu_ticks

    def tick(self, now: float) -> None:
        """Once a tick, after the processes were read: the host's counters at the same moment."""
        if self._stat_fd is not None:
            try:
                self._last = parse_proc_stat(os.pread(self._stat_fd, STAT_HEAD, 0), count_cpus=False)
            except (OSError, ValueError):
                pass  # the previous reading stands: the window ends a tick earlier
        if now >= self._next_load:
            self._next_load = now + LOAD_EVERY_S
            try:
                self._load.append(parse_loadavg(read_proc("/proc/loadavg", 256)))
            except (OSError, ValueError, IndexError):
                pass

    def summary(self, host: str) -> dict:
        """What noise.json holds (the window up to now)."""
        times = os.times()
        children = times.children_user + times.children_system - self._children0
        out: dict = {
            "host": host,
            "clk_tck": CLK_TCK,
            "own_ticks": self.own_ticks + round(children * CLK_TCK),
            "load1_mean": round(sum(self._load) / len(self._load), 4) if self._load else None,
            "load1_max": max(self._load) if self._load else None,
            "load_readings": len(self._load),
        }
        if self._first is not None and self._last is not None:
            out |= {
                "cpus": self._first.cpus,
                "total_ticks": self._last.total - self._first.total,
                "busy_ticks": self._last.busy - self._first.busy,
                "steal_ticks": self._last.steal - self._first.steal,
            }
        psi = {}
        for name, (at0, first) in self._psi0.items():
            now = read_pressure(PRESSURE[name])
            if now is not None:
                psi[name] = {k: now[k] - first[k] for k in first if k in now}
                psi[name]["seconds"] = round(time.monotonic() - at0, 3)
        out["psi"] = psi
        out["errors"] = list(self.errors)
        return out

    def close(self) -> None:
        self._close_stat()

    def _close_stat(self) -> None:
        if self._stat_fd is not None:
            os.close(self._stat_fd)
            self._stat_fd = None
