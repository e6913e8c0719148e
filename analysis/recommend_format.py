"""Formatting of ``cmx recommend`` (and the report's "Which configuration?"): the answer in words,
a table, markdown, json."""

from __future__ import annotations

import json

from rich.table import Table
from rich.text import Text

from cmx.analysis import racing, stats
from cmx.analysis.recommend import Ranked, Recommendation
from cmx.analysis.units import fmt, span


def varying(rec: Recommendation) -> list[str]:
    """The dimensions whose values differ between the ranked cells (the others say nothing)."""
    keys = list(dict.fromkeys(k for r in rec.ranking for k in r.values))
    return [k for k in keys if len({json.dumps(r.values.get(k), sort_keys=True) for r in rec.ranking}) > 1]


def cell_words(r: Ranked, dims: list[str]) -> str:
    """``broker redis, pool threads, concurrency 4``"""
    return ", ".join(f"{k} {_show(r.values.get(k))}" for k in dims) or r.cell_id


def _show(value) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "(unset)" if value is None else str(value)


def _measure(metric: str, s: stats.Summary) -> str:
    if not s.n:
        return "–"
    shown = fmt(metric, s.median)
    return f"{shown} [{span(metric, s.low, s.high)}] (n={s.n})" if s.n > 1 else f"{shown} (n=1)"


def answer(rec: Recommendation) -> list[str]:
    """The recommendation in words: the best cell, by how much, and what cannot be told from it."""
    best = rec.best
    if best is None:
        return ["No cell meets every constraint."]
    dims = varying(rec)
    first = rec.objectives[0]
    lines = [
        f"Run {cell_words(best, dims)}: {first.metric} {_measure(first.metric, best.metrics[first.metric])}, "
        f"the best of {sum(r.rank is not None for r in rec.ranking)} cells on {first}."
    ]
    tied = rec.tied()
    if tied and rec.decision is not None:
        by_id = {r.cell_id: r for r in rec.ranking}
        said = racing.open_text(rec.decision, lambda c: cell_words(by_id[c], dims), rec.repeats, lead=False)
        lines.append(f"Tied with it: {said}.")
        few = sum(r.versus_best is not None and r.versus_best.verdict == racing.FEW for r in tied)
        if few:
            lines.append(
                f"{racing.cells_text(few)} tied only because a side has fewer than {stats.MIN_N} ok runs: "
                f"with {stats.MIN_N} runs a cell the race's rule could tell them apart."
            )
    else:
        runner = next((r for r in rec.ranking if r.rank == 2), None)
        if runner is not None and runner.versus_best is not None and runner.versus_best.change_pct is not None:
            lines.append(
                f"The next best ({cell_words(runner, dims)}) is shown {runner.versus_best.verdict}, "
                f"{runner.versus_best.change_pct:+.1f} % on {first.metric}."
            )
    if rec.history:
        lines.append(rec.history)
    dropped = [r for r in rec.ranking if r.excluded_by]
    if dropped:
        lines.append(f"{racing.cells_text(len(dropped), 'was')} excluded by the constraints.")
    if len(rec.objectives) > 1:
        count = len(rec.pareto)
        lines.append(f"Pareto front on {', '.join(map(str, rec.objectives))}: {count} cell{'' if count == 1 else 's'}.")
    return lines


def _columns(rec: Recommendation) -> list[str]:
    return list(dict.fromkeys([o.metric for o in rec.objectives] + [c.metric for c in rec.constraints]))


def _row(rec: Recommendation, r: Ranked, dims: list[str]) -> list[str]:
    flags = []
    if r.rank == 1:
        flags.append("★ best")
    elif r.tied_with_best:
        flags.append("= tied")
    if len(rec.objectives) > 1 and r.cell_id in rec.pareto:
        flags.append("pareto")
    if r.excluded_by:
        flags.append("excluded: " + "; ".join(r.excluded_by))
    return [
        "–" if r.rank is None else str(r.rank),
        *(_show(r.values.get(k)) for k in dims),
        *(_measure(m, r.metrics[m]) for m in _columns(rec)),
        ", ".join(flags),
    ]


def as_table(rec: Recommendation) -> Table:
    dims = varying(rec)
    table = Table(
        title=Text("\n".join(answer(rec))), title_justify="left", caption=Text(caption(rec)), caption_justify="left"
    )
    for c in ["rank", *dims, *_columns(rec), ""]:
        table.add_column(c, justify="right" if c in _columns(rec) or c == "rank" else "left")
    for r in rec.ranking:
        style = "bold green" if r.rank == 1 else ("green" if r.tied_with_best else ("dim" if r.excluded_by else None))
        table.add_row(*map(Text, _row(rec, r, dims)), style=style)
    return table


def caption(rec: Recommendation) -> str:
    return (
        f"experiment {rec.experiment}, revision {rec.revision}; median [95 % interval] (n ok runs); "
        f"tied = not shown worse than the best by the race's rule (analysis/racing.py: the same answer a race "
        f"of these cells gives), or shown within ±{stats.MARGIN_PCT:g} % of it"
    )


def as_markdown(rec: Recommendation) -> str:
    dims = varying(rec)
    head = ["rank", *dims, *_columns(rec), ""]
    lines = [*answer(rec), "", "| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(_row(rec, r, dims)) + " |" for r in rec.ranking]
    return "\n".join([*lines, "", caption(rec)]) + "\n"


def as_json(rec: Recommendation) -> str:
    """The contract: {"objectives", "constraints", "ranking": [{"cell_id", "rank", "values", "metrics":
    {M: {n, median, low, high}}, "tied_with_best", "excluded_by"}], "pareto"}."""
    return json.dumps(
        {
            "experiment": rec.experiment,
            "revision": rec.revision,
            "objectives": [{"metric": o.metric, "direction": o.direction} for o in rec.objectives],
            "constraints": [
                {"metric": c.metric, "op": c.op, "value": c.value, "text": c.text} for c in rec.constraints
            ],
            "ranking": [
                {
                    "cell_id": r.cell_id,
                    "rank": r.rank,
                    "values": r.values,
                    "metrics": {m: s.as_dict() for m, s in r.metrics.items()},
                    "tied_with_best": r.tied_with_best,
                    "excluded_by": r.excluded_by,
                }
                for r in rec.ranking
            ],
            "pareto": rec.pareto,
            "history": rec.history,
            "answer": answer(rec),
        },
        indent=2,
        default=str,
    )


def answer_html(rec: Recommendation | None, why_not: str = "", traps: tuple[str, ...] = ()) -> str:
    """The report's opening section: "Which configuration?" in words, before any chart."""
    import html

    if rec is None:
        lines = [f"No recommendation: {why_not}"]
    else:
        lines = answer(rec)
        if rec.constraints:
            lines.append("Only cells with " + " and ".join(c.text for c in rec.constraints) + " were considered.")
        lines.append(
            f"Ranked on {rec.objectives[0]} by median with its 95 % interval; cells not shown worse than "
            f"the best by the race's rule are tied with it. cmx recommend {rec.experiment} "
            "--maximize/--minimize METRIC --where 'METRIC OP VALUE' asks another question."
        )
    lines += [f"Trap in this sweep: {t}" for t in traps]
    body = "".join(f"<p>{html.escape(line)}</p>" for line in lines)
    return f'<section class="answer"><h2>Which configuration?</h2>{body}</section>'
