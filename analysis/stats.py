"""Statistics for comparing two samples of runs: medians, seeded bootstrap intervals, the
Mann-Whitney U test and the verdict rule. Pure Python (no numpy/scipy: samples are a handful of
runs, so exactness matters more than speed). Formatting lives elsewhere.

The rule, as in pyperf's ``compare_to`` but with the interval made explicit:
- fewer than :data:`MIN_N` runs on either side: no verdict ("n too small");
- ``same`` when the 95 % bootstrap interval of the difference of medians contains 0, or the
  two-sided Mann-Whitney p-value is above :data:`ALPHA`;
- otherwise ``better`` / ``worse`` by the metric's direction (``differs`` when it has none).
"""
from __future__ import annotations

import itertools
import math
import random
import statistics
from dataclasses import dataclass

RESAMPLES = 2000
SEED = 13            # fixed: the same data always gives the same interval
CONFIDENCE = 0.95
ALPHA = 0.05
MIN_N = 3
EXACT_LIMIT = 50_000  # enumerate every split up to this many (C(16, 8) = 12,870), else the normal approximation

N_TOO_SMALL = "n too small"


@dataclass(frozen=True)
class Summary:
    """n, median and the 95 % bootstrap interval of the median of one sample."""

    n: int
    median: float | None
    low: float | None
    high: float | None

    def as_dict(self) -> dict:
        return {"n": self.n, "median": self.median, "low": self.low, "high": self.high}


@dataclass(frozen=True)
class Comparison:
    baseline: Summary
    contender: Summary
    change_pct: float | None      # 100 × (contender − baseline) / |baseline| of the medians
    diff_low: float | None        # 95 % bootstrap interval of contender − baseline medians
    diff_high: float | None
    p_value: float | None
    verdict: str                  # better | worse | same | differs | n too small


def _percentile(sorted_values: list[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default), q in [0, 1]."""
    if len(sorted_values) == 1:
        return sorted_values[0]
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _boot_medians(values: list[float], rng: random.Random, resamples: int) -> list[float]:
    n = len(values)
    return [statistics.median(rng.choices(values, k=n)) for _ in range(resamples)]


def summarize(values: list[float], resamples: int = RESAMPLES, seed: int = SEED) -> Summary:
    """n, median and percentile-bootstrap interval of the median (seeded, so reproducible)."""
    values = [float(v) for v in values if v is not None]
    if not values:
        return Summary(0, None, None, None)
    med = statistics.median(values)
    if len(values) == 1:
        return Summary(1, med, med, med)
    boots = sorted(_boot_medians(values, random.Random(seed), resamples))
    tail = (1 - CONFIDENCE) / 2
    return Summary(len(values), med, _percentile(boots, tail), _percentile(boots, 1 - tail))


def diff_interval(a: list[float], b: list[float], resamples: int = RESAMPLES,
                  seed: int = SEED) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of median(b) − median(a), each side resampled apart."""
    rng = random.Random(seed)
    diffs = sorted(statistics.median(rng.choices(b, k=len(b))) - statistics.median(rng.choices(a, k=len(a)))
                   for _ in range(resamples))
    tail = (1 - CONFIDENCE) / 2
    return _percentile(diffs, tail), _percentile(diffs, 1 - tail)


def _ranks(values: list[float]) -> list[float]:
    """1-based ranks, ties given their mid-rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def mann_whitney_p(a: list[float], b: list[float]) -> float:
    """Two-sided p-value of the Mann-Whitney U test (equivalently Wilcoxon rank-sum).

    Exact when every split of the pooled ranks can be enumerated (ties keep their mid-ranks, so
    this is the exact permutation distribution of the rank sum); otherwise the normal
    approximation with tie correction and continuity correction."""
    n1, n2 = len(a), len(b)
    if not n1 or not n2:
        return 1.0
    ranks = _ranks([*a, *b])
    r1 = sum(ranks[:n1])
    mean = n1 * (n1 + n2 + 1) / 2
    observed = abs(r1 - mean)
    if observed < 1e-12:
        return 1.0
    if math.comb(n1 + n2, n1) <= EXACT_LIMIT:
        total = extreme = 0
        for combo in itertools.combinations(ranks, n1):
            total += 1
            if abs(sum(combo) - mean) >= observed - 1e-9:
                extreme += 1
        return extreme / total
    n = n1 + n2
    counts: dict[float, int] = {}
    for r in ranks:
        counts[r] = counts.get(r, 0) + 1
    ties = sum(t ** 3 - t for t in counts.values())
    var = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if var <= 0:
        return 1.0
    z = (observed - 0.5) / math.sqrt(var)
    return min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def compare_samples(baseline: list[float], contender: list[float], better: str,
                    resamples: int = RESAMPLES, seed: int = SEED) -> Comparison:
    """The whole comparison of one metric; ``better`` is 'higher', 'lower' or 'neither'."""
    a = [float(v) for v in baseline if v is not None]
    b = [float(v) for v in contender if v is not None]
    sa, sb = summarize(a, resamples, seed), summarize(b, resamples, seed)
    change = None
    if sa.median is not None and sb.median is not None and sa.median != 0:
        change = 100.0 * (sb.median - sa.median) / abs(sa.median)
    elif sa.median == 0 and sb.median == 0:
        change = 0.0
    if not a or not b:
        return Comparison(sa, sb, change, None, None, None, N_TOO_SMALL)
    low, high = diff_interval(a, b, resamples, seed)
    p = mann_whitney_p(a, b)
    return Comparison(sa, sb, change, low, high, p, verdict(len(a), len(b), low, high, p, better))


def verdict(n_a: int, n_b: int, diff_low: float, diff_high: float, p: float, better: str) -> str:
    if min(n_a, n_b) < MIN_N:
        return N_TOO_SMALL
    if diff_low <= 0 <= diff_high or p > ALPHA:
        return "same"
    if better not in ("higher", "lower"):
        return "differs"
    return "better" if (diff_low > 0) == (better == "higher") else "worse"
