"""``cmx trend``: each cell's metrics across the points of an experiment's history (data access and
statistics; the formatting is in :mod:`cmx.analysis.trend_format`).

A point is one sweep (a sweep resumed after an interruption and the sweeps that resumed it are one
point), or, with ``by="tag.KEY"``, every sweep tagged with one value of KEY (in the order the values
first ran). Each point: n, median and 95 % interval of its ok runs (:func:`stats.summarize_many`,
the same numbers as ``stats.summarize``).

Change points: E-divisive means (Matteson & James 2014, the method of apache-otava and MongoDB's
signal-processing-algorithms; neither installs beside this numpy/scipy, so it is built here on
numpy with scipy's energy distance as its statistic). Binary segmentation picks, over the segments
between the changes found so far, the split of the points' medians with the largest
``n1·n2/n · energy_distance(left, right)²``; as otava tests its candidate with a two-sample test of
the two segments, cmx tests it with the one rule of ``cmx compare`` (:func:`stats.compare_samples`)
on the *runs* of the segment's points either side (at most :data:`WINDOW` points a side), and keeps
it when shown better, worse or different, else stops. A change on the latest point is flagged the
night it happens: its runs are always also compared with the runs since the last change before it
(at most :data:`WINDOW` points).
"""
from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from cmx.analysis import fingerprint, statcache, stats
from cmx.analysis.compare import Selection, SelectionError, selection_where
from cmx.engine.results import metricdefs

#: Verdicts that make a candidate a change (shown different, in a direction or not).
SHOWN = (stats.BETTER, stats.WORSE, stats.DIFFERS)
#: Points either side of a candidate whose runs test it (otava splits long series into windows the
#: same way): a change is judged against the nights around it, and a year of history costs a
#: test of ~90 runs a side rather than ~1,000.
WINDOW = 30
#: How a change was found: the E-divisive split, or the latest point against the history since the last change.
EDIVISIVE, LATEST = "e-divisive", "latest"


@dataclass(frozen=True)
class Change:
    index: int                   # the first point after the change
    at: str
    comparison: stats.Comparison  # the runs before against the runs from ``at`` (within its segment)
    method: str


@dataclass
class Series:
    cell_id: str
    metric: str
    better: str
    ats: list[str]
    runs: list[list[float]]      # the ok runs' values, per point
    summaries: list[stats.Summary] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)


@dataclass
class TrendResult:
    experiment: str
    revision: int | None
    by: str
    series: list[Series]
    cells: dict[str, dict] = field(default_factory=dict)  # cell_id → its dimension values (for labels)
    #: Fingerprint facts that changed along the points (cmx.analysis.fingerprint.changes), for stderr.
    warnings: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- change points


def split_scores(medians: np.ndarray) -> np.ndarray:
    """E-divisive's statistic for every split of ``medians`` (index τ: left ``[:τ]``, right ``[τ:]``;
    entry 0 is -inf): ``n1·n2/n · (2·E|X−Y| − E|X−X'| − E|Y−Y'|)``, the squared energy distance of
    scipy.stats.energy_distance scaled as Matteson & James do, for all τ at once from prefix sums."""
    x = np.asarray(medians, dtype=float)
    n = len(x)
    scores = np.full(n, -np.inf)
    if n < 2:
        return scores
    d = np.abs(x[:, None] - x[None, :])
    p = np.zeros((n + 1, n + 1))
    p[1:, 1:] = d.cumsum(0).cumsum(1)
    tau = np.arange(1, n)
    n1, n2 = tau.astype(float), (n - tau).astype(float)
    within_left = p[tau, tau]
    across = p[tau, n] - within_left
    within_right = p[n, n] - within_left - 2 * across
    energy = 2 * across / (n1 * n2) - within_left / n1 ** 2 - within_right / n2 ** 2
    scores[1:] = n1 * n2 / n * energy
    return scores


def _pooled(runs: list[list[float]], start: int, end: int) -> list[float]:
    return [v for point in runs[start:end] for v in point]


def shown(before: list[float], after: list[float], better: str, margin_pct: float) -> stats.Comparison | None:
    """The comparison of the runs ``before`` and ``after`` a candidate when it shows a change."""
    return shown_many([(before, after, better, margin_pct)])[0]


def shown_many(tests: list[tuple[list[float], list[float], str, float]]) -> list[stats.Comparison | None]:
    """:func:`shown` of each (before, after, better, margin_pct): the Mann-Whitney tests of all in one
    batch (:func:`stats.mann_whitney_pairs`), then the comparisons of those whose p could show a change
    (:func:`stats.compare_pairs`, the rule of ``cmx compare``), the same answers as one by one."""
    out: list[stats.Comparison | None] = [None] * len(tests)
    sized = [i for i, (before, after, _, _) in enumerate(tests) if min(len(before), len(after)) >= stats.MIN_N]
    ps = stats.mann_whitney_pairs([tests[i][:2] for i in sized])
    low = [i for i, p in zip(sized, ps) if not p > stats.ALPHA]  # cheap first: no verdict of SHOWN has p above ALPHA
    for margin in dict.fromkeys(tests[i][3] for i in low):
        rows = [i for i in low if tests[i][3] == margin]
        for i, result in zip(rows, stats.compare_pairs([tests[i][:3] for i in rows], margin_pct=margin)):
            out[i] = result if result.verdict in SHOWN else None
    return out


def _window(runs, start: int, tau: int, end: int) -> tuple[list[float], list[float]]:
    """The runs of points [start, tau) and [tau, end), at most WINDOW points a side."""
    return _pooled(runs, max(start, tau - WINDOW), tau), _pooled(runs, tau, min(end, tau + WINDOW))


def change_points(runs: list[list[float]], medians: list[float | None], better: str,
                  margin_pct: float = stats.MARGIN_PCT, test=shown) -> list[tuple[int, stats.Comparison, str]]:
    """(index, comparison, method) of each change of a series, in order of position; each candidate
    tested by ``test(before, after, better, margin_pct)`` (:func:`shown`)."""
    steps = change_steps(runs, medians)
    try:
        before, after = next(steps)
        while True:
            before, after = steps.send(test(before, after, better, margin_pct))
    except StopIteration as done:
        return done.value


def change_steps(runs: list[list[float]], medians: list[float | None]):
    """:func:`change_points` as a generator, so the tests of many series can run in one batch
    (analysis/statcache.py): it yields each test it needs, (runs before, runs after), is sent the
    test's answer (a Comparison when shown, else None), and returns the changes."""
    keep = [i for i, m in enumerate(medians) if m is not None]  # points with no ok run have no median
    if len(keep) < 2:
        return []
    med = np.asarray([medians[i] for i in keep])
    kept_runs = [runs[i] for i in keep]
    found: dict[int, tuple[stats.Comparison, str]] = {}
    bounds = [0, len(keep)]
    while True:
        best = None
        for start, end in zip(bounds, bounds[1:]):
            scores = split_scores(med[start:end])
            if len(scores) < 2 or not np.isfinite(scores).any():
                continue
            tau = int(np.argmax(scores))
            if scores[tau] > 0 and (best is None or scores[tau] > best[0]):
                best = (scores[tau], start, start + tau, end)
        if best is None:
            break
        _, start, tau, end = best
        result = yield _window(kept_runs, start, tau, end)
        if result is None:
            break
        found[tau] = (result, EDIVISIVE)
        bounds = sorted({*bounds, tau})
    last = len(keep) - 1
    if last not in found:
        since = max((i for i in found if i < last), default=0)
        result = yield _window(kept_runs, since, last, last + 1)
        if result is not None:
            found[last] = (result, LATEST)
    return [(keep[i], r, how) for i, (r, how) in sorted(found.items())]


# --------------------------------------------------------------------------- data


def _latest_revision(con, experiment: str) -> int | None:
    row = con.execute("SELECT max(coalesce(revision, 1)) FROM sweeps WHERE experiment = ?", [experiment]).fetchone()
    return row[0] if row else None


def _rows(con, experiment: str, revision: int, by: str, metrics: tuple[str, ...], only: str | None):
    """(point key, cell_id, metric, [values of its ok runs in the order they started]) of each point
    of each series, the points in the order they ran; and {point key: its ok runs' ids}."""
    cond, params = "TRUE", []
    if only:
        filters = []
        for part in filter(None, only.split(",")):
            dim, eq, value = part.partition("=")
            if not eq or not dim.strip():
                raise SelectionError(f"--only {only!r}: {part!r} is not DIM=VALUE")
            filters.append((dim.strip(), value.strip()))
        cond, params = selection_where(con, Selection(experiment, tuple(filters)))
    key, key_params = "p.sweep_id", []
    if by != "sweep":
        key, key_params = "json_extract_string(p.tags, ?)", [f'$."{by.removeprefix("tag.")}"']
    names = list(metrics)
    con.execute(f"""
        CREATE OR REPLACE TEMP TABLE trend_ok AS
        WITH picked AS (SELECT r.run_id FROM runs r WHERE {cond}),
        points AS (
            SELECT w.sweep_id, {key} AS point, p.started_at AS point_started
            FROM sweeps w JOIN sweeps p ON p.sweep_id = coalesce(w.resumes, w.sweep_id)
            WHERE w.experiment = ? AND coalesce(w.revision, 1) = ?)
        SELECT pt.point, s.cell_id, m.name, m.value, min(pt.point_started) OVER (PARTITION BY pt.point) AS first_run,
               s.run_id, s.started_at
        FROM run_starts s JOIN run_ends e USING (run_id) JOIN points pt USING (sweep_id) JOIN metrics m USING (run_id)
        WHERE e.status = 'ok' AND m.value IS NOT NULL AND s.run_id IN (SELECT run_id FROM picked)
          AND (len(?::VARCHAR[]) = 0 OR list_contains(?::VARCHAR[], m.name))""",
                [*params, *key_params, experiment, revision, names, names])
    # The values come as one float column in the points' order and are cut into runs here: DuckDB
    # hands a LIST column to Python a row at a time (a year of nights: 73,000 rows, ~0.1 s more).
    keys = con.execute("""SELECT point, cell_id, name, count(*) FROM trend_ok
                          GROUP BY first_run, point, cell_id, name ORDER BY first_run, point, cell_id, name""").fetchall()
    flat = con.execute("""SELECT value::DOUBLE AS value FROM trend_ok
                          ORDER BY first_run, point, cell_id, name, started_at, run_id""").fetchnumpy()["value"].tolist()
    rows, at = [], 0
    for point, cell_id, name, k in keys:
        rows.append((point, cell_id, name, flat[at:at + k]))
        at += k
    run_ids = dict(con.execute("SELECT point, list(DISTINCT run_id) FROM trend_ok GROUP BY point").fetchall())
    con.execute("DROP TABLE trend_ok")
    return rows, run_ids


@contextmanager
def _collector_paused():
    """Python's cyclic garbage collector paused while a history is built: a year of nights is
    ~300,000 lists, numbers and summaries, none in a cycle, and the collector's passes over them
    cost ~0.2 s of CPU (a quarter of ``cmx trend``'s work)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def trend(con, experiment: str, by: str = "sweep", metrics: tuple[str, ...] = (), only: str | None = None,
          revision: int | None = None, margin_pct: float = stats.MARGIN_PCT) -> TrendResult:
    """Per cell and metric: one point per sweep (or tag value), summarized, and its changes."""
    with _collector_paused():
        return _trend(con, experiment, by, metrics, only, revision, margin_pct)


def _trend(con, experiment: str, by: str, metrics: tuple[str, ...], only: str | None, revision: int | None,
           margin_pct: float) -> TrendResult:
    if by != "sweep" and not (by.startswith("tag.") and len(by) > 4):
        raise SelectionError(f"--by {by!r}: expected sweep or tag.KEY")
    revision = revision or _latest_revision(con, experiment)
    if revision is None:
        raise SelectionError(f"no sweep of experiment {experiment!r} in this database")
    unknown = [m for m in metrics if m not in metricdefs.METRICS]
    rows, point_runs = _rows(con, experiment, revision, by, metrics, only)
    if not rows:
        what = f" with metric {', '.join(metrics)}" if metrics else ""
        raise SelectionError(f"experiment {experiment!r} (revision {revision}) has no ok runs{what}"
                             + (f" ({unknown[0]!r} is no metric cmx knows)" if unknown else "")
                             + (f" in sweeps tagged {by.removeprefix('tag.')}" if by != "sweep" else ""))
    order: dict[str, int] = {}
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for point, cell_id, name, runs in rows:
        if point is None:
            continue  # a sweep without the tag
        order.setdefault(point, len(order))
        values.setdefault((cell_id, name), {})[point] = runs
    ats = list(order)
    run_ids = {a: set(point_runs[a]) for a in ats}
    rank = {m: i for i, m in enumerate(metricdefs.METRICS)}
    series = []
    for (cell_id, name), by_point in sorted(values.items(),
                                            key=lambda kv: (kv[0][0], rank.get(kv[0][1], 1e9), kv[0][1])):
        present = [a for a in ats if a in by_point]
        series.append(Series(cell_id, name, metricdefs.get(name).better.value, present,
                             [by_point[a] for a in present]))
    missing = [m for m in metrics if not any(s.metric == m for s in series)]
    if missing:
        raise SelectionError(f"--metric {missing[0]}: no ok run of {experiment!r} (revision {revision}) has it"
                             + (" (it is no metric cmx knows)" if missing[0] in unknown else ""))
    # A finished point's numbers are computed once and read back after (analysis/statcache.py):
    # each night bootstraps only its own points.
    with statcache.Cache() as cache:
        for s, summaries in zip(series, cache.summarize_series([s.runs for s in series])):  # one batched bootstrap
            s.summaries = summaries
        found = cache.many(change_steps, [(s.runs, [x.median for x in s.summaries], s.better, margin_pct)
                                          for s in series], shown_many)
        for s, changes in zip(series, found):
            s.changes = [Change(i, s.ats[i], r, how) for i, r, how in changes]
    cells = {c: json.loads(d) if isinstance(d, str) else d for c, d in con.execute(
        "SELECT cell_id, any_value(dims) FROM run_starts WHERE experiment = ? GROUP BY cell_id",
        [experiment]).fetchall()}
    return TrendResult(experiment, revision, by, series, {s.cell_id: cells.get(s.cell_id, {}) for s in series},
                       _fingerprint_changes(con, by, ats, run_ids))


def _fingerprint_changes(con, by: str, ats: list[str], run_ids: dict[str, set[str]]) -> list[str]:
    """The facts of the environment that changed from one point to a later one (their runs')."""
    per_run = fingerprint.of_runs(con, [r for a in ats for r in run_ids[a]])
    label = "sweep {}".format if by == "sweep" else f"{by.removeprefix('tag.')}={{}}".format
    return fingerprint.changes([(label(a), fingerprint.merged(per_run, run_ids[a])) for a in ats])


def latest_verdicts(result: TrendResult) -> list[tuple[Series, Change]]:
    """The changes found at each series' latest point (what ``--fail-on worse`` gates on)."""
    return [(s, c) for s in result.series for c in s.changes if c.index == len(s.ats) - 1]


def at_sweep_end(con, experiment: str, revision: int) -> TrendResult | None:
    """What a sweep's end computes of its experiment's history: ``cmx trend EXPERIMENT`` (every cell
    and metric, one point per sweep), so that the statistics cache holds the new night's points
    (the morning's ``cmx trend`` and the report's history read them back rather than bootstrap
    them) and the night's changes can be said that night. None when the revision has fewer than
    two points, or no ok run with a metric."""
    (points,) = con.execute("SELECT count(DISTINCT coalesce(resumes, sweep_id)) FROM sweeps "
                            "WHERE experiment = ? AND coalesce(revision, 1) = ?", [experiment, revision]).fetchone()
    if points < 2:
        return None
    try:
        return trend(con, experiment, revision=revision)
    except SelectionError:
        return None
