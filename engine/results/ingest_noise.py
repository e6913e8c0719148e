"""Ingest of the hosts' noise: each host's ``noise.json`` (its sampler's counts, see
workloads/host/noise.py) becomes per-host rows of ``host_noise`` and the run's ``noise_*`` metrics
(the worst host's value of each).

Per host, over its sampler's window:

- ``noise_cpu_share`` = (busy − own) / total ticks: the host's busy CPU (/proc/stat) less the CPU of
  the run's own sampled processes, over every CPU's time (0..1 of the host's cores). The two counts
  come from different clocks of the kernel (tick-sampled host counters, per-process accounting), so a
  host that ran nothing else can read a hair below 0: it is stored as 0, and never above 1.
- ``noise_steal_share`` = steal / total ticks.
- ``noise_load1`` = the mean 1-minute load average over the window / the host's CPUs.
- ``noise_psi_{cpu,memory}_some_share`` = the ``some`` stall microseconds / the window's.

A host without ``noise.json`` (artifacts of an older cmx) or without a counter (no PSI) has no value.
"""

from __future__ import annotations

import json
from pathlib import Path

from cmx.engine.results.metricdefs import unit_of
from cmx.workloads.vocab import metrics as M

NOISE_FILE = "noise.json"  # workloads/host/noise.py NOISE_FILE (the engine reads no host module)


def of_host(summary: dict) -> dict[str, float]:
    """The noise metrics of one host's noise.json (only those it has the counts for)."""
    out: dict[str, float] = {}
    total = summary.get("total_ticks")
    if total and total > 0 and summary.get("busy_ticks") is not None:
        outside = (summary["busy_ticks"] - summary.get("own_ticks", 0)) / total
        out[M.NOISE_CPU_SHARE] = min(1.0, max(0.0, outside))
        if summary.get("steal_ticks") is not None:
            out[M.NOISE_STEAL_SHARE] = min(1.0, max(0.0, summary["steal_ticks"] / total))
    if summary.get("load1_mean") is not None and summary.get("cpus"):
        out[M.NOISE_LOAD1] = summary["load1_mean"] / summary["cpus"]
    psi = summary.get("psi") or {}
    for resource, name in (("cpu", M.NOISE_PSI_CPU_SOME_SHARE), ("memory", M.NOISE_PSI_MEMORY_SOME_SHARE)):
        counts = psi.get(resource) or {}
        if counts.get("some_us") is not None and counts.get("seconds"):
            out[name] = min(1.0, max(0.0, counts["some_us"] / 1e6 / counts["seconds"]))
    return out


def ingest_noise(con, run_id: str, host_dirs: list[Path]) -> list[tuple[str, float, str]]:
    """Insert each host's noise into ``host_noise``; the run's metrics (worst host), for ``metrics``.
    Runs inside the caller's transaction."""
    worst: dict[str, float] = {}
    rows = []
    for d in host_dirs:
        try:
            summary = json.loads((d / NOISE_FILE).read_text())
        except (OSError, ValueError):
            continue
        for name, value in of_host(summary).items():
            rows.append((run_id, d.name, name, value, unit_of(name)))
            worst[name] = max(value, worst.get(name, value))
    if rows:
        con.executemany("INSERT INTO host_noise VALUES (?, ?, ?, ?, ?)", rows)
    return [(name, worst[name], unit_of(name)) for name in M.NOISE_METRICS if name in worst]
