"""The trade-off charts of the report's "Which configuration?" (issue 28): the objective against
peak PSS, and p99 latency against consume rate, one point per cell (its medians), the Pareto front
(analysis/recommend.py's rule) marked and joined. They reuse the medians the report's cells already
hold and the cells the recommendation kept: a point per cell, no statistics recomputed."""

from __future__ import annotations

from cmx.analysis import charts
from cmx.analysis.recommend import MAXIMIZE, MINIMIZE, Objective, Recommendation, pareto
from cmx.analysis.chartspec import Chart
from cmx.analysis.units import MIB, fmt
from cmx.engine.results import metricdefs
from cmx.workloads.vocab import metrics as M

MEMORY, RATE, P99 = M.PEAK_PSS_BYTES, M.CONSUME_RATE, M.LATENCY_P99_S


def _axis(metric: str, values: list[float]) -> tuple[float, str]:
    """(divisor, unit) that puts ``values`` in units people read on an axis: MiB, ms, or the metric's."""
    unit = metricdefs.get(metric).unit
    if unit == "bytes":
        return MIB, "MiB"
    if unit == "s" and values and max(values) < 1:
        return 1e-3, "ms"
    return 1.0, unit


def _pairs(first: Objective) -> list[tuple[Objective, Objective, str]]:
    """(y, x, chart name): the objective against peak PSS (against consume rate when the objective
    is peak PSS itself), and p99 latency against consume rate."""
    pairs = []
    if first.metric != MEMORY:
        pairs.append((first, Objective(MEMORY, MINIMIZE), "tradeoff_memory"))
    else:
        pairs.append((first, Objective(RATE, MAXIMIZE), "tradeoff_memory"))
    pairs.append((Objective(P99, MINIMIZE), Objective(RATE, MAXIMIZE), "tradeoff_latency"))
    return pairs


def tradeoff_charts(rec: Recommendation, cells: list[dict]) -> list[Chart]:
    """The trade-off charts of the cells ``rec`` ranked (those its constraints kept) whose two
    metrics the runs have; ``cells`` are the report's (analysis/report_cells.py: label, medians)."""
    ranked = {r.cell_id for r in rec.ranking if r.rank is not None}
    found = []
    for y, x, name in _pairs(rec.objectives[0]):
        medians = {
            c["cell_id"]: {o.metric: c["medians"].get(o.metric, (None,))[0] for o in (y, x)}
            for c in cells
            if c["cell_id"] in ranked
        }
        medians = {k: m for k, m in medians.items() if None not in m.values()}
        if len(medians) < 2:
            continue  # a metric these runs do not have: no chart
        front = set(pareto(medians, [y, x]))
        ys, xs = ([m[o.metric] for m in medians.values()] for o in (y, x))
        (ydiv, yunit), (xdiv, xunit) = _axis(y.metric, ys), _axis(x.metric, xs)
        rows = [
            {
                "x": medians[c["cell_id"]][x.metric] / xdiv,
                "y": medians[c["cell_id"]][y.metric] / ydiv,
                "front": "Pareto front" if c["cell_id"] in front else "dominated",
                "cell": c["label"],
                "label": c["label"] if c["cell_id"] in front else "",
                "x_text": fmt(x.metric, medians[c["cell_id"]][x.metric]),
                "y_text": fmt(y.metric, medians[c["cell_id"]][y.metric]),
                "n": c["medians"][y.metric][1],
            }
            for c in cells
            if c["cell_id"] in medians
        ]
        rows.sort(key=lambda row: row["x"])
        spec = charts.tradeoff(
            rows,
            f"{x.metric} ({xunit}), median; {x.better} is better",
            f"{y.metric} ({yunit}), median; {y.better} is better",
            f"{y.metric} vs {x.metric}",
        )
        found.append(
            Chart(
                name,
                f"Trade-off: {y.metric} against {x.metric}",
                f"One point per cell (medians over its ok runs); the {len(front)} cell(s) on the Pareto "
                "front (no other cell is better on both) are joined and named: along the front, one is "
                "bought at the cost of the other.",
                spec.to_dict(),
            )
        )
    return found
