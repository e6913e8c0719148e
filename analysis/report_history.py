"""The report's history charts: when an experiment's revision has more than one sweep (a point of
history: a sweep and the sweeps that resumed it), one chart per headline metric drawing each
cell's points with their 95 % intervals and the change points, as ``cmx trend`` finds them
(analysis/trend.py computes every number; this module only arranges them for the chart). Each point
carries its noise (the hosts' load from outside the run, analysis/noise.py) and each change the
label saying the noise differs across it."""

from __future__ import annotations

from cmx.analysis import charts, legend, noise
from cmx.analysis.chartspec import Chart
from cmx.analysis.rules import TREND_RULE
from cmx.analysis.trend import history_points, trend
from cmx.engine.results import metricdefs
from cmx.workloads.vocab import metrics as M


def history_charts(
    con,
    experiment: str,
    revision: int,
    cells: list[dict],
    varying: list[str],
    headline: tuple[str, ...],
    caption: str = "",
    by: str = "sweep",
) -> list[Chart]:
    """One chart per metric of ``headline`` (with a better direction) that the sweeps measured, one
    point per sweep or per value of a tag (``by``: ``tag.KEY``, as ``cmx trend --by``); none when the
    revision has a single point of history."""
    judged = tuple(
        m for m in headline if m in metricdefs.METRICS and metricdefs.get(m).better is not metricdefs.Better.NEITHER
    )
    if not judged or history_points(con, experiment, revision) < 2:
        return []
    present = {
        m
        for (m,) in con.execute(
            "SELECT DISTINCT name FROM metrics JOIN runs USING (run_id) WHERE experiment = ? AND revision = ? "
            "AND value IS NOT NULL AND name IN (SELECT unnest(?::VARCHAR[]))",
            [experiment, revision, list(judged + M.NOISE_METRICS)],
        ).fetchall()
    }
    judged = tuple(m for m in judged if m in present)
    if not judged:
        return []
    noisy = tuple(m for m in M.NOISE_METRICS if m in present and m not in judged)
    result = trend(con, experiment, by=by, metrics=judged + noisy, revision=revision)
    noise_of = _noise_by_point(result.series)
    by_id = {c["cell_id"]: c for c in cells}
    ats = list(dict.fromkeys(a for s in result.series for a in s.ats))
    if len(ats) < 2:
        return []
    out = []
    for metric in judged:
        rows = []
        for s in (s for s in result.series if s.metric == metric):
            cell = by_id.get(s.cell_id, {})
            changes = {c.index: c for c in s.changes}
            for i, (at, summary) in enumerate(zip(s.ats, s.summaries)):
                change, here = changes.get(i), noise_of.get((s.cell_id, at), {})
                before = noise_of.get((s.cell_id, s.ats[i - 1]), {}) if i else {}
                rows.append(
                    {
                        "cell": cell.get("label", s.cell_id),
                        "at": at,
                        "median": summary.median,
                        "low": summary.low,
                        "high": summary.high,
                        "n": summary.n,
                        **{d: cell.get(d) for d in varying},
                        "change": None if change is None else _said(change.comparison),
                        "p_value": None if change is None else change.comparison.p_value,
                        "verdict": None if change is None else change.comparison.verdict,
                        "noise": noise.describe(here),
                        # trend's own label (its segments' runs) where it gives one, else the neighbours'
                        "noise_change": None
                        if change is None
                        else (change.noise or noise.differs_values(before, here)),
                    }
                )
        if not rows:
            continue
        series = legend.assign(rows, varying)
        found = sum(r["change"] is not None for r in rows)
        label = metricdefs.get(metric).label
        note = (
            f"One point per {'sweep' if by == 'sweep' else by + ' value'} ({len(ats)}), in the order they ran: "
            "the median of the cell's ok runs, bars "
            f"its 95 % interval. Red triangles: the {found} change point(s) cmx trend finds, labelled with the "
            "change; each point's tooltip gives the hosts' noise (CPU used outside the run), and a change's "
            f"says when it differs from the point before. {series.caption()} {caption} {TREND_RULE}."
        )
        along = "sweeps" if by == "sweep" else by
        spec = charts.history(rows, ats, label, series, f"{label} across {along}", by=by).to_dict()
        out.append(Chart(f"history_{metric}", f"History of {label}", " ".join(note.split()), spec))
    return out


def _noise_by_point(series) -> dict[tuple[str, str], dict[str, list[float]]]:
    """(cell_id, at) → {noise metric: its runs' values}, from the trend's noise series."""
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for s in series:
        if s.metric in M.NOISE_METRICS:
            for at, runs in zip(s.ats, s.runs):
                out.setdefault((s.cell_id, at), {})[s.metric] = runs
    return out


def _said(comparison) -> str:
    return comparison.verdict if comparison.change_pct is None else f"{comparison.change_pct:+.1f} %"
