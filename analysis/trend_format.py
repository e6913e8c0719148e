"""Formatting of ``cmx trend`` results: table (rich), markdown, json (the contract)."""

from __future__ import annotations

import json
import re
import secrets

from rich.table import Table
from rich.text import Text

from cmx.analysis.compare_format import MARKERS
from cmx.analysis.units import fmt, span
from cmx.analysis.trend import RULE, Series, TrendResult
from cmx.engine.results import metricdefs

COLUMNS = ("group", "cell", "metric", "points", "first", "latest", "changes")
NOTE = "one point per {by}; median [95 % bootstrap interval of the median] (n ok runs). " + RULE


def _label(res: TrendResult, cell_id: str, varying: list[str]) -> str:
    values = res.cells.get(cell_id, {})
    shown = " ".join(f"{k}={values[k]}" for k in varying if k in values)
    return f"{cell_id} {shown}".strip()


def _varying(res: TrendResult) -> list[str]:
    keys = sorted({k for v in res.cells.values() for k in v})
    return [k for k in keys if len({repr(v.get(k)) for v in res.cells.values()}) > 1]


def _point(s: Series, i: int) -> str:
    p = s.summaries[i]
    return f"{s.ats[i]}: {fmt(s.metric, p.median)} [{span(s.metric, p.low, p.high)}] (n={p.n})"


def _changes(s: Series) -> str:
    parts = []
    for c in s.changes:
        r = c.comparison
        pct = "–" if r.change_pct is None else f"{r.change_pct:+.1f}%"
        interval = "" if r.change_low is None else f" [{r.change_low:+.1f}, {r.change_high:+.1f}]"
        noise = f"; {c.noise}" if c.noise else ""
        parts.append(f"{c.at}: {MARKERS.get(r.verdict, r.verdict)} {pct}{interval} (p={r.p_value:.3g}{noise})")
    return "; ".join(parts) or "none"


def _rows(res: TrendResult) -> list[list[str]]:
    varying = _varying(res)
    return [
        [
            s.group,
            _label(res, s.cell_id, varying),
            s.metric,
            str(len(s.ats)),
            _point(s, 0),
            _point(s, len(s.ats) - 1),
            _changes(s),
        ]
        for s in res.series
    ]


def _title(res: TrendResult) -> str:
    return f"{res.experiment} (revision {res.revision}): trend by {res.by}"


#: The most rows the terminal view shows: every series with a change, then unchanged headline ones.
TABLE_ROWS = 20


def shown_in_table(res: TrendResult) -> tuple[list[int], str]:
    """Which series the terminal view shows (indexes into ``res.series``) and the line that counts
    the others: the series with a change (the headline first), then unchanged headline series, at
    most :data:`TABLE_ROWS` rows; markdown and json list them all."""
    changed = [i for i, s in enumerate(res.series) if s.changes]
    calm = [i for i, s in enumerate(res.series) if not s.changes and s.group == metricdefs.HEADLINE]
    shown = (changed + calm)[:TABLE_ROWS]
    kept = set(shown)
    left = [s for i, s in enumerate(res.series) if i not in kept]
    if not left:
        return shown, ""
    moved = sum(1 for s in left if s.changes)
    groups = {g: sum(1 for s in left if s.group == g and not s.changes) for g in metricdefs.GROUPS}
    counted = ", ".join(f"{n} {g}" for g, n in groups.items() if n)
    parts = ([f"{moved} more with a change"] if moved else []) + (
        [f"{len(left) - moved} without a change ({counted})"] if len(left) > moved else []
    )
    return shown, f"not shown: {'; '.join(parts)}; --format markdown or json lists every series"


def as_table(res: TrendResult) -> Table:
    """The terminal view: the series with a change first, unchanged ones counted (:func:`shown_in_table`)."""
    shown, left = shown_in_table(res)
    caption = "\n".join(filter(None, [NOTE.format(by=res.by), left]))
    table = Table(title=Text(_title(res)), title_justify="left", caption=Text(caption), caption_justify="left")
    for c in COLUMNS:
        table.add_column(c)
    rows = _rows(res)
    for i in shown:
        s = res.series[i]
        latest = [c.comparison.verdict for c in s.changes if c.index == len(s.ats) - 1]
        table.add_row(*map(Text, rows[i]), style={"better": "green", "worse": "red"}.get(latest[0] if latest else ""))
    return table


def as_markdown(res: TrendResult) -> str:
    lines = [f"**{_title(res)}**", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(row) + " |" for row in _rows(res)]
    return "\n".join([*lines, "", NOTE.format(by=res.by)]) + "\n"


def _change_json(c) -> dict:
    r = c.comparison
    return {
        "at": c.at,
        "change_pct": r.change_pct,
        "low": r.change_low,
        "high": r.change_high,
        "p_value": r.p_value,
        "p_adjusted": c.p_adjusted,
        "verdict": r.verdict,
        "noise": c.noise,
    }


def _latest_json(s: Series) -> dict | None:
    r = s.latest
    if r is None:
        return None
    return {
        "at": s.ats[-1],
        "verdict": r.verdict,
        "change_pct": r.change_pct,
        "p_value": r.p_value,
        "runs_needed": r.runs_needed,
    }


def as_json(res: TrendResult) -> str:
    """The contract: {"series": [{"cell_id", "metric", "group", "points": [{"at", "n", "median", "low",
    "high"}], "changes": [{"at", "change_pct", "low", "high", "p_value", "p_adjusted", "verdict",
    "noise"}], "latest": {"at", "verdict", "change_pct", "p_value", "runs_needed"} | null}]}. The text
    of ``json.dumps(…, indent=2)`` (tests/unit/test_trend.py holds them equal); the points, ~73,000
    for a year of nights, are written from one C-encoded list of their numbers, as json's
    pure-Python indenting encoder takes seconds over them."""
    token = secrets.token_hex(8)  # no cell or metric can be named like a holder
    holders = [f"points {token} {i}" for i in range(len(res.series))]
    text = json.dumps(
        {
            "series": [
                {
                    "cell_id": s.cell_id,
                    "metric": s.metric,
                    "group": s.group,
                    "points": holder,
                    "changes": [_change_json(c) for c in s.changes],
                    "latest": _latest_json(s),
                }
                for s, holder in zip(res.series, holders)
            ]
        },
        indent=2,
    )
    ats: dict[str, str] = {}  # each point's key as JSON (the same nights recur in every series)
    points = [_points(s, ats) for s in res.series]
    return re.sub(f'"points {token} ([0-9]+)"', lambda m: points[int(m[1])], text)


_POINT = '{\n{i}  "at": %s,\n{i}  "n": %s,\n{i}  "median": %s,\n{i}  "low": %s,\n{i}  "high": %s\n{i}}'.replace(
    "{i}", " " * 8
)


def _points(s: Series, ats: dict[str, str]) -> str:
    """The points of a series as json.dumps(…, indent=2) writes them inside a series, in one
    %-formatting of a template repeated once a point (a format call a point costs ~0.1 s a year)."""
    if not s.ats:
        return "[]"
    numbers = json.dumps([v for p in s.summaries for v in (p.n, p.median, p.low, p.high)])[1:-1].split(", ")
    for a in s.ats:
        if a not in ats:
            ats[a] = json.dumps(a)
    fields: list = [None] * (5 * len(s.ats))
    fields[0::5] = [ats[a] for a in s.ats]
    for k in range(4):
        fields[k + 1 :: 5] = numbers[k::4]
    body = (",\n" + " " * 8).join([_POINT] * len(s.ats)) % tuple(fields)
    return "[\n" + " " * 8 + body + "\n" + " " * 6 + "]"
