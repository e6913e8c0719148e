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
#: The table's order: what a reader needs first on the left, so that a narrow terminal loses
#: ``better if`` and then ``p`` (the caption says which), never the verdict.
TABLE_COLUMNS = ("metric", "baseline", "contender", "change [95 %]", "verdict", "p", "better if")
#: The table's columns that never leave to fit a terminal.
STAYS = ("verdict",)


def interval_note(margin_pct: float) -> str:
    """What the columns and verdicts mean (the table's caption)."""
    return (
        "median, [its 95 % bootstrap interval] and n ok runs; change: of the medians, with its 95 % "
        "interval; p: Mann-Whitney U, two-sided. Verdicts: better/worse = p ≤ 0.05 and the change's interval "
        f"excludes 0; same = the change's whole interval lies within ±{margin_pct:g} % (--margin); "
        "inconclusive = neither shown (n=N: the runs a side that would tell); "
        "unstable = a side's runs spread over 10 % of their mean"
    )


def _side(metric: str, s: stats.Summary) -> str:
    if not s.n:
        return "–"
    shaky = ", unstable" if s.unstable else ""
    interval = "" if s.low == s.high else f" [{span(metric, s.low, s.high)}]"  # not 0 [0–0]
    return f"{fmt(metric, s.median)}{interval} (n={s.n}{shaky})"


def _side_lines(metric: str, s: stats.Summary) -> str:
    """The table's side: its median and n, and under it the whole interval on a line of its own."""
    if not s.n:
        return "–"
    shaky = ", unstable" if s.unstable else ""
    head = f"{fmt(metric, s.median)} (n={s.n}{shaky})"
    return head if s.low == s.high else f"{head}\n[{span(metric, s.low, s.high)}]"


def _pct(v: float) -> str:
    return f"{v:+.1f}%" if abs(v) < 1e4 else f"{v:+.2g}%"


def verdict_text(r: stats.Comparison, short: bool = False) -> str:
    """``▼ worse``, ``? inconclusive: 4 runs a side would tell``, ``= same (unstable contender)``;
    ``short`` (the table's one line): ``? inconclusive: n=4 would tell``, and no word of an unstable
    side (its own cell says so)."""
    text = MARKERS.get(r.verdict, r.verdict)
    if r.verdict == stats.INCONCLUSIVE and r.runs_needed:
        more = (">" if short else "more than ") if r.runs_needed >= stats.RUNS_NEEDED_CAP else ""
        text += f": n={more}{r.runs_needed} would tell" if short else f": {more}{r.runs_needed} runs a side would tell"
    shaky = [name for name, s in (("baseline", r.baseline), ("contender", r.contender)) if s.unstable]
    if shaky and r.verdict != stats.N_TOO_SMALL and not short:
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


def _table_row(m: MetricComparison) -> dict[str, str]:
    r = m.result
    pct = "–" if r.change_pct is None else _pct(r.change_pct)
    if r.change_low is not None and r.change_pct is not None and r.change_low != r.change_high:
        pct += f"\n[{_pct(r.change_low)}, {_pct(r.change_high)}]"
    return {
        "metric": m.metric,
        "baseline": _side_lines(m.metric, r.baseline),
        "contender": _side_lines(m.metric, r.contender),
        "change [95 %]": pct,
        "verdict": verdict_text(r, short=True),
        "p": "–" if r.p_value is None else f"{r.p_value:.3f}",
        "better if": m.better if m.better != "neither" else "",
    }


def as_table(res: CompareResult) -> Table:
    """A rich table (print it with ``cli.tables.show(…, stay=STAYS)``): a metric's name and its
    verdict each on one line, a side's interval on a line of its own under its median; worse rows
    in red, better in green; what was pooled above it."""
    caption = "\n".join([*res.notes, *_noise_note(res), interval_note(_margin(res))])
    table = Table(title=Text(_title(res)), title_justify="left", caption=Text(caption), caption_justify="left")
    for c in TABLE_COLUMNS:
        text = c in ("metric", "better if", "verdict")
        table.add_column(c, justify="left" if text else "right", no_wrap=c in ("metric", "verdict"))
    for m in res.metrics:
        style = {"better": "green", "worse": "red"}.get(m.result.verdict)
        row = _table_row(m)
        table.add_row(*(Text(row[c]) for c in TABLE_COLUMNS), style=style)
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
