"""What ``cmx trend --fail-on`` and a sweep's end read of a trend (analysis/trend.py): each headline
series' latest point, a regression that still stands, and each cell named by its dimensions."""

from __future__ import annotations

from cmx.analysis import gate, stats
from cmx.analysis.changepoints import BEYOND
from cmx.analysis.trend import Change, Series, TrendResult
from cmx.engine.results import metricdefs


def cell_names(result: TrendResult) -> dict[str, str]:
    """Each cell as the gate and a sweep's end name it: its dimensions that differ between the
    result's cells (``pool=threads``); when none differ, those the experiment's definition names
    (its ``fixed:`` and ``matrix:``), else every dimension but the workload's params; its id only
    when it has none."""
    keys = sorted({k for dims in result.cells.values() for k in dims})
    varying = [k for k in keys if len({repr(d.get(k)) for d in result.cells.values()}) > 1]
    varying = varying or [k for k in keys if k in result.named] or [k for k in keys if not k.startswith("params.")]
    return {
        cell: " ".join(f"{k}={dims[k]}" for k in varying if k in dims) or cell for cell, dims in result.cells.items()
    }


def _pct(r: stats.Comparison) -> str:
    return "" if r.change_pct is None else f" {r.change_pct:+.1f}%"


def standing(s: Series) -> Change | None:
    """The regression that still stands at a series' latest point: the last change before it, when
    that was worse, no change was found at the latest point, and the latest point is still shown
    worse than the points before that change (``Series.standing``)."""
    last = len(s.ats) - 1
    before = [c for c in s.changes if c.index < last]
    if any(c.index == last for c in s.changes) or not before or before[-1].comparison.verdict != stats.WORSE:
        return None
    return before[-1] if s.standing is not None and s.standing.verdict == stats.WORSE else None


def latest_gate(result: TrendResult) -> list[gate.Judged]:
    """What ``--fail-on`` reads: each headline series' latest point, judged against the stable nights
    just before it (back to the first whose runs show a change, changepoints._stable_start):

    - a change found there: its verdict (worse fails; small, shown inside the margin, never does);
    - else, when the last change before it was worse and the latest point is still shown worse than
      the nights before that change (the regression stands): worse, naming that change;
    - else its test against those nights: what it showed, a difference beyond the margin that the
      nights' spread or the false-discovery control did not keep reading inconclusive (could not
      tell); a small one stays small."""
    names = cell_names(result)
    judged = []
    for s in result.series:
        if s.group != metricdefs.HEADLINE:
            continue
        last = len(s.ats) - 1
        label = f"{s.metric} of {names.get(s.cell_id, s.cell_id)} at {s.ats[-1]}"
        at_latest = [c for c in s.changes if c.index == last]
        stands = standing(s)
        if at_latest:
            r = at_latest[0].comparison
            judged.append(gate.Judged(label + _pct(r), r.verdict, r.baseline.n, r.contender.n))
        elif stands is not None:
            r = s.standing
            what = f"{label}{_pct(r)} (worse since {stands.at})"
            judged.append(gate.Judged(what, stats.WORSE, r.baseline.n, r.contender.n))
        elif s.latest is not None:
            verdict = stats.INCONCLUSIVE if s.latest.verdict in BEYOND else s.latest.verdict
            judged.append(gate.Judged(label, verdict, s.latest.baseline.n, s.latest.contender.n))
        else:
            judged.append(gate.Judged(label, stats.N_TOO_SMALL, s.summaries[-1].n, 0))
    return judged
