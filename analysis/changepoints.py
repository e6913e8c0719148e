"""Change points of one series of points (a cell's metric across an experiment's nights): where its
level moved, and by how much, measured between its neighbours. Used by ``cmx trend``
(analysis/trend.py), which runs the tests of every series in one batch (analysis/statcache.py).

1. Candidates: the nights' medians (a night's runs share its machine, so the nights are the units)
   segmented by backward elimination, as apache-otava's ``merge`` does: every night starts as a
   segment, and the boundary whose test between its two neighbouring segments is weakest is
   removed, one at a time, until every boundary left is significant (:func:`segment`). Each
   boundary is tested only between its neighbours, so changes a few nights apart keep their power
   (a whole-series test against shuffled orders loses it when the series has several changes).
2. Each candidate measured between its neighbours with the rule of ``cmx compare`` on the runs.
3. The latest point against the stable nights just before it (back to the first whose runs show a
   change); and, after a regression, against the nights before it (does the regression stand?).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cmx.analysis import stats
from cmx.analysis.statcache import Found

#: The level a boundary between two neighbouring segments must reach to stay (:func:`segment`):
#: stricter than ALPHA as the boundaries left are the strongest of many (calibrated in
#: benchmarks/changepoints.py for at most 1 false change per 100 series-nights).
SEGMENT_ALPHA = 0.001
#: The fewest degrees of freedom (nights − segments) the pooled variance of :func:`boundary_ps` needs:
#: elimination merges the most alike nights first, so a variance left with one or two degrees of
#: freedom is far too small, and every boundary then looks significant.
MIN_DF = 3
#: Nights a segmentation looks at at once: a long history is cut into windows of this many nights
#: overlapping by half (each one a pure function of its medians, kept by the statistics cache, so a
#: new night segments only the last window), and their boundaries eliminated again over the whole.
SEGMENT_NIGHTS = 30
#: Nights before the latest whose runs are walked back through for the stable stretch before it
#: (:func:`_stable_start`); further back, the segmentation finds a change on its own.
STABLE_LOOK = 8
#: Points before the latest from which the latest's median must also stand out from theirs (:func:`night_p`).
GUARD_NIGHTS = 3
#: Points either side of a candidate whose runs test it (otava splits long series into windows the
#: same way): a change is judged against the nights around it, and a year of history costs a
#: test of ~90 runs a side rather than ~1,000.
WINDOW = 30
#: What the latest point alone must show to be a change the night it happens when the segmentation
#: did not find it: a difference beyond the margin. A small one (shown, inside the margin) of one
#: night is as likely the machine's night as the code's; it is found once the nights after it confirm it.
BEYOND = (stats.BETTER, stats.WORSE, stats.DIFFERS)
#: Runs a side needs for a candidate to be kept with no verdict (``n too small``): its nights chose
#: it, and a one-night side of 2 runs cannot show more; a side of one run is one measurement.
UNJUDGED_MIN_RUNS = 2
#: How a change was found: the segmentation, or the latest point against the stable nights before it.
SEGMENTED, LATEST = "segmented", "latest"


def boundary_ps(medians, edges) -> tuple[np.ndarray, np.ndarray]:
    """For each inner edge of ``edges`` (0, b₁, …, len(medians)): the two-sided p of Student's t test
    that the means of its two neighbouring segments are equal, the variance pooled over every
    segment (the residual of the one-way analysis of variance of the segments, df = nights −
    segments; the p from scipy's Student t distribution, ``scipy.special.stdtr``), and the step
    between the two means. A single night between two others is tested as well as a long segment,
    from the spread of the nights around it; p is 1 where the segments leave no degree of freedom."""
    x = np.asarray(medians, dtype=float)
    scale = float(np.mean(np.abs(x))) or 1.0
    x = (x - x.mean()) / scale  # centred and scaled: sums of squares without cancellation
    edges = np.asarray(edges)
    counts = np.diff(edges).astype(float)
    sums = np.diff(np.concatenate([[0.0], np.cumsum(x)])[edges])
    squares = np.diff(np.concatenate([[0.0], np.cumsum(x * x)])[edges])
    means = sums / counts
    step = np.abs(np.diff(means))
    df = len(x) - len(counts)
    if df < MIN_DF:
        return np.ones(len(step)), step
    residual = max(float(np.sum(squares - sums * means)), 0.0) / df
    if residual <= 1e-24:  # every segment flat: any step is a change, none is noise
        return np.where(step > 1e-12, 0.0, 1.0), step
    t = step / np.sqrt(residual * (1 / counts[:-1] + 1 / counts[1:]))
    from scipy import special  # lazily, as stats imports scipy.stats: `cmx --help` stays quick

    return np.minimum(1.0, 2 * special.stdtr(df, -t)), step


def segment(medians, alpha: float = SEGMENT_ALPHA, start=None) -> list[tuple[int, float]]:
    """Backward elimination (apache-otava's ``merge``; Matteson & James's segments tested between
    neighbours): from every night a segment (or the boundaries ``start``), the boundary with the
    largest p between its neighbouring segments (:func:`boundary_ps`; at equal p, the smallest
    step) removed, and the others tested again, until every boundary left has p ≤ ``alpha``.
    Returns (boundary, its p) of those left."""
    x = np.asarray(medians, dtype=float)
    bounds = list(range(1, len(x))) if start is None else sorted(set(start))
    while bounds:
        ps, steps = boundary_ps(x, [0, *bounds, len(x)])
        worst = int(np.lexsort((steps, -ps))[0])
        if ps[worst] <= alpha:
            return [(b, float(p)) for b, p in zip(bounds, ps)]
        del bounds[worst]
    return []


def windows(n: int) -> list[tuple[int, int]]:
    """The [start, end) of each window :func:`_candidates` segments: the whole series up to
    :data:`SEGMENT_NIGHTS` nights, else windows of that many overlapping by half, the last ending at
    the latest night."""
    if n <= SEGMENT_NIGHTS:
        return [(0, n)]
    starts = list(range(0, n - SEGMENT_NIGHTS + 1, SEGMENT_NIGHTS // 2))
    if starts[-1] != n - SEGMENT_NIGHTS:
        starts.append(n - SEGMENT_NIGHTS)
    return [(s, s + SEGMENT_NIGHTS) for s in starts]


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
            if isinstance(request, SegmentTest):
                request = steps.send(request.answer())
                continue
            if isinstance(request, list):
                asked = [(b, a, better, margin_pct, full) for b, a, full in request]
                request = steps.send(shown_many(asked) if test is shown else [test(*t) for t in asked])
                continue
            before, after, full = request
            request = steps.send(test(before, after, better, margin_pct, full))
    except StopIteration as done:
        return done.value


@dataclass(frozen=True)
class SegmentTest:
    """A request of :func:`change_steps` for :func:`segment` of these medians (one window's) at
    ``alpha``, answered with [[boundary, p], …]: a pure function of the medians, so the statistics cache keeps
    it and a night segments again only the windows it touches."""

    medians: tuple[float, ...]
    alpha: float

    def answer(self) -> list[list]:
        return [[b, p] for b, p in segment(np.asarray(self.medians), self.alpha)]


def _candidates(med: np.ndarray):
    """The boundaries of every window's segmentation (:func:`windows`), eliminated again over the
    whole series (a boundary a window's edge cut a segment for is not one of the whole)."""
    found: set[int] = set()
    for start, end in windows(len(med)):
        for b, _ in (yield SegmentTest(tuple(med[start:end].tolist()), SEGMENT_ALPHA)):
            found.add(start + int(b))
    return [b for b, _ in segment(med, SEGMENT_ALPHA, start=found)]


def _kept(result: stats.Comparison) -> bool:
    """Whether a candidate's runs, between its neighbours, keep it: a change shown, or too few runs a
    side for any verdict, at least :data:`UNJUDGED_MIN_RUNS`."""
    if result.verdict == stats.N_TOO_SMALL:
        return min(result.baseline.n, result.contender.n) >= UNJUDGED_MIN_RUNS
    return result.verdict in stats.SHOWN


def _stable_start(runs: list[list[float]], since: int, last: int):
    """The first of the stable nights just before ``last``: walking back from the night before it, up
    to :data:`STABLE_LOOK` nights and never past ``since`` (the last change found before it), the
    first night whose runs show a change (:data:`stats.SHOWN`) against the runs of the nights after
    it ends the stretch; the nights before it are not the latest's baseline, found or not (a short
    history cannot tell a change from the nights' medians alone, its runs can). No night shown: the
    nights since ``since``."""
    nights = list(range(last - 2, max(since, last - STABLE_LOOK) - 1, -1))
    if not nights:
        return since
    answers = yield [(_pooled(runs, s, s + 1), _pooled(runs, s + 1, last), False) for s in nights]
    return next((s + 1 for s, answer in zip(nights, answers) if answer is not None), since)


def change_steps(runs: list[list[float]], medians: list[float | None], full_latest: bool = False):
    """:func:`change_points` as a generator, so the tests of many series can run in one batch
    (analysis/statcache.py): it yields each question it needs answered, a :class:`SegmentTest` of some
    medians (sent :meth:`SegmentTest.answer`), a test of runs (before, after, full: sent a
    Comparison when shown or ``full``, else None) or a list of such tests (sent the list of their
    answers), and returns a :class:`Found` whose changes are
    (index, comparison, method, the p of the test that chose it).

    1. Candidates: :func:`_candidates` over the medians of the points before the latest.
    2. Each candidate measured between its neighbours (the latest point left out): the runs since
       the candidate before it against the runs up to the one after it (at most WINDOW points a
       side), all asked at once; while any is not kept (:func:`_kept`), the one with the smallest
       step between its neighbours' medians is dropped and its neighbours measured again. Each
       kept change's p is its boundary's between its final neighbours (:func:`boundary_ps`): the
       test that chose it.
    3. The latest point against the stable nights just before it (:func:`_stable_start`), kept as a
       change when shown beyond the margin (:data:`BEYOND`) (or, with too few runs for a verdict
       (:func:`_kept`), when its boundary after the history's segments has p ≤
       :data:`SEGMENT_ALPHA`) and, from :data:`GUARD_NIGHTS` points on, when its median lies
       outside what those nights spread over (:func:`night_p`, its p the one that chose it): a
       night's runs share its machine's state.
    4. When the last change before the latest point was worse: the latest point against the runs
       before that change (``standing``: the gate fails while the regression stands)."""
    keep = [i for i, m in enumerate(medians) if m is not None]  # points with no ok run have no median
    if not keep:
        return Found([])
    med = np.asarray([medians[i] for i in keep])
    kept_runs = [runs[i] for i in keep]
    last = len(keep) - 1
    # The history before the latest night is segmented; the latest night is judged on its own (3.): as
    # a one-night segment it would be tested from the nights' spread alone, and, dropped when just
    # short of the level, merged into the segment before it, whose pooled variance then hides every
    # other change of a short history.
    cands = (yield from _candidates(med[:last])) if last > 1 else []
    found: dict[int, tuple[stats.Comparison, str]] = {}
    while cands:
        bounds = [0, *cands, last]
        sides = [_window(kept_runs, bounds[j - 1], tau, bounds[j + 1]) for j, tau in enumerate(cands, 1)]
        results = dict(zip(cands, (yield [(before, after, True) for before, after in sides])))
        weak = [tau for tau in cands if not _kept(results[tau])]
        if not weak:
            found = {tau: (results[tau], SEGMENTED) for tau in cands}
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
    chosen = dict(zip(sorted(found), boundary_ps(med[:last], [0, *sorted(found), last])[0].tolist())) if found else {}
    latest = None
    if last > 0:
        start = yield from _stable_start(kept_runs, max([i for i in found if i < last], default=0), last)
        before, after = _window(kept_runs, start, last, last + 1)
        latest = yield (before, after, full_latest or len(after) < stats.MIN_N)
        if latest is not None and latest.verdict in BEYOND:
            guard = night_p(med[start:last].tolist(), float(med[last]))
            if guard is None or guard <= stats.ALPHA:
                found[last] = (latest, LATEST)
                chosen[last] = latest.p_value if guard is None else guard
        elif latest is not None and latest.verdict == stats.N_TOO_SMALL and _kept(latest):
            # too few runs that night for a verdict: kept when its median stands out as a boundary
            # of the history's segments would (:func:`boundary_ps`, at :data:`SEGMENT_ALPHA`)
            p = float(boundary_ps(med, [0, *sorted(found), last, last + 1])[0][-1])
            if p <= SEGMENT_ALPHA:
                found[last] = (latest, LATEST)
                chosen[last] = p
    earlier = sorted(i for i in found if i < last)
    standing = None
    if earlier and found[earlier[-1]][0].verdict == stats.WORSE:  # is that regression still there?
        at, since = earlier[-1], earlier[-2] if len(earlier) > 1 else 0
        standing = yield (_pooled(kept_runs, max(since, at - WINDOW), at), kept_runs[last], True)
    return Found([(keep[i], r, how, chosen[i]) for i, (r, how) in sorted(found.items())], latest, standing)
