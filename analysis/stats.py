"""Statistics for runs: medians with seeded bootstrap intervals (analysis/medians.py), the comparison
of two samples and the one verdict rule that ``cmx compare``, ``cmx trend`` and ``cmx recommend`` share. The tests
and resampling are scipy's (``scipy.stats.mannwhitneyu``, ``scipy.stats.bootstrap``);
formatting lives elsewhere.

The rule: a verdict never says more than the runs show.
- fewer than :data:`MIN_N` runs on either side: no verdict (``n too small``);
- ``same`` only when the 95 % interval of the change lies inside the equivalence margin
  (±:data:`MARGIN_PCT` % by default) and no difference is shown: shown equivalent, not merely
  "not shown different";
- shown different when the two-sided Mann-Whitney p is at most :data:`ALPHA` and the interval
  of the difference excludes 0; then ``better`` / ``worse`` (by the metric's direction;
  ``differs`` when it has none) only when the change's whole 95 % interval lies beyond the same
  ±margin (a change from a median of 0 is beyond any margin), else ``small``: a difference shown,
  but not shown to exceed the margin; reported, never gating;
- ``inconclusive`` otherwise, with the runs a side that would let a change of the observed size
  show (:attr:`Comparison.runs_needed`). With 3 runs a side the smallest exact p is 0.1, so a
  clear difference there is inconclusive, and says that 4 runs a side would show it.
A side whose runs spread widely (coefficient of variation over :data:`UNSTABLE_CV`, as pyperf
warns) is flagged ``unstable``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cmx.analysis.medians import CONFIDENCE as CONFIDENCE, RESAMPLES, SEED as SEED, UNSTABLE_CV as UNSTABLE_CV
from cmx.analysis.medians import Summary, _bootstrap, _clean, _rng, _sorted_median, _sps, summarize
from cmx.analysis.medians import BATCH_VALUES, summarize_many

ALPHA = 0.05
MIN_N = 3
MARGIN_PCT = 5.0  # the equivalence margin of "same", in % of the baseline's median
EXACT_LIMIT = 50_000  # exact permutation p-values up to this many splits (C(16, 8) = 12,870)
RUNS_NEEDED_CAP = 1000

N_TOO_SMALL = "n too small"
BETTER, WORSE, SAME, DIFFERS, INCONCLUSIVE = "better", "worse", "same", "differs", "inconclusive"
SMALL = "small"
#: Every verdict, in the order a reader weighs them.
VERDICTS = (WORSE, BETTER, DIFFERS, SMALL, INCONCLUSIVE, SAME, N_TOO_SMALL)
#: The verdicts of a difference shown (p ≤ ALPHA, its interval clear of 0), whatever its size.
SHOWN = (BETTER, WORSE, DIFFERS, SMALL)
#: What each verdict means, for --help, the docs and the tables' captions.
MEANINGS = {
    BETTER: "shown better: Mann-Whitney p ≤ 0.05, and the change's whole 95 % interval beyond the ±margin",
    WORSE: "shown worse: the same evidence, the other direction",
    SMALL: "shown different, but the change's interval reaches inside the ±margin: reported, never gating",
    SAME: "shown the same: no difference shown, and the change's whole 95 % interval lies within ±margin",
    INCONCLUSIVE: "neither shown: more runs a side would tell (the table says how many)",
    DIFFERS: "shown different, for a metric with no better direction",
    N_TOO_SMALL: f"fewer than {MIN_N} ok runs on a side: no verdict",
}


@dataclass(frozen=True)
class Comparison:
    baseline: Summary
    contender: Summary
    change_pct: float | None  # 100 × (contender − baseline) / |baseline| of the medians
    change_low: float | None  # 95 % interval of change_pct (None when the baseline's median is 0)
    change_high: float | None
    diff_low: float | None  # 95 % interval of contender − baseline medians
    diff_high: float | None
    p_value: float | None
    verdict: str  # one of VERDICTS
    margin_pct: float = MARGIN_PCT
    runs_needed: int | None = None  # inconclusive: runs a side that would let this change show

    @property
    def unstable(self) -> bool:
        return self.baseline.unstable or self.contender.unstable


def mann_whitney_p(a, b) -> float:
    """Two-sided p-value of the Mann-Whitney U test: exact without ties; with ties the exact
    permutation distribution of the mid-ranks while every split can be enumerated; else scipy's
    normal approximation (tie- and continuity-corrected)."""
    x, y = _clean(a), _clean(b)
    kind = _mw_method(x, y)
    if kind is None:
        return 1.0
    method = _sps().PermutationMethod(n_resamples=EXACT_LIMIT, rng=_rng()) if kind == "permutation" else kind
    return float(min(1.0, _sps().mannwhitneyu(x, y, alternative="two-sided", method=method).pvalue))


def _mw_method(x: np.ndarray, y: np.ndarray) -> str | None:
    """How :func:`mann_whitney_p` tests x against y: 'exact', 'permutation' or 'asymptotic'; None
    when there is nothing to test (an empty side, or one value in all)."""
    if not len(x) or not len(y):
        return None
    pooled = np.concatenate([x, y])
    distinct = len(np.unique(pooled))
    if distinct == 1:
        return None
    ties = distinct < len(pooled) and min(len(x), len(y)) > 1  # (scipy permutes ≥ 2 a side)
    if math.comb(len(pooled), len(x)) <= EXACT_LIMIT:
        return "permutation" if ties else "exact"
    return "asymptotic"


def _diff(x, y, axis=-1):
    return _sorted_median(y, axis) - _sorted_median(x, axis)


def _change(x, y, axis=-1):
    base = _sorted_median(x, axis)
    return 100.0 * (_sorted_median(y, axis) - base) / np.abs(base)


def smallest_n_at(alpha: float) -> int:
    """The fewest runs a side whose exact two-sided Mann-Whitney p can reach ``alpha`` (4 at 0.05: 2/70)."""
    n = MIN_N
    while 2 / math.comb(2 * n, n) > alpha:
        n += 1
    return n


MIN_N_SHOWN = smallest_n_at(ALPHA)


def runs_needed(n: int, change: float | None, low: float | None, high: float | None, margin: float) -> int | None:
    """Runs a side that would let a change of the observed size show, scaling the interval's
    half-width by √(n/n'): shown different (the interval clear of 0) or, for a change inside the
    margin, shown the same (the interval inside it), whichever needs fewer."""
    if change is None or low is None or high is None or not all(map(math.isfinite, (change, low, high))):
        return None
    half = (high - low) / 2
    if half <= 0:
        return max(MIN_N_SHOWN, n + 1)
    targets = [t for t in (abs(change), margin - abs(change)) if t > 0]
    if not targets:
        return None
    # half / t beyond the cap means more runs than the cap whatever n is (and squaring it could overflow)
    need = min(RUNS_NEEDED_CAP if half / t > RUNS_NEEDED_CAP else math.ceil(n * (half / t) ** 2) for t in targets)
    return min(RUNS_NEEDED_CAP, max(MIN_N_SHOWN, n + 1, need))


def _change_pct(sa: Summary, sb: Summary) -> float | None:
    """100 × (contender − baseline) / |baseline| of the medians; 0 for zero against zero."""
    if sa.median is not None and sb.median is not None and sa.median != 0:
        return 100.0 * (sb.median - sa.median) / abs(sa.median)
    if sa.median == 0 and sb.median == 0:
        return 0.0
    return None


def compare_samples(
    baseline: list[float],
    contender: list[float],
    better: str,
    resamples: int = RESAMPLES,
    margin_pct: float = MARGIN_PCT,
    alpha: float = ALPHA,
) -> Comparison:
    """The whole comparison of one metric; ``better`` is 'higher', 'lower' or 'neither'."""
    a, b = _clean(baseline), _clean(contender)
    sa, sb = summarize(a, resamples), summarize(b, resamples)
    change = _change_pct(sa, sb)
    if min(len(a), len(b)) < MIN_N:  # no verdict; a one-run side has no interval to resample
        p = mann_whitney_p(a, b) if len(a) and len(b) else None
        return Comparison(sa, sb, change, None, None, None, None, p, N_TOO_SMALL, margin_pct)
    d_low, d_high = (float(v) for v in _bootstrap((a, b), _diff, resamples))
    c_low = c_high = None
    if sa.median != 0:
        lo, hi = _bootstrap((a, b), _change, resamples)
        c_low, c_high = min(float(lo), change), max(float(hi), change)  # the interval holds its estimate
    elif d_low == d_high == 0:
        c_low = c_high = 0.0  # zero against zero in every resample
    p = mann_whitney_p(a, b)
    v = verdict(len(a), len(b), c_low, c_high, d_low, d_high, p, better, margin_pct, alpha)
    need = runs_needed(min(len(a), len(b)), change, c_low, c_high, margin_pct) if v == INCONCLUSIVE else None
    return Comparison(sa, sb, change, c_low, c_high, d_low, d_high, p, v, margin_pct, need)


def compare_many(
    baseline: list[float],
    contenders: list[list[float]],
    better: str,
    resamples: int = RESAMPLES,
    margin_pct: float = MARGIN_PCT,
    alpha: float = ALPHA,
) -> list[Comparison]:
    """:func:`compare_samples` of one baseline against each contender (``cmx recommend`` compares
    the best cell with every other): :func:`compare_pairs` with that baseline in every pair."""
    return compare_pairs([(baseline, c, better) for c in contenders], resamples, margin_pct, alpha)


def compare_pairs(
    pairs: list[tuple[list[float], list[float], str]],
    resamples: int = RESAMPLES,
    margin_pct: float = MARGIN_PCT,
    alpha: float = ALPHA,
) -> list[Comparison]:
    """:func:`compare_samples` of each (baseline, contender, better), the same Comparisons, in one
    scipy call per pair of sample sizes (``cmx trend`` tests the latest night of every series at
    once): as in :func:`summarize_many`, scipy draws one set of resample indices for all rows of a
    batch from the same seed, and the Mann-Whitney tests run along the last axis of a batch of rows.
    tests/unit/test_stats_many.py holds it equal to :func:`compare_samples`, pair by pair."""
    cleaned = [(_clean(a), _clean(b)) for a, b, _ in pairs]
    sas = summarize_many([a for a, _ in cleaned], resamples)
    sbs = summarize_many([b for _, b in cleaned], resamples)
    out: list[Comparison | None] = [None] * len(pairs)
    by_n: dict[tuple[int, int], list[int]] = {}
    for i, (a, b) in enumerate(cleaned):
        if min(len(a), len(b)) < MIN_N:
            out[i] = compare_samples(a, b, pairs[i][2], resamples, margin_pct, alpha)
        else:
            by_n.setdefault((len(a), len(b)), []).append(i)
    for (n_a, n_b), rows in by_n.items():
        step = max(1, BATCH_VALUES // (resamples * (n_a + n_b)))
        for start in range(0, len(rows), step):
            part = rows[start : start + step]
            base, other = np.stack([cleaned[i][0] for i in part]), np.stack([cleaned[i][1] for i in part])
            d_low, d_high = _bootstrap((base, other), _diff, resamples)
            nonzero = [j for j, i in enumerate(part) if sas[i].median != 0]  # a zero median has no change %
            if nonzero:
                c_lo, c_hi = _bootstrap((base[nonzero], other[nonzero]), _change, resamples)
                c_at = {j: k for k, j in enumerate(nonzero)}
            ps = mann_whitney_pairs([(cleaned[i][0], cleaned[i][1]) for i in part])
            for j, i in enumerate(part):
                sa, sb, better = sas[i], sbs[i], pairs[i][2]
                change = _change_pct(sa, sb)
                dl, dh = float(d_low[j]), float(d_high[j])
                c_low = c_high = None
                if sa.median != 0:
                    k = c_at[j]
                    c_low, c_high = min(float(c_lo[k]), change), max(float(c_hi[k]), change)
                elif dl == dh == 0:
                    c_low = c_high = 0.0
                v = verdict(n_a, n_b, c_low, c_high, dl, dh, ps[j], better, margin_pct, alpha)
                need = runs_needed(min(n_a, n_b), change, c_low, c_high, margin_pct) if v == INCONCLUSIVE else None
                out[i] = Comparison(sa, sb, change, c_low, c_high, dl, dh, ps[j], v, margin_pct, need)
    return out


def mann_whitney_pairs(pairs: list[tuple]) -> list[float]:
    """:func:`mann_whitney_p` of each (a, b): one scipy call per pair of sample sizes and method."""
    cleaned = [(_clean(a), _clean(b)) for a, b in pairs]
    out: list[float | None] = [None] * len(cleaned)
    groups: dict[tuple, list[int]] = {}
    for i, (x, y) in enumerate(cleaned):
        method = _mw_method(x, y)
        if method is None:
            out[i] = mann_whitney_p(x, y)
        else:
            groups.setdefault((len(x), len(y), method), []).append(i)
    for (_, _, kind), rows in groups.items():
        method = _sps().PermutationMethod(n_resamples=EXACT_LIMIT, rng=_rng()) if kind == "permutation" else kind
        ps = (
            _sps()
            .mannwhitneyu(
                np.stack([cleaned[i][0] for i in rows]),
                np.stack([cleaned[i][1] for i in rows]),
                alternative="two-sided",
                method=method,
                axis=-1,
            )
            .pvalue
        )
        for j, i in enumerate(rows):
            out[i] = float(min(1.0, ps[j]))
    return out


def verdict(
    n_a: int,
    n_b: int,
    change_low: float | None,
    change_high: float | None,
    diff_low: float,
    diff_high: float,
    p: float,
    better: str,
    margin_pct: float = MARGIN_PCT,
    alpha: float = ALPHA,
) -> str:
    """The one rule (module docstring): same only when shown within the margin, better/worse
    only when shown different beyond it, small when shown different inside it, inconclusive
    otherwise. ``alpha``: the level a difference is shown at (a race has its own rule at its own level:
    analysis/racing.py)."""
    if min(n_a, n_b) < MIN_N:
        return N_TOO_SMALL
    if p <= alpha and (diff_low > 0 or diff_high < 0):
        beyond = change_low is None or change_high is None or change_low > margin_pct or change_high < -margin_pct
        if not beyond:
            return SMALL
        if better not in ("higher", "lower"):
            return DIFFERS
        return BETTER if (diff_low > 0) == (better == "higher") else WORSE
    if change_low is not None and change_high is not None and -margin_pct <= change_low and change_high <= margin_pct:
        return SAME
    return INCONCLUSIVE
