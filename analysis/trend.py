"""``cmx trend``: each cell's metrics across the points of an experiment's history (data access and
statistics; the formatting is in :mod:`cmx.analysis.trend_format`).

A point is one sweep (a sweep resumed after an interruption and the sweeps that resumed it are one
point), or, with ``by="tag.KEY"``, every sweep tagged with one value of KEY (in the order the values
first ran). Each point: n, median and 95 % interval of its ok runs (:func:`stats.summarize_many`,
the same numbers as ``stats.summarize``).

Change points: :mod:`cmx.analysis.changepoints` (the nights' medians segmented by backward
elimination, each boundary tested between its neighbouring segments; each change measured between its
neighbours); here, every series' tests run in one batch a round, their p adjusted together within a
group (:func:`_adjust`), and the groups (headline, other, harness, noise) set from the experiment's
headline (:mod:`cmx.analysis.headline`): only the headline gates (:mod:`cmx.analysis.trend_gate`).
"""

from __future__ import annotations

import gc
import json
from contextlib import contextmanager
from dataclasses import dataclass, field, replace


from cmx.analysis import fingerprint, noise, statcache, stats
from cmx.analysis.rules import TREND_RULE as RULE  # noqa: F401 (trend_format and the CLI read it here too)
from cmx.analysis.changepoints import (  # noqa: F401 (the search's names, read here by tests and benchmarks)
    LATEST,
    SEGMENTED,
    WINDOW,
    change_points,
    change_steps,
    shown,
    shown_many,
)
from cmx.analysis.compare import SelectionError, parse_only, selection_where
from cmx.analysis.headline import of_experiment as headline_of
from cmx.analysis.views import experiment_hint
from cmx.engine.errors import suggest
from cmx.engine.results import metricdefs


@dataclass(frozen=True)
class Change:
    index: int  # the first point after the change
    at: str
    comparison: stats.Comparison  # the segment before (since the change before it) against the one after
    method: str
    p_adjusted: float | None = None  # Benjamini-Hochberg over the night's tests of its group (:func:`_adjust`)
    p_chosen: float | None = None  # the p of the test that chose it (changepoints.change_steps); None: the runs' p
    noise: str | None = None  # how the two sides' hosts were loaded, when that differs (analysis/noise.py)


@dataclass
class Series:
    cell_id: str
    metric: str
    better: str
    ats: list[str]
    runs: list[list[float]]  # the ok runs' values, per point
    summaries: list[stats.Summary] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    group: str = metricdefs.OTHER  # headline, other, harness, noise (metricdefs.group_of)
    #: The latest point against the stable points just before it (headline series: always;
    #: others: when it showed a change), whatever it showed: what ``--fail-on inconclusive`` reads.
    latest: stats.Comparison | None = None
    #: When the last change before the latest point was worse: the latest point against the points
    #: before that change (the gate keeps failing while it shows worse).
    standing: stats.Comparison | None = None


@dataclass
class TrendResult:
    experiment: str
    revision: int | None
    by: str
    series: list[Series]
    cells: dict[str, dict] = field(default_factory=dict)  # cell_id → its dimension values (for labels)
    #: Fingerprint facts that changed along the points (cmx.analysis.fingerprint.changes), for stderr.
    warnings: list[str] = field(default_factory=list)
    #: The dimensions the experiment's definition names (its ``fixed:`` and ``matrix:`` keys).
    named: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- data


def _latest_revision(con, experiment: str) -> int | None:
    row = con.execute("SELECT max(coalesce(revision, 1)) FROM sweeps WHERE experiment = ?", [experiment]).fetchone()
    return row[0] if row else None


def _rows(con, experiment: str, revision: int, by: str, metrics: tuple[str, ...], only: str | None):
    """(point key, cell_id, metric, [values of its ok runs in the order they started]) of each point
    of each series, the points in the order they ran; and {(point key, cell_id): its ok runs' ids}."""
    cond, params = "TRUE", []
    if only:
        cond, params = selection_where(con, parse_only(experiment, only))
    key, key_params = "p.sweep_id", []
    if by != "sweep":
        key, key_params = "json_extract_string(p.tags, ?)", [f'$."{by.removeprefix("tag.")}"']
    names = list(metrics)
    con.execute(
        f"""
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
        [*params, *key_params, experiment, revision, names, names],
    )
    # The values come as one float column in the points' order and are cut into runs here: DuckDB
    # hands a LIST column to Python a row at a time (a year of nights: 73,000 rows, ~0.1 s more).
    keys = con.execute("""SELECT point, cell_id, name, count(*) FROM trend_ok
                          GROUP BY first_run, point, cell_id, name
                          ORDER BY first_run, point, cell_id, name""").fetchall()
    flat = (
        con.execute("""SELECT value::DOUBLE AS value FROM trend_ok
                          ORDER BY first_run, point, cell_id, name,
                                   started_at, run_id""")
        .fetchnumpy()["value"]
        .tolist()
    )
    rows, at = [], 0
    for point, cell_id, name, k in keys:
        rows.append((point, cell_id, name, flat[at : at + k]))
        at += k
    run_ids = {
        (point, cell): ids
        for point, cell, ids in con.execute(
            "SELECT point, cell_id, list(DISTINCT run_id) FROM trend_ok GROUP BY point, cell_id"
        ).fetchall()
    }
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


def trend(
    con,
    experiment: str,
    by: str = "sweep",
    metrics: tuple[str, ...] = (),
    only: str | None = None,
    revision: int | None = None,
    margin_pct: float = stats.MARGIN_PCT,
) -> TrendResult:
    """Per cell and metric: one point per sweep (or tag value), summarized, and its changes."""
    with _collector_paused():
        return _trend(con, experiment, by, metrics, only, revision, margin_pct)


def _trend(
    con, experiment: str, by: str, metrics: tuple[str, ...], only: str | None, revision: int | None, margin_pct: float
) -> TrendResult:
    if by != "sweep" and not (by.startswith("tag.") and len(by) > 4):
        raise SelectionError(f"--by {by!r}: expected sweep or tag.KEY")
    revision = revision or _latest_revision(con, experiment)
    if revision is None:
        raise SelectionError(
            f"no sweep of experiment {experiment!r} in this database" + experiment_hint(con, experiment)
        )
    unknown = [m for m in metrics if m not in metricdefs.METRICS]
    rows, point_runs = _rows(con, experiment, revision, by, metrics, only)
    if not rows:
        what = f" with metric {', '.join(metrics)}" if metrics else ""
        raise SelectionError(
            f"experiment {experiment!r} (revision {revision}) has no ok runs{what}"
            + (
                f" ({unknown[0]!r} is no metric cmx knows" + suggest(unknown[0], metricdefs.METRICS) + ")"
                if unknown
                else ""
            )
            + (f" in sweeps tagged {by.removeprefix('tag.')}" if by != "sweep" else "")
        )
    order: dict[str, int] = {}
    values: dict[tuple[str, str], dict[str, list[float]]] = {}
    for point, cell_id, name, runs in rows:
        if point is None:
            continue  # a sweep without the tag
        order.setdefault(point, len(order))
        values.setdefault((cell_id, name), {})[point] = runs
    ats = list(order)
    run_ids = {a: set() for a in ats}
    for (point, _), ids in point_runs.items():
        if point in run_ids:
            run_ids[point].update(ids)
    rank = {m: i for i, m in enumerate(metricdefs.METRICS)}
    series = []
    for (cell_id, name), by_point in sorted(
        values.items(), key=lambda kv: (kv[0][0], rank.get(kv[0][1], 1e9), kv[0][1])
    ):
        present = [a for a in ats if a in by_point]
        series.append(Series(cell_id, name, metricdefs.get(name).better.value, present, [by_point[a] for a in present]))
    missing = [m for m in metrics if not any(s.metric == m for s in series)]
    if missing:
        raise SelectionError(
            f"--metric {missing[0]}: no ok run of {experiment!r} (revision {revision}) has it"
            + (
                " (it is no metric cmx knows" + suggest(missing[0], metricdefs.METRICS) + ")"
                if missing[0] in unknown
                else ""
            )
        )
    headline = headline_of(con, experiment, revision)
    for s in series:
        s.group = metricdefs.group_of(s.metric, headline)
    series.sort(key=lambda s: metricdefs.GROUPS.index(s.group))  # the headline first; stable within a group
    # A finished point's numbers are computed once and read back after (analysis/statcache.py):
    # each night bootstraps only its own points.
    with statcache.Cache() as cache:
        for s, summaries in zip(series, cache.summarize_series([s.runs for s in series])):  # one batched bootstrap
            s.summaries = summaries
        found = cache.many(
            change_steps,
            [
                (s.runs, [x.median for x in s.summaries], s.better, margin_pct, s.group == metricdefs.HEADLINE)
                for s in series
            ],
            shown_many,
        )
        for s, f in zip(series, found):
            s.changes = [Change(i, s.ats[i], r, how, p_chosen=p) for i, r, how, p in f.changes]
            s.latest = f.latest
            s.standing = f.standing
    _adjust(series)
    _label_noise(con, series, point_runs)
    cells = {
        c: json.loads(d) if isinstance(d, str) else d
        for c, d in con.execute(
            "SELECT cell_id, any_value(dims) FROM run_starts WHERE experiment = ? GROUP BY cell_id", [experiment]
        ).fetchall()
    }
    return TrendResult(
        experiment,
        revision,
        by,
        series,
        {s.cell_id: cells.get(s.cell_id, {}) for s in series},
        _fingerprint_changes(con, by, ats, run_ids),
        _named_dimensions(con, experiment, revision),
    )


def _named_dimensions(con, experiment: str, revision: int) -> list[str]:
    """The keys of the ``fixed:`` and ``matrix:`` of the revision's latest sweep's definition."""
    row = con.execute(
        "SELECT definition FROM sweeps WHERE experiment = ? AND coalesce(revision, 1) = ? "
        "ORDER BY started_at DESC LIMIT 1",
        [experiment, revision],
    ).fetchone()
    definition = json.loads(row[0]) if row and isinstance(row[0], str) else (row[0] if row else None) or {}
    return [k for part in ("fixed", "matrix") for k in (definition.get(part) or {}) if isinstance(k, str)]


def _adjust(series: list[Series]) -> None:
    """False alarms held down across the night: the p of the test that chose each change found (its
    boundary between its neighbouring segments, or the latest night against the nights before it),
    with one test more for each series' latest point, adjusted together within each group
    (Benjamini-Hochberg, scipy's ``false_discovery_control``); a change whose adjusted p is above
    ALPHA is dropped. A latest test that showed nothing counts as p = 1: with BH, tests above ALPHA
    change no decision below it."""
    for group in metricdefs.GROUPS:
        members = [s for s in series if s.group == group]
        ps = [c.comparison.p_value if c.p_chosen is None else c.p_chosen for s in members for c in s.changes]
        tests = len(ps) + sum(
            1 for s in members if len(s.ats) > 1 and not any(c.index == len(s.ats) - 1 for c in s.changes)
        )
        if not ps:
            continue
        adjusted = iter(stats._sps().false_discovery_control([*ps, *[1.0] * (tests - len(ps))]).tolist())
        for s in members:
            s.changes = [replace(c, p_adjusted=q) for c, q in zip(s.changes, adjusted)]
            s.changes = [c for c in s.changes if c.p_adjusted <= stats.ALPHA]


def _label_noise(con, series: list[Series], run_ids: dict[tuple[str, str], list[str]]) -> None:
    """Beside each change, how the hosts' load from outside the run differed between its two sides
    (:func:`cmx.analysis.noise.differs`, over the cell's runs of the points either side that
    measured it): noise labels a change, it never hides one. Changes of one cell at the same points
    share one answer."""
    said: dict[tuple, str | None] = {}
    for s in series:
        at = [c.index for c in s.changes]
        labelled = []
        for j, c in enumerate(s.changes):
            start = at[j - 1] if j else 0
            end = at[j + 1] if j + 1 < len(at) else len(s.ats)
            sides = (
                s.cell_id,
                tuple(s.ats[max(start, c.index - WINDOW) : c.index]),
                tuple(s.ats[c.index : min(end, c.index + WINDOW)]),
            )
            if sides not in said:
                said[sides] = noise.differs(
                    con,
                    [r for a in sides[1] for r in run_ids.get((a, s.cell_id), ())],
                    [r for a in sides[2] for r in run_ids.get((a, s.cell_id), ())],
                )
            labelled.append(replace(c, noise=said[sides]))
        s.changes = labelled


def _fingerprint_changes(con, by: str, ats: list[str], run_ids: dict[str, set[str]]) -> list[str]:
    """The facts of the environment that changed from one point to a later one (their runs')."""
    per_run = fingerprint.of_runs(con, [r for a in ats for r in run_ids[a]])
    label = "sweep {}".format if by == "sweep" else f"{by.removeprefix('tag.')}={{}}".format
    return fingerprint.changes([(label(a), fingerprint.merged(per_run, run_ids[a])) for a in ats])


def latest_verdicts(result: TrendResult, groups: tuple[str, ...] = metricdefs.GROUPS) -> list[tuple[Series, Change]]:
    """The changes found at each series' latest point, of series in ``groups`` (``--fail-on worse``
    gates on the headline's)."""
    return [(s, c) for s in result.series if s.group in groups for c in s.changes if c.index == len(s.ats) - 1]


def at_sweep_end(con, experiment: str, revision: int) -> TrendResult | None:
    """What a sweep's end computes of its experiment's history: ``cmx trend EXPERIMENT`` of the headline
    metrics (one point per sweep), so that the statistics cache holds the new night's points of the
    series that gate (the morning's ``cmx trend`` and the report's history read them back) and the
    night's changes can be said that night; every metric when the experiment has no headline (a
    user's workload class). None when the revision has fewer than two points, or no ok run with a
    metric."""
    if history_points(con, experiment, revision) < 2:
        return None
    present = {
        name
        for (name,) in con.execute(
            "SELECT DISTINCT m.name FROM metrics m JOIN run_starts s USING (run_id) JOIN sweeps w USING (sweep_id) "
            "WHERE s.experiment = ? AND coalesce(w.revision, 1) = ?",
            [experiment, revision],
        ).fetchall()
    }
    headline = tuple(sorted(headline_of(con, experiment, revision) & present))
    try:
        return trend(con, experiment, revision=revision, metrics=headline)
    except SelectionError:
        return None


def history_points(con, experiment: str, revision: int) -> int:
    """The points of a revision's history (a sweep and those that resumed it are one)."""
    (points,) = con.execute(
        "SELECT count(DISTINCT coalesce(resumes, sweep_id)) FROM sweeps "
        "WHERE experiment = ? AND coalesce(revision, 1) = ?",
        [experiment, revision],
    ).fetchone()
    return points
