"""Formatting of ``cmx compare`` results: table (rich), markdown, csv, json."""

from __future__ import annotations

import csv
import io
import json

from rich.table import Table
from rich.text import Text

from cmx.analysis import stats
from cmx.analysis.compare import CompareResult, MetricComparison
from cmx.analysis.units import fmt, span

MARKERS = {
    stats.BETTER: "▲ better",
    stats.WORSE: "▼ worse",
    stats.SAME: "= same",
    stats.DIFFERS: "≠ differs",
    stats.SMALL: "~ small",
    stats.INCONCLUSIVE: "? inconclusive",
    stats.N_TOO_SMALL: "n too small",
}
COLUMNS = ("metric", "better if", "baseline", "contender", "change [95 %]", "p", "verdict")


def interval_note(margin_pct: float) -> str:
    """What the columns and verdicts mean (the table's caption)."""
    return (
        "median [95 % bootstrap interval of the median] (n ok runs); change: of the medians, with its 95 % "
        "interval; p: Mann-Whitney U, two-sided. Verdicts: better/worse = p ≤ 0.05 and the change's interval "
        f"excludes 0; same = the change's whole interval lies within ±{margin_pct:g} % (--margin); "
        "inconclusive = neither shown (the runs a side that would tell are given); "
        "unstable = a side's runs spread over 10 % of their mean"
    )


def _side(metric: str, s: stats.Summary) -> str:
    if not s.n:
        return "–"
    shaky = ", unstable" if s.unstable else ""
    return f"{fmt(metric, s.median)} [{span(metric, s.low, s.high)}] (n={s.n}{shaky})"


def _pct(v: float) -> str:
    return f"{v:+.1f}%" if abs(v) < 1e4 else f"{v:+.2g}%"


def verdict_text(r: stats.Comparison) -> str:
    """``▼ worse``, ``? inconclusive: 4 runs a side would tell``, ``= same (unstable contender)``."""
    text = MARKERS.get(r.verdict, r.verdict)
    if r.verdict == stats.INCONCLUSIVE and r.runs_needed:
        more = "more than " if r.runs_needed >= stats.RUNS_NEEDED_CAP else ""
        text += f": {more}{r.runs_needed} runs a side would tell"
    shaky = [name for name, s in (("baseline", r.baseline), ("contender", r.contender)) if s.unstable]
    if shaky and r.verdict != stats.N_TOO_SMALL:
        text += f" (unstable {' and '.join(shaky)})"
    return text


def _row(m: MetricComparison) -> list[str]:
    r = m.result
    pct = "–" if r.change_pct is None else _pct(r.change_pct)
    if r.change_low is not None and r.change_pct is not None:
        pct += f" [{_pct(r.change_low)}, {_pct(r.change_high)}]"
    p = "–" if r.p_value is None else f"{r.p_value:.3f}"
    return [
        m.metric,
        m.better if m.better != "neither" else "",
        _side(m.metric, r.baseline),
        _side(m.metric, r.contender),
        pct,
        p,
        verdict_text(r),
    ]


def _margin(res: CompareResult) -> float:
    return res.metrics[0].result.margin_pct if res.metrics else stats.MARGIN_PCT


def _title(res: CompareResult) -> str:
    return f"baseline {res.baseline.selection}  vs  contender {res.contender.selection}"


def _noise_note(res: CompareResult) -> list[str]:
    """The line that says the hosts' noise differs (cmx.analysis.noise), or none."""
    return [f"noise differs: {res.noise}"] if res.noise else []


def as_table(res: CompareResult) -> Table:
    """A rich table; worse rows in red, better in green; what was pooled above it."""
    caption = "\n".join([*res.notes, *_noise_note(res), interval_note(_margin(res))])
    table = Table(title=Text(_title(res)), title_justify="left", caption=Text(caption), caption_justify="left")
    for c in COLUMNS:
        table.add_column(c, justify="left" if c in ("metric", "better if", "verdict") else "right")
    for m in res.metrics:
        style = {"better": "green", "worse": "red"}.get(m.result.verdict)
        table.add_row(*map(Text, _row(m)), style=style)
    return table


def as_markdown(res: CompareResult) -> str:
    lines = [f"baseline `{res.baseline.selection}` vs contender `{res.contender.selection}`", ""]
    notes = [*res.notes, *_noise_note(res)]
    lines += [f"_{n}_" for n in notes] + ([""] if notes else [])
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---", "---", *["---:"] * 4, "---"]) + "|"]
    lines += ["| " + " | ".join(_row(m)) + " |" for m in res.metrics]
    return "\n".join([*lines, "", interval_note(_margin(res))]) + "\n"


def as_csv(res: CompareResult) -> str:
    """Raw numbers (no units) for other tools."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        [
            "metric",
            "better",
            "baseline_n",
            "baseline_median",
            "baseline_low",
            "baseline_high",
            "contender_n",
            "contender_median",
            "contender_low",
            "contender_high",
            "change_pct",
            "p_value",
            "verdict",
            "margin_pct",
            "change_low_pct",
            "change_high_pct",
            "baseline_unstable",
            "contender_unstable",
            "runs_needed",
        ]
    )
    for m in res.metrics:
        r = m.result
        w.writerow(
            [
                m.metric,
                m.better,
                r.baseline.n,
                r.baseline.median,
                r.baseline.low,
                r.baseline.high,
                r.contender.n,
                r.contender.median,
                r.contender.low,
                r.contender.high,
                r.change_pct,
                r.p_value,
                r.verdict,
                r.margin_pct,
                r.change_low,
                r.change_high,
                r.baseline.unstable,
                r.contender.unstable,
                r.runs_needed,
            ]
        )
    return buf.getvalue()


def as_json(res: CompareResult) -> str:
    """The contract: a list of {metric, baseline{n,median,low,high,unstable}, contender{…}, change_pct,
    p_value, margin_pct, verdict}, plus the change's interval, when inconclusive the runs a side
    that would tell, and ``noise``: how the hosts' noise differs between the sides (the same label on
    every metric; null when alike or unknown)."""
    return json.dumps(
        [
            {
                "metric": m.metric,
                "baseline": m.result.baseline.as_dict(),
                "contender": m.result.contender.as_dict(),
                "change_pct": m.result.change_pct,
                "p_value": m.result.p_value,
                "margin_pct": m.result.margin_pct,
                "verdict": m.result.verdict,
                "change_low_pct": m.result.change_low,
                "change_high_pct": m.result.change_high,
                "runs_needed": m.result.runs_needed,
                "noise": res.noise,
            }
            for m in res.metrics
        ],
        indent=2,
    )
