"""Formatting of ``cmx compare`` results: table (rich), markdown, csv, json."""
from __future__ import annotations

import csv
import io
import json

from rich.table import Table
from rich.text import Text

from cmx.analysis import stats
from cmx.analysis.compare import CompareResult, MetricComparison
from cmx.analysis.summary import fmt, span

MARKERS = {"better": "▲ better", "worse": "▼ worse", "same": "= same", "differs": "≠ differs",
           stats.N_TOO_SMALL: "n too small"}
COLUMNS = ("metric", "better if", "baseline", "contender", "change", "p", "verdict")
INTERVAL_NOTE = ("median [95 % bootstrap interval of the median] (n ok runs); change: of the medians; "
                 "p: Mann-Whitney U, two-sided; same when the change's interval crosses 0 or p > 0.05")


def _side(metric: str, s: stats.Summary) -> str:
    if not s.n:
        return "–"
    return f"{fmt(metric, s.median)} [{span(metric, s.low, s.high)}] (n={s.n})"


def _row(m: MetricComparison) -> list[str]:
    r = m.result
    pct = "–" if r.change_pct is None else f"{r.change_pct:+.1f}%"
    p = "–" if r.p_value is None else f"{r.p_value:.3f}"
    return [m.metric, m.better if m.better != "neither" else "", _side(m.metric, r.baseline),
            _side(m.metric, r.contender), pct, p, MARKERS.get(r.verdict, r.verdict)]


def _title(res: CompareResult) -> str:
    return f"baseline {res.baseline.selection}  vs  contender {res.contender.selection}"


def as_table(res: CompareResult) -> Table:
    """A rich table; worse rows in red, better in green; what was pooled above it."""
    caption = "\n".join([*res.notes, INTERVAL_NOTE])
    table = Table(title=Text(_title(res)), title_justify="left", caption=Text(caption), caption_justify="left")
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in ("metric", "better if", "verdict") else "right")
    for m in res.metrics:
        style = {"better": "green", "worse": "red"}.get(m.result.verdict)
        table.add_row(*map(Text, _row(m)), style=style)
    return table


def as_markdown(res: CompareResult) -> str:
    lines = [f"baseline `{res.baseline.selection}` vs contender `{res.contender.selection}`", ""]
    lines += [f"_{n}_" for n in res.notes] + ([""] if res.notes else [])
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---", "---", *["---:"] * 4, "---"]) + "|"]
    lines += ["| " + " | ".join(_row(m)) + " |" for m in res.metrics]
    return "\n".join([*lines, "", INTERVAL_NOTE]) + "\n"


def as_csv(res: CompareResult) -> str:
    """Raw numbers (no units) for other tools."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["metric", "better", "baseline_n", "baseline_median", "baseline_low", "baseline_high",
                "contender_n", "contender_median", "contender_low", "contender_high", "change_pct", "p_value",
                "verdict"])
    for m in res.metrics:
        r = m.result
        w.writerow([m.metric, m.better, r.baseline.n, r.baseline.median, r.baseline.low, r.baseline.high,
                    r.contender.n, r.contender.median, r.contender.low, r.contender.high, r.change_pct, r.p_value,
                    r.verdict])
    return buf.getvalue()


def as_json(res: CompareResult) -> str:
    """The contract: a list of {metric, baseline{n,median,low,high}, contender{…}, change_pct, p_value, verdict}."""
    return json.dumps([{"metric": m.metric, "baseline": m.result.baseline.as_dict(),
                        "contender": m.result.contender.as_dict(), "change_pct": m.result.change_pct,
                        "p_value": m.result.p_value, "verdict": m.result.verdict} for m in res.metrics], indent=2)
