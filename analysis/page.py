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
table.cells th { cursor: pointer; user-select: none; }
table.cells th[aria-sort=ascending]::after { content: " ▲"; }
table.cells th[aria-sort=descending]::after { content: " ▼"; }
"""

#: The per-cell table's sort (click a header; again to reverse) and filter (every word typed must
#: appear in the row), in plain inline JavaScript: the page fetches nothing. Cells sort on their
#: data-v (the raw median, so 48 µs sorts below 1.2 ms), else on their text.
TABLE_SCRIPT = """
(function () {
  const table = document.getElementById("cells"), body = table.tBodies[0];
  const filter = document.getElementById("cells-filter"), shown = document.getElementById("cells-shown");
  const key = (row, i) => { const td = row.cells[i]; \
return td.dataset.v !== undefined ? td.dataset.v : td.textContent; };
  Array.from(table.tHead.rows[0].cells).forEach((th, i) => th.addEventListener("click", () => {
    const dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
    Array.from(table.tHead.rows[0].cells).forEach(h => h.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = key(a, i).trim(), y = key(b, i).trim(), nx = Number(x), ny = Number(y);
      if (x === "" || y === "") return (x === "") - (y === "");  // no value: last either way
      return dir * (!isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y, undefined, {numeric: true}));
    });
    rows.forEach(r => body.appendChild(r));
  }));
  filter.addEventListener("input", () => {
    const words = filter.value.toLowerCase().split(/\\s+/).filter(Boolean);
    let n = 0;
    Array.from(body.rows).forEach(r => {
      const text = r.textContent.toLowerCase(), keep = words.every(w => text.includes(w));
      r.hidden = !keep; n += keep;
    });
    shown.textContent = n + " of " + body.rows.length + " cells";
  });
})();
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
    if cell.get("not_run_tasks"):
        flags.append(f"{cell['not_run_tasks']:,.0f} tasks not run (a run stopped before them)")
    return ", ".join(flags)


def _metric_cell(metric: str, figure: tuple, never: int = 0) -> str:
    """A median with its interval; ``never``: ok runs whose value is NULL because it never happened
    (a fault run that never recovered: metricdefs.NEVER_WHEN_NULL), "never" when all of them are."""
    median, n, low, high = figure
    if median is None:
        return '<td data-v="Infinity">never</td>' if never else '<td data-v="">–</td>'
    ci = f"{fmt(metric, low)} – {fmt(metric, high)}, n={n}" if low is not None and n > 1 else f"n={n}"
    ci += f" ({never} never)" if never else ""
    return f'<td data-v="{median!r}">{html.escape(fmt(metric, median))}<span class="ci">{html.escape(ci)}</span></td>'


def summary_table(cells: list[dict], varying: list[str], metrics: tuple[str, ...]) -> str:
    """Cells × headline metrics (median over ok runs, under it the 95 % interval and n); failed,
    timed-out and lossy cells marked; sorted by a click on a header and filtered by the text box
    above it (TABLE_SCRIPT)."""
    shown = [
        m
        for m in metrics
        if any(c["medians"].get(m, (None,))[0] is not None or c.get("never", {}).get(m) for c in cells)
    ]
    dims = varying or ["cell_id"]
    head = "".join(f'<th class="dim">{html.escape(d)}</th>' for d in dims)
    head += (
        "<th>ok runs</th>"
        + "".join(f"<th>{html.escape(metricdefs.get(m).label)}</th>" for m in shown)
        + "<th>problems</th>"
    )
    body = []
    for c in cells:
        flags = _cell_flags(c)
        tds = "".join(f'<td class="dim"{_sort_key(c[d])}>{html.escape(str(c[d]))}</td>' for d in dims)
        tds += f'<td data-v="{c["ok_runs"]}">{c["ok_runs"]}/{c["runs"]}</td>'
        own = c.get("shown")  # the cell's workload headline for its params (backlog: no latency)
        tds += "".join(
            _metric_cell(m, c["medians"].get(m, (None, 0, None, None)), c.get("never", {}).get(m, 0))
            if own is None or m in own
            else '<td data-v="">n/a</td>'
            for m in shown
        )
        tds += f'<td class="flag">{"⚠ " + html.escape(flags) if flags else ""}</td>'
        body.append(f'<tr class="{"bad" if flags else "ok"}">{tds}</tr>')
    said = caption(tuple(shown))
    note = f'<p class="caption">{html.escape(said)}</p>' if said else ""
    search = (
        f'<p><input id="cells-filter" type="search" placeholder="filter cells, e.g. redis prefork" '
        f'aria-label="filter cells"> <span id="cells-shown">{len(cells)} of {len(cells)} cells</span>'
        " · click a header to sort</p>"
    )
    return (
        f'{search}<table id="cells" class="cells"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}'
        f"</tbody></table>{note}<script>{TABLE_SCRIPT}</script>"
    )


def _sort_key(value) -> str:
    # Numbers sort as numbers (concurrency 16 after 4), text as text.
    return f' data-v="{value!r}"' if isinstance(value, (int, float)) and not isinstance(value, bool) else ""


def render_html(
    experiment: str,
    cells: list[dict],
    varying: list[str],
    fixed: dict[str, str],
    charts: list,
    metrics: tuple[str, ...],
    javascript: str,
    revision_note: str = "",
    extra_html: str = "",
    pitfall_notes: tuple[str, ...] = (),
    answer_html: str = "",
    answer_charts: list = (),
) -> str:
    """The whole page; ``charts`` are :class:`cmx.analysis.report.Chart` values; ``extra_html`` (sections
    already escaped) follows the summary table; ``pitfall_notes`` warn of Celery's known traps;
    ``answer_html`` (escaped) opens the page: which configuration to run, its ``answer_charts``
    (the trade-offs) right under it."""
    same = ", ".join(f"{html.escape(k)}={html.escape(value_text(v))}" for k, v in fixed.items())
    every = [*answer_charts, *charts]
    slots = [
        f'<section><h2>{html.escape(c.title)}</h2><p class="caption">{html.escape(c.caption)}</p>'
        f'<div class="chart" id="chart-{i}"></div></section>'
        for i, c in enumerate(every)
    ]
    tradeoffs, sections = "".join(slots[: len(answer_charts)]), "".join(slots[len(answer_charts) :])
    specs = json.dumps([c.spec for c in every]).replace("</", "<\\/")
    runs = sum(c["runs"] for c in cells)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="cmx-charts" content="{len(every)}">
<title>cmx report: {html.escape(experiment)}</title>
<style>{STYLE}</style>
<script>{javascript}</script>
</head><body>
<h1>{html.escape(experiment)}</h1>
{answer_html}
{tradeoffs}
{f'<p class="caption revision">{html.escape(revision_note)}</p>' if revision_note else ""}
{"".join(f'<p class="caption pitfall">warning: {html.escape(n)}</p>' for n in pitfall_notes)}
<p class="caption">{len(cells)} cells, {runs} runs. Medians over each cell's ok runs, under each its 95 %
bootstrap interval and n; failed and timed-out runs are counted, never averaged in. \
{f"Same in every run: {same}." if same else ""}</p>
{summary_table(cells, varying, metrics)}
{extra_html}
{sections}
<script>
const specs = {specs};
// When every chart has been drawn (or has failed), the body carries the milliseconds since the
// page was requested: the browser test reads it.
Promise.all(specs.map((spec, i) => vegaEmbed("#chart-" + i, spec, {{renderer: "svg", actions: false}})
  .catch(err => {{ document.getElementById("chart-" + i).textContent = "chart failed: " + err; }})))
  .then(() => document.body.setAttribute("data-charts-drawn-ms", Math.round(performance.now())));
</script>
</body></html>
"""
