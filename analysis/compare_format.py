"""Formatting of ``cmx compare`` results: table (rich), markdown, csv."""
from __future__ import annotations

import csv
import io

from rich.table import Table
from rich.text import Text

from analysis.compare import MetricDiff, Selection
from engine.summary import fmt

MARKERS = {"better": "▲ better", "worse": "▼ worse", "same": "= same", None: ""}
COLUMNS = ("metric", "baseline", "contender", "diff", "diff %", "better if", "contender is")


def _row(d: MetricDiff) -> list[str]:
    pct = "–" if d.diff_pct is None else f"{d.diff_pct:+.1f}%"
    diff = "–" if d.diff is None else ("+" if d.diff > 0 else "") + fmt(d.metric, d.diff)
    return [d.metric, fmt(d.metric, d.baseline), fmt(d.metric, d.contender), diff, pct, d.better or "",
            MARKERS[d.verdict]]


def as_table(baseline: Selection, contender: Selection, diffs: list[MetricDiff]) -> Table:
    """A rich table; worse rows in red, better in green."""
    table = Table(title=Text(f"baseline {baseline}  vs  contender {contender} (medians over ok runs)"),
                  title_justify="left")
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in ("metric", "better if", "contender is") else "right")
    for d in diffs:
        style = {"better": "green", "worse": "red"}.get(d.verdict)
        table.add_row(*map(Text, _row(d)), style=style)
    return table


def as_markdown(baseline: Selection, contender: Selection, diffs: list[MetricDiff]) -> str:
    lines = [f"baseline `{baseline}` vs contender `{contender}` (medians over ok runs)", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---", *["---:"] * 4, "---", "---"]) + "|"]
    lines += ["| " + " | ".join(_row(d)) + " |" for d in diffs]
    return "\n".join(lines) + "\n"


def as_csv(diffs: list[MetricDiff]) -> str:
    """Raw numbers (no units) for other tools."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["metric", "baseline", "contender", "diff", "diff_pct", "better", "verdict", "baseline_runs",
                "contender_runs"])
    for d in diffs:
        w.writerow([d.metric, d.baseline, d.contender, d.diff, d.diff_pct, d.better or "", d.verdict or "",
                    d.baseline_runs, d.contender_runs])
    return buf.getvalue()
