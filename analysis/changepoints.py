"""Change points of one series of points (a cell's metric across an experiment's nights): where its
level moved, and by how much, measured between its neighbours. Used by ``cmx trend``
(analysis/trend.py), which runs the tests of every series in one batch (analysis/statcache.py).

1. Candidates: E-divisive means (Matteson & James 2014, the method of apache-otava and MongoDB's
   signal-processing-algorithms; neither installs beside this numpy/scipy) over the points'
   medians, each split kept when scipy's permutation test of the points' order finds it, the
   search going on inside every segment.
2. Each candidate measured between its neighbours with the rule of ``cmx compare`` on the runs.
3. The latest point against the runs since the last change before it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cmx.analysis import stats
from cmx.analysis.statcache import Found

#: Shuffled orders of the points that test a candidate split (:func:`split_p`), scored this many at once.
PERMUTATIONS = 999
PERMUTATION_BATCH = 250
EXACT_ORDERS = 5040  # 7 points: every order
FIRST_LOOK, FIRST_LOOK_STOP = 49, 0.25
#: Points before the latest from which the latest's median must also stand out from theirs (:func:`night_p`).
GUARD_NIGHTS = 3
#: Points either side of a candidate whose runs test it (otava splits long series into windows the
#: same way): a change is judged against the nights around it, and a year of history costs a
#: test of ~90 runs a side rather than ~1,000.
WINDOW = 30
#: What the latest point alone must show to be a change the night it happens: a difference beyond the
#: margin. A small one (shown, inside the margin) of one night is as likely the machine's night as
#: the code's; it is found among the history's changes once the nights after it confirm it.
BEYOND = (stats.BETTER, stats.WORSE, stats.DIFFERS)
#: How a change was found: the E-divisive split, or the latest point against the history since the last change.
EDIVISIVE, LATEST = "e-divisive", "latest"


def split_scores(medians: np.ndarray) -> np.ndarray:
    """E-divisive's statistic for every split of ``medians`` (index τ: left ``[:τ]``, right ``[τ:]``;
    entry 0 is -inf): ``n1·n2/n · (2·E|X−Y| − E|X−X'| − E|Y−Y'|)``, the squared energy distance of
    scipy.stats.energy_distance scaled as Matteson & James do, for all τ at once from prefix sums;
    over the last axis, so a batch of orderings is scored at once."""
    x = np.asarray(medians, dtype=float)
    n = x.shape[-1]
    scores = np.full(x.shape, -np.inf)
    if n < 2:
        return scores
    d = np.abs(x[..., :, None] - x[..., None, :])
    p = np.zeros((*x.shape[:-1], n + 1, n + 1))
    p[..., 1:, 1:] = d.cumsum(-2).cumsum(-1)
    tau = np.arange(1, n)
    n1, n2 = tau.astype(float), (n - tau).astype(float)
    within_left = p[..., tau, tau]
    across = p[..., tau, n] - within_left
    within_right = p[..., n, n][..., None] - within_left - 2 * across
    energy = 2 * across / (n1 * n2) - within_left / n1**2 - within_right / n2**2
    scores[..., 1:] = n1 * n2 / n * energy
    return scores


def split_grid(medians: np.ndarray) -> np.ndarray:
    """E-divisive's statistic as Matteson & James define it, for every split τ of ``medians[:κ]`` and
    every end κ > τ (entry [τ − 1, κ − 2]; -inf where κ ≤ τ): the right side may end before the
    series does, so a level that moved and came back (a dip) scores as high as a step. Last axis, so
    a batch of orderings is scored at once; κ = n is :func:`split_scores`."""
    x = np.asarray(medians, dtype=float)
    n = x.shape[-1]
    d = np.abs(x[..., :, None] - x[..., None, :])
    p = np.zeros((*x.shape[:-1], n + 1, n + 1))
    p[..., 1:, 1:] = d.cumsum(-2).cumsum(-1)
    tau, kappa = np.arange(1, n)[:, None], np.arange(2, n + 1)[None, :]
    n1, n2 = tau.astype(float), np.maximum(kappa - tau, 1).astype(float)
    diagonal = np.diagonal(p, axis1=-2, axis2=-1)
    within_left = diagonal[..., 1:n, None]  # p[τ, τ]
    corner = p[..., 1:n, 2 : n + 1]  # p[τ, κ], by slicing (no fancy-index copies)
    across = corner - within_left
    within_right = diagonal[..., None, 2 : n + 1] - 2 * corner + within_left
    energy = 2 * across / (n1 * n2) - within_left / n1**2 - within_right / n2**2
    return np.where(kappa > tau, n1 * n2 / (n1 + n2) * energy, -np.inf)


def best_split(medians: np.ndarray) -> tuple[int, float]:
    """(τ, its statistic) of the strongest split over every end κ (:func:`split_grid`)."""
    grid = split_grid(medians)
    tau, _ = np.unravel_index(int(np.argmax(grid)), grid.shape)
    return int(tau) + 1, float(grid.max())


def _best_split(x, axis=-1):
    grid = split_grid(np.moveaxis(x, axis, -1))
    return grid.reshape(*grid.shape[:-2], -1).max(axis=-1)


def split_p(medians: np.ndarray) -> float:
    """How often the points' order, shuffled, gives a best E-divisive split as strong as theirs: the
    significance test of a candidate split that Matteson & James and apache-otava use, on the nights
    as the units (a night's runs share its machine, so runs are not independent across nights).
    scipy's permutation test (one sample, ``pairings``: its order permuted), seeded; exact (every
    order) for up to 7 points."""
    x = np.asarray(medians, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0:
        return 1.0
    orders = math.factorial(len(x))
    if orders <= EXACT_ORDERS:
        return _permutation_p(x, orders)
    # Besag & Clifford's sequential shortcut: a first look at a few orders; only a split that may be
    # significant is tested with all PERMUTATIONS (most nights of most series have no change).
    first = _permutation_p(x, FIRST_LOOK)
    return first if first > FIRST_LOOK_STOP else _permutation_p(x, PERMUTATIONS)


def _permutation_p(x: np.ndarray, resamples: int) -> float:
    res = stats._sps().permutation_test(
        (x,),
        _best_split,
        permutation_type="pairings",
        vectorized=True,
        n_resamples=resamples,
        batch=PERMUTATION_BATCH,
        alternative="greater",
        rng=stats.SEED,
    )
    return float(res.pvalue)


def night_p(before: list[float], latest: float) -> float | None:
    """Two-sided p that the latest point's median belongs with the points' medians before it (scipy's
    two-sample t test of those medians against the one: the prediction interval of a new night),
    None below :data:`GUARD_NIGHTS` points before, where nights' own spread cannot be told."""
    if len(before) < GUARD_NIGHTS:
        return None
    if np.ptp(before) == 0:
        return 0.0 if latest != before[0] else 1.0
    return float(stats._sps().ttest_ind(before, [latest]).pvalue)


def _pooled(runs: list[list[float]], start: int, end: int) -> list[float]:
    return [v for point in runs[start:end] for v in point]


def shown(
    before: list[float], after: list[float], better: str, margin_pct: float, full: bool = False
) -> stats.Comparison | None:
    """The comparison of the runs ``before`` and ``after`` a candidate when it shows a change (any of
    :data:`stats.SHOWN`); with ``full``, whatever it shows."""
    return shown_many([(before, after, better, margin_pct, full)])[0]


def shown_many(tests: list[tuple]) -> list[stats.Comparison | None]:
    """:func:`shown` of each (before, after, better, margin_pct[, full]): the Mann-Whitney tests of all
    in one batch (:func:`stats.mann_whitney_pairs`), then the comparisons of those whose p could show
    a change, or that ask for it in ``full`` (:func:`stats.compare_pairs`, the rule of ``cmx
    compare``), the same answers as one by one."""
    out: list[stats.Comparison | None] = [None] * len(tests)
    tests = [(*t, False)[:5] for t in tests]
    sized = [i for i, (before, after, *_) in enumerate(tests) if min(len(before), len(after)) >= stats.MIN_N]
    ps = stats.mann_whitney_pairs([tests[i][:2] for i in sized])
    # cheap first: no verdict of SHOWN has p above ALPHA
    wanted = [i for i, p in zip(sized, ps) if not p > stats.ALPHA] + [i for i, t in enumerate(tests) if t[4]]
    wanted = sorted(set(wanted))
    for margin in dict.fromkeys(tests[i][3] for i in wanted):
        rows = [i for i in wanted if tests[i][3] == margin]
        for i, result in zip(rows, stats.compare_pairs([tests[i][:3] for i in rows], margin_pct=margin)):
            out[i] = result if tests[i][4] or result.verdict in stats.SHOWN else None
    return out


def _window(runs, start: int, tau: int, end: int) -> tuple[list[float], list[float]]:
    """The runs of points [start, tau) and [tau, end), at most WINDOW points a side."""
    return _pooled(runs, max(start, tau - WINDOW), tau), _pooled(runs, tau, min(end, tau + WINDOW))


def change_points(
    runs: list[list[float]],
    medians: list[float | None],
    better: str,
    margin_pct: float = stats.MARGIN_PCT,
    test=shown,
    full_latest: bool = False,
) -> Found:
    """The changes of a series, found by :func:`change_steps`, each test answered by
    ``test(before, after, better, margin_pct, full)`` (:func:`shown`)."""
    steps = change_steps(runs, medians, full_latest)
    try:
        request = next(steps)
        while True:
            if isinstance(request, SplitTest):
                request = steps.send(request.answer())
                continue
            before, after, full = request
            request = steps.send(test(before, after, better, margin_pct, full))
    except StopIteration as done:
        return done.value


@dataclass(frozen=True)
class SplitTest:
    """A request of :func:`change_steps` for :func:`split_p` of these medians (answered with its p), or,
    ``best``, for :func:`best_split` of them (answered with [τ, statistic]): both pure functions of the
    medians, so the statistics cache keeps them and a night recomputes only the segments it touches."""

    medians: tuple[float, ...]
    best: bool = False

    def answer(self):
        x = np.asarray(self.medians)
        return list(best_split(x)) if self.best else split_p(x)


def _candidates(med: np.ndarray):
    """E-divisive's binary segmentation: in each segment between the changes kept so far, the best
    split, kept when :func:`split_p` (the medians of at most :data:`WINDOW` points either side of it)
    is at most ALPHA; until no segment has one. The search goes on inside a segment whose best split
    is not kept: each of its two halves is searched at ALPHA / 2 (the two share the segment's
    ALPHA), so a change that recovered later (a dip: one split of the whole cannot separate it) is
    still found, then its other side in the segment that remains."""
    found: set[int] = set()
    searched: dict[tuple[int, int], int | None] = {}
    while True:
        bounds = [0, *sorted(found), len(med)]
        new = set()
        for start, end in zip(bounds, bounds[1:]):
            if (start, end) not in searched:
                searched[start, end] = yield from _search(med, start, end, stats.ALPHA, explore=True)
            if searched[start, end] is not None:
                new.add(searched[start, end])
        if not new:
            return sorted(found)
        found |= new


def _search(med: np.ndarray, start: int, end: int, alpha: float, explore: bool):
    """The best split of ``med[start:end]`` when significant at ``alpha``, else (``explore``) the first
    significant one of its halves' at alpha / 2, else None."""
    if end - start < 3:
        return None
    tau, score = yield SplitTest(tuple(med[start:end].tolist()), best=True)
    if not score > 0:
        return None
    tau += start
    p = yield SplitTest(tuple(med[max(start, tau - WINDOW) : min(end, tau + WINDOW)].tolist()))
    if p <= alpha:
        return tau
    if explore:
        for a, b in ((start, tau), (tau, end)):
            inner = yield from _search(med, a, b, alpha / 2, explore=False)
            if inner is not None:
                return inner
    return None


def change_steps(runs: list[list[float]], medians: list[float | None], full_latest: bool = False):
    """:func:`change_points` as a generator, so the tests of many series can run in one batch
    (analysis/statcache.py): it yields each question it needs answered, a :class:`SplitTest` of some
    medians (sent :meth:`SplitTest.answer`) or a test of runs (before, after, full: sent a Comparison
    when shown or ``full``, else None), and returns a :class:`Found`.

    1. Candidates: :func:`_candidates` over the points' medians.
    2. Each candidate measured between its neighbours: the runs since the candidate before it
       against the runs up to the one after it (at most WINDOW points a side); while any is not
       shown, the one with the smallest step between its neighbours' medians is dropped and its
       neighbours measured again.
    3. The latest point against the runs since the last change before it, kept when shown beyond the
       margin (:data:`BEYOND`) and, from :data:`GUARD_NIGHTS` points on, when its median lies outside
       what the nights before it spread over (:func:`night_p`): a night's runs share its machine's
       state."""
    keep = [i for i, m in enumerate(medians) if m is not None]  # points with no ok run have no median
    if not keep:
        return Found([])
    med = np.asarray([medians[i] for i in keep])
    kept_runs = [runs[i] for i in keep]
    last = len(keep) - 1
    cands = yield from _candidates(med)
    found: dict[int, tuple[stats.Comparison, str]] = {}
    while cands:
        bounds = [0, *cands, len(keep)]
        results = {}
        for j, tau in enumerate(cands, 1):
            before, after = _window(kept_runs, bounds[j - 1], tau, bounds[j + 1])
            results[tau] = yield (before, after, False)
        weak = [tau for tau in cands if results[tau] is None]
        if not weak:
            found = {tau: (results[tau], EDIVISIVE if tau != last else LATEST) for tau in cands}
            break
        step = {
            tau: abs(
                np.median(med[bounds[j + 1] : min(bounds[j + 2], tau + WINDOW)])
                - np.median(med[max(bounds[j], tau - WINDOW) : tau])
            )
            for j, tau in enumerate(cands)
            if tau in weak
        }
        cands.remove(min(weak, key=lambda tau: (step[tau], tau)))
    latest = found[last][0] if last in found else None
    if last > 0 and last not in found:
        since = max((i for i in found if i < last), default=0)
        before, after = _window(kept_runs, since, last, last + 1)
        latest = yield (before, after, full_latest)
        if latest is not None and latest.verdict in BEYOND:
            guard = night_p(med[max(since, last - WINDOW) : last].tolist(), float(med[last]))
            if guard is None or guard <= stats.ALPHA:
                found[last] = (latest, LATEST)
    return Found([(keep[i], r, how) for i, (r, how) in sorted(found.items())], latest)
