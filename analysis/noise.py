"""Whether two sets of runs ran on hosts equally quiet: the label ``cmx compare``, ``cmx trend``
and the report's history put beside a change (issue 37). Noise labels a change; it never hides one,
never gates, and changes no verdict.

The noise of a run is its ``noise_*`` metrics (engine/results/ingest_noise.py: the worst host's
CPU used outside the run as a share of its cores, steal, load, pressure). Two sides differ
materially when, comparing the medians of their runs:

- **outside CPU** (``noise_cpu_share``): the larger is at least :data:`CPU_MIN_DIFF` (0.05 of the
  cores) above the smaller and either at least :data:`RATIO` (2×) it or at least :data:`CPU_BIG_DIFF`
  (0.2 of the cores: a quarter core more on a host already half busy is material though under 2×):
  "host 3.1× busier after (outside the run: 31 % of its cores after, 10 % before)";
- **steal** (``noise_steal_share``): the same rule with :data:`STEAL_MIN_DIFF` (0.05): "steal 12 %
  after, 0 % before";
- **memory pressure** (``noise_psi_memory_some_share``): one side stalled at least
  :data:`PRESSURE_MIN` (5 % of its wall time) and at least 2× the other: "memory pressure after
  (8 % of the time stalled, 0 % before)".

Load average and CPU pressure are stored and shown but not in the rule: they count the run's own
runnable tasks too (a contender with more processes raises both by itself). A side without a
noise metric (runs of an older cmx) says nothing of it.
"""

from __future__ import annotations

import statistics

from cmx.workloads.vocab import metrics as M

#: How many times the noisier side's median must be the quieter's.
RATIO = 2.0
#: And by how much, in shares of the host's cores (outside CPU) ...
CPU_MIN_DIFF = 0.05
#: ... or, under 2×, by at least this much (outside CPU) ...
CPU_BIG_DIFF = 0.2
#: ... of its CPU time (steal) ...
STEAL_MIN_DIFF = 0.05
#: ... and the least share of the wall time stalled on memory that is called pressure.
PRESSURE_MIN = 0.05


def values(con, run_ids) -> dict[str, list[float]]:
    """``{noise metric: [its value per run that has it]}`` of ``run_ids`` (the ``metrics`` table)."""
    got: dict[str, list[float]] = {}
    for name, value in con.execute(
        "SELECT name, value FROM metrics WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
        "AND name IN (SELECT unnest(?::VARCHAR[])) AND value IS NOT NULL ORDER BY run_id",
        [list(run_ids), list(M.NOISE_METRICS)],
    ).fetchall():
        got.setdefault(name, []).append(value)
    return got


def differs(con, before_run_ids, after_run_ids, sides: tuple[str, str] = ("before", "after")) -> str | None:
    """Whether the noise of two sets of runs differs materially (the rule in the module docstring).

    ``con``: a DuckDB connection to the results database (reads ``metrics`` only); ``before_run_ids``
    and ``after_run_ids``: iterables of run ids (str), the two sides of a change (or compare's
    baseline and contender). ``sides``: the words naming them in the label.
    Returns a short label, the differing parts joined by "; ", e.g. "host 3.1× busier after
    (outside the run: 31 % of its cores after, 10 % before)", or None when the noise is alike or
    either side has no noise metrics.
    """
    return differs_values(values(con, before_run_ids), values(con, after_run_ids), sides)


def differs_values(
    before: dict[str, list[float]], after: dict[str, list[float]], sides: tuple[str, str] = ("before", "after")
) -> str | None:
    """:func:`differs` on values already read: ``{noise metric: [value per run]}`` per side."""
    parts = [p for p in (_cpu(before, after, sides), _steal(before, after, sides), _memory(before, after, sides)) if p]
    return "; ".join(parts) or None


def describe(values_of_point: dict[str, list[float]]) -> str | None:
    """One point's noise in words (the report's tooltip): "outside CPU 12 % of cores, steal 3 %,
    memory pressure 6 %" (steal and pressure only when at least 1 %), or None without noise metrics."""
    cpu = _median(values_of_point, M.NOISE_CPU_SHARE)
    if cpu is None:
        return None
    parts = [f"outside CPU {_pct(cpu)} of cores"]
    for name, what in ((M.NOISE_STEAL_SHARE, "steal"), (M.NOISE_PSI_MEMORY_SOME_SHARE, "memory pressure")):
        v = _median(values_of_point, name)
        if v is not None and v >= 0.01:
            parts.append(f"{what} {_pct(v)}")
    return ", ".join(parts)


def _median(vals: dict[str, list[float]], name: str) -> float | None:
    got = vals.get(name)
    return statistics.median(got) if got else None


def _pct(share: float) -> str:
    return f"{100 * share:.0f} %"


def _apart(a: float, b: float, min_diff: float, big_diff: float = float("inf")) -> bool:
    lo, hi = min(a, b), max(a, b)
    return hi - lo >= min_diff and (hi >= RATIO * lo or hi - lo >= big_diff)


def _pair(before, after, name):
    a, b = _median(before, name), _median(after, name)
    return (a, b) if a is not None and b is not None else None


def _cpu(before, after, sides) -> str | None:
    pair = _pair(before, after, M.NOISE_CPU_SHARE)
    if not pair or not _apart(*pair, CPU_MIN_DIFF, CPU_BIG_DIFF):
        return None
    (a, b), (w_before, w_after) = pair, sides
    noisy, hi, lo, other = (w_after, b, a, w_before) if b > a else (w_before, a, b, w_after)
    times = f"{hi / lo:.1f}× " if lo >= 0.01 else ""
    return f"host {times}busier {noisy} (outside the run: {_pct(hi)} of its cores {noisy}, {_pct(lo)} {other})"


def _steal(before, after, sides) -> str | None:
    pair = _pair(before, after, M.NOISE_STEAL_SHARE)
    if not pair or not _apart(*pair, STEAL_MIN_DIFF):
        return None
    (a, b), (w_before, w_after) = pair, sides
    first, second = ((b, w_after), (a, w_before)) if b > a else ((a, w_before), (b, w_after))
    return f"steal {_pct(first[0])} {first[1]}, {_pct(second[0])} {second[1]}"


def _memory(before, after, sides) -> str | None:
    pair = _pair(before, after, M.NOISE_PSI_MEMORY_SOME_SHARE)
    if not pair:
        return None
    (a, b), (w_before, w_after) = pair, sides
    hi, lo = max(a, b), min(a, b)
    if hi < PRESSURE_MIN or hi < RATIO * lo:
        return None
    noisy, other = (w_after, w_before) if b > a else (w_before, w_after)
    return f"memory pressure {noisy} ({_pct(hi)} of the time stalled, {_pct(lo)} {other})"
