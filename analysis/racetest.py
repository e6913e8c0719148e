"""The statistics of a race (racing repeats, analysis/racing.py): one look's tests of every cell
against the best (:func:`race_look`: a one-sided t on the logs with the variance pooled over the
race's cells, and the TOST of "the same"), Hochberg's adjustment, and the level of each look,
calibrated by simulating the rule over the race's looks and cells (:func:`race_alpha`; levels of
common races are a table, analysis/race_levels.py, made by benchmarks/race_levels.py). The tests'
distributions are scipy's; the rule that acts on them is analysis/racing.py."""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import numpy as np

from cmx.analysis.race_levels import LEVELS
from cmx.analysis.stats import MARGIN_PCT, MIN_N, _sps

#: The chance a whole race stops a cell no worse than the best, the race's level is calibrated to
#: (:func:`race_alpha`): below ALPHA, so that a check of a few hundred simulated races (their own
#: sampling error: ±1.1 % at 300) mostly still finds at most ALPHA. Lower costs power: at 3.5 % one
#: cell 10 % better among 5 is chosen within 10 runs a cell in 85 % of races, at 4 % in 87 %.
RACE_ERROR = 0.04
#: How the level grows over a race's looks: a look at n runs a cell of a race to ``max`` tests at
#: ``race_alpha × (n / max) ** RACE_SHAPE``. The first looks, on few runs, stop only cells far
#: worse; the last tests near a single look's level, where a small difference shows.
RACE_SHAPE = 3
#: Seeded races :func:`race_alpha` calibrates a level on; analysis/race_levels.py holds the levels
#: of common races, computed from the same number by benchmarks/race_levels.py.
RACE_SEQUENCES = 10_000
RACE_SEED = 20_261_207
#: The largest ``max`` and number of cells whose levels analysis/race_levels.py holds.
RACE_TABLE_MAX = 20


@dataclass(frozen=True)
class RaceLook:
    """One look of races at their cells, vectorised over races (axis 0) and cells (axis 1): what
    analysis/racing.py decides from. ``p``: the one-sided p that the best beats the cell (NaN for
    the best itself, a cell out of the race, or one with fewer than MIN_N runs); ``change``:
    100 × (cell / best − 1) of the geometric means (of the means when a value is ≤ 0); ``same_p``:
    the larger of the two one-sided p that the change lies within ±margin (TOST); ``t`` and ``df``:
    the statistic (positive: the best is the better) and its degrees of freedom, ``same_t`` the
    smaller TOST statistic (positive: inside the margin), for the runs a decision would take; ``n``:
    each cell's runs."""

    best: np.ndarray
    p: np.ndarray
    change: np.ndarray
    same_p: np.ndarray
    t: np.ndarray
    df: np.ndarray
    same_t: np.ndarray
    n: np.ndarray


def race_look(values: np.ndarray, racing: np.ndarray, better: str, margin_pct: float = MARGIN_PCT) -> RaceLook:
    """One look of a race (:class:`RaceLook`) at ``values`` [races, cells, runs] (NaN: no run; in
    round order), ``racing`` [races, cells]: the cells still in the race (the others' runs still
    count towards the spread). The best is the racing cell with the best median; every other racing
    cell is tested against it by Student's t, on the logarithms of the values when all are above 0
    (runs spread in proportion to their level, and the margin is a ratio), else on the values, with
    the variance pooled over every cell of the race (the error term of Dunnett's many-to-one
    comparisons: with 5 cells of 3 runs it has 10 degrees of freedom where one pair has 4, so the
    first look can stop a cell far worse). scipy's ``t`` distribution gives the p-values;
    ``scipy.stats.dunnett`` computes the same statistics but integrates a multivariate t for its
    own multiplicity (50 ms a look); the race's level is calibrated for it instead
    (:func:`race_alpha`)."""
    x = np.array(values, dtype=float)
    n = np.sum(~np.isnan(x), axis=-1)
    racing = np.asarray(racing, dtype=bool) & (n > 0)
    positive = bool(np.all(x[~np.isnan(x)] > 0))
    if positive:
        x = np.log(x)
    sign = 1.0 if better == "higher" else -1.0
    rows = np.arange(x.shape[0])
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # a cell without runs has no median, mean or spread
        medians = np.nanmedian(x, axis=-1)
        means = np.nanmean(x, axis=-1)
        squares = np.nansum((x - means[..., None]) ** 2, axis=-1)
    best = np.argmax(np.where(racing, sign * np.nan_to_num(medians, nan=-np.inf), -np.inf), axis=1)
    df = np.sum(np.where(n > 0, n - 1, 0), axis=-1).astype(float)
    with np.errstate(all="ignore"):
        pooled = np.where(df > 0, np.sum(np.where(n > 0, squares, 0), axis=-1) / df, np.nan)
        nb = n[rows, best][:, None]
        se = np.sqrt(pooled[:, None] * (1.0 / nb + 1.0 / n))
        d = means - means[rows, best][:, None]  # the cell minus the best
        t = np.where(se > 0, -sign * d / se, np.where(sign * d < 0, np.inf, 0.0))
    dfs = np.broadcast_to(df[:, None], t.shape)
    testable = racing & (n >= MIN_N) & (nb >= MIN_N)
    testable[rows, best] = False
    t_dist = _sps().t
    p = np.where(testable, t_dist.sf(t, dfs), np.nan)
    if positive:
        change = 100.0 * np.expm1(d)
        low, high = np.log1p(-margin_pct / 100), np.log1p(margin_pct / 100)
    else:
        scale = np.abs(means[rows, best])[:, None]
        with np.errstate(all="ignore"):
            change = np.where(scale > 0, 100.0 * d / scale, np.nan)
        low, high = -margin_pct / 100 * scale, margin_pct / 100 * scale
    with np.errstate(all="ignore"):
        same_t = np.fmin((d - low) / se, (high - d) / se)  # both within: the cell above its floor, below its ceiling
    same_p = np.where(testable, t_dist.sf(same_t, dfs), np.nan)
    return RaceLook(best, p, np.where(testable, change, np.nan), same_p, t, dfs, same_t, n)


def hochberg(p: np.ndarray) -> np.ndarray:
    """Hochberg's step-up adjustment of each row's p-values (NaN: not tested, left NaN): the
    adjusted p of the i-th smallest of m is the least (m − j + 1) p_(j) over j ≥ i. It holds the
    family's error for tests that move together (Sarkar 1998), as one-sided comparisons with a
    common best do; where all the cells left are worse, it stops them all at the level."""
    p = np.asarray(p, dtype=float)
    order = np.argsort(np.where(np.isnan(p), np.inf, p), axis=-1)
    ranked = np.take_along_axis(p, order, axis=-1)
    m = np.sum(~np.isnan(p), axis=-1, keepdims=True)
    scaled = np.where(np.isnan(ranked), np.inf, (m - np.arange(p.shape[-1])) * ranked)
    scaled = np.fmin(1.0, np.minimum.accumulate(scaled[..., ::-1], axis=-1)[..., ::-1])
    out = np.empty_like(p)
    np.put_along_axis(out, order, scaled, axis=-1)
    return np.where(np.isnan(p), np.nan, out)


def race_look_level(alpha: float, n: int, max_n: int) -> float:
    """The level of a race's look at ``n`` runs a cell, from its :func:`race_alpha` (RACE_SHAPE)."""
    return alpha * (min(n, max_n) / max_n) ** RACE_SHAPE


def _race_smallest(cells: int, max_n: int, sequences: int) -> np.ndarray:
    """[look n, race]: the smallest Hochberg-adjusted p of each look at n runs a cell (n from MIN_N to
    ``max_n``) of ``sequences`` seeded races of identical cells, all still racing."""
    rng = np.random.default_rng(RACE_SEED + cells)
    # as wide as the table's races at least, so that a race up to RACE_TABLE_MAX runs a cell sees the same runs
    x = np.exp(rng.standard_normal((sequences, cells, max(max_n, RACE_TABLE_MAX))))
    racing = np.ones((sequences, cells), dtype=bool)
    rows = []
    for n in range(MIN_N, max_n + 1):
        rows.append(np.nanmin(hochberg(race_look(x[:, :, :n], racing, "higher").p), axis=-1))
    return np.array(rows)


def race_level_of(smallest: np.ndarray, min_n: int, max_n: int) -> float:
    """The level of :func:`race_alpha` from :func:`_race_smallest`'s looks: the largest level whose
    looks (:func:`race_look_level`) from ``min_n`` to ``max_n`` runs a cell stop some identical
    cell in at most RACE_ERROR of the races."""
    first = max(min_n, MIN_N)
    if first > max_n:
        return 0.0
    weights = np.array([race_look_level(1.0, n, max_n) for n in range(first, max_n + 1)])[:, None]
    reached = np.sort(np.min(smallest[first - MIN_N : max_n - MIN_N + 1] / weights, axis=0))
    allowed = int(math.floor(RACE_ERROR * len(reached)))
    return float(reached[allowed - 1]) if allowed else 0.0


@functools.lru_cache(maxsize=None)
def race_alpha(min_n: int, max_n: int, cells: int = 2, sequences: int = RACE_SEQUENCES) -> float:
    """The level of a race's last look (at ``max_n`` runs a cell; earlier looks test at
    :func:`race_look_level`), so that the whole race stops a cell no worse than the best in at most
    RACE_ERROR of races (racing repeats, analysis/racing.py). A race of ``cells`` cells looks after
    every round from ``min_n`` to ``max_n`` runs a cell; each look compares the best (chosen by the
    data: the luckiest of identical cells) with every other cell, Hochberg-adjusted. Both the looks and
    the selection make a pairwise level wrong, so the level is calibrated by simulating the rule
    itself (:func:`race_look`) on ``sequences`` seeded races of identical cells. The t statistic
    does not change with the runs' mean and spread, so the level holds for any normal runs (on the
    log scale). Levels of races up to 20 cells and 20 runs a cell
    are read from analysis/race_levels.py, which benchmarks/race_levels.py computes the same way;
    other races are simulated here (seconds)."""
    cells, min_n = max(2, cells), max(min_n, MIN_N)
    known = LEVELS.get((cells, min_n), ())
    if 0 <= max_n - min_n < len(known) and sequences == RACE_SEQUENCES:
        return known[max_n - min_n]
    return race_level_of(_race_smallest(cells, max_n, sequences), min_n, max_n)
