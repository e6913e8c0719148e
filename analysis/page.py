"""The report's HTML page: summary table and chart slots, Vega libraries inlined (no network)."""
from __future__ import annotations

import html
import json

from cmx.engine.model.cells import value_text
from cmx.engine.results import metricdefs
from cmx.analysis.summary import caption
from cmx.analysis.units import fmt

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { padding: 3px 8px; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child, td.dim, th.dim { text-align: left; }
tr.bad td { background: #fde8e8; }
.flag { color: #b00; font-weight: 600; }
.caption { color: #555; max-width: 70em; }
.ci { display: block; color: #777; font-size: 11px; }
section { margin: 2em 0; }
section.answer { background: #f3f8f1; border-left: 4px solid #4a8a3a; padding: 0.5em 1em; max-width: 70em; }
"""


def _cell_flags(cell: dict) -> str:
    flags = []
    if cell["failed_runs"]:
        flags.append(f"{cell['failed_runs']} failed")
    if cell["timeout_runs"]:
        flags.append(f"{cell['timeout_runs']} timeout")
    if cell["lost_tasks"]:
        flags.append(f"{cell['lost_tasks']:,.0f} tasks lost")
    if cell.get("unseen_tasks"):
        flags.append(f"{cell['unseen_tasks']:,.0f} tasks unseen (a host's records not collected)")
    return ", ".join(flags)


def _metric_cell(metric: str, figure: tuple) -> str:
    median, n, low, high = figure
    if median is None:
        return "<td>–</td>"
    ci = f"{fmt(metric, low)} – {fmt(metric, high)}, n={n}" if low is not None and n > 1 else f"n={n}"
    return f'<td>{html.escape(fmt(metric, median))}<span class="ci">{html.escape(ci)}</span></td>'


def summary_table(cells: list[dict], varying: list[str], metrics: tuple[str, ...]) -> str:
    """Cells × headline metrics (median over ok runs, under it the 95 % interval and n); failed,
    timed-out and lossy cells marked."""
    shown = [m for m in metrics if any(c["medians"].get(m, (None,))[0] is not None for c in cells)]
    dims = varying or ["cell_id"]
    head = "".join(f'<th class="dim">{html.escape(d)}</th>' for d in dims)
    head += "<th>ok runs</th>" + "".join(f"<th>{html.escape(metricdefs.get(m).label)}</th>" for m in shown) + "<th>problems</th>"
    body = []
    for c in cells:
        flags = _cell_flags(c)
        tds = "".join(f'<td class="dim">{html.escape(str(c[d]))}</td>' for d in dims)
        tds += f"<td>{c['ok_runs']}/{c['runs']}</td>"
        own = c.get("shown")  # the cell's workload headline for its params (backlog: no latency)
        tds += "".join(_metric_cell(m, c["medians"].get(m, (None, 0, None, None))) if own is None or m in own
                       else "<td>n/a</td>" for m in shown)
        tds += f'<td class="flag">{"⚠ " + html.escape(flags) if flags else ""}</td>'
        body.append(f'<tr class="{"bad" if flags else "ok"}">{tds}</tr>')
    said = caption(tuple(shown))
    note = f'<p class="caption">{html.escape(said)}</p>' if said else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{note}"


def render_html(experiment: str, cells: list[dict], varying: list[str], fixed: dict[str, str], charts: list,
                metrics: tuple[str, ...], javascript: str, revision_note: str = "", extra_html: str = "",
                pitfall_notes: tuple[str, ...] = (), answer_html: str = "") -> str:
    """The whole page; ``charts`` are :class:`cmx.analysis.report.Chart` values; ``extra_html`` (sections
    already escaped) follows the summary table; ``pitfall_notes`` warn of Celery's known traps;
    ``answer_html`` (escaped) opens the page: which configuration to run."""
    same = ", ".join(f"{html.escape(k)}={html.escape(value_text(v))}" for k, v in fixed.items())
    sections = "".join(
        f'<section><h2>{html.escape(c.title)}</h2><p class="caption">{html.escape(c.caption)}</p>'
        f'<div class="chart" id="chart-{i}"></div></section>' for i, c in enumerate(charts))
    specs = json.dumps([c.spec for c in charts]).replace("</", "<\\/")
    runs = sum(c["runs"] for c in cells)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="cmx-charts" content="{len(charts)}">
<title>cmx report: {html.escape(experiment)}</title>
<style>{STYLE}</style>
<script>{javascript}</script>
</head><body>
<h1>{html.escape(experiment)}</h1>
{answer_html}
{f'<p class="caption revision">{html.escape(revision_note)}</p>' if revision_note else ""}
{"".join(f'<p class="caption pitfall">warning: {html.escape(n)}</p>' for n in pitfall_notes)}
<p class="caption">{len(cells)} cells, {runs} runs. Medians over each cell's ok runs, under each its 95 %
bootstrap interval and n; failed and timed-out runs are counted, never averaged in. {f"Same in every run: {same}." if same else ""}</p>
{summary_table(cells, varying, metrics)}
{extra_html}
{sections}
<script>
const specs = {specs};
specs.forEach((spec, i) => vegaEmbed("#chart-" + i, spec, {{renderer: "svg", actions: false}})
  .catch(err => {{ document.getElementById("chart-" + i).textContent = "chart failed: " + err; }}));
</script>
</body></html>
"""
