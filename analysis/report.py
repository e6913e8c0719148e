"""``cmx report``: an offline HTML report of one experiment, plus a PNG and a Vega-Lite JSON per chart.

Every figure comes from the SQL views (``analysis/sql``) aggregated in DuckDB: the charts receive
a few rows per cell or per sampler tick, never raw task rows, so a report over millions of tasks
takes seconds. Which charts appear depends on the data: a chart whose data is empty is left out.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import vl_convert

from analysis import charts
from engine.db import RUN_COLUMNS
from engine.summary import TITLES

#: Columns of the summary table, in order (medians over each cell's ok runs).
TABLE_METRICS = ("publish_rate", "consume_rate", "makespan_s", "latency_p50_s", "latency_p99_s",
                 "peak_rss_bytes", "peak_pss_bytes", "broker_connections_max")
MEMORY_RUNS = 6          # memory-over-time panels: the first ok run of at most this many cells
MEMORY_POINTS = 150      # per panel and role: sampler ticks are bucketed down to about this many


@dataclass(frozen=True)
class Chart:
    name: str
    title: str
    caption: str
    spec: dict


@dataclass(frozen=True)
class Report:
    experiment: str
    out_dir: Path
    html: Path
    charts: tuple[str, ...]
    cells: int
    runs: int
    revision: int = 1


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def revisions(con, experiment: str) -> list[int]:
    """The experiment's revisions (definitions) in the database, oldest first."""
    return [r[0] for r in con.execute("SELECT DISTINCT revision FROM runs WHERE experiment = ? ORDER BY 1",
                                      [experiment]).fetchall()]


def dimensions(con, experiment: str, revision: int) -> tuple[list[str], dict[str, str]]:
    """(dimensions that vary between the experiment's runs, {dimension: value} of those that do not).

    ``runs`` has a column for every dimension of every experiment; the ones this experiment never
    set are NULL throughout and left out."""
    cols = [r[0] for r in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs' ORDER BY column_index").fetchall()]
    dims = [c for c in cols if c not in RUN_COLUMNS]
    if not dims:
        return [], {}
    exprs = ", ".join(f"count(DISTINCT {_q(d)}), count({_q(d)}), min({_q(d)})::VARCHAR" for d in dims)
    row = con.execute(f"SELECT {exprs} FROM runs WHERE experiment = ? AND revision = ?", [experiment, revision]).fetchone()
    varying, fixed = [], {}
    for i, d in enumerate(dims):
        distinct, present, value = row[3 * i: 3 * i + 3]
        if distinct > 1:
            varying.append(d)
        elif present:
            fixed[d] = value
    return varying, fixed


def _cells(con, experiment: str, revision: int, varying: list[str]) -> list[dict]:
    """One dict per cell: cell_id, label (its varying values), dimension values, run counts, medians."""
    dim_sel = "".join(f", any_value({_q(d)}) AS {_q(d)}" for d in varying)
    order = ", ".join(_q(d) for d in varying) or "cell_id"
    cells = {}
    for row in con.execute(f"""
            SELECT cell_id, any_value(runs) AS runs, any_value(ok_runs) AS ok_runs,
                   any_value(failed_runs) AS failed_runs, any_value(timeout_runs) AS timeout_runs,
                   any_value(lost_tasks) AS lost_tasks {dim_sel}
            FROM cell_summary WHERE experiment = ? AND revision = ? GROUP BY cell_id ORDER BY {order}""",
            [experiment, revision]).fetchall():
        cell = dict(zip(["cell_id", "runs", "ok_runs", "failed_runs", "timeout_runs", "lost_tasks", *varying], row))
        cell["label"] = " / ".join(str(cell[d]) for d in varying) or cell["cell_id"]
        cell["medians"] = {}
        cells[cell["cell_id"]] = cell
    for cell_id, metric, median, n, lo, hi in con.execute(
            "SELECT cell_id, metric, median, n, min, max FROM cell_summary WHERE experiment = ? AND revision = ? "
            "AND metric IS NOT NULL", [experiment, revision]).fetchall():
        cells[cell_id]["medians"][metric] = (median, n, lo, hi)
    return list(cells.values())


def _fixed_caption(fixed: dict[str, str], extra: str = "") -> str:
    same = ", ".join(f"{k}={v}" for k, v in fixed.items())
    return " ".join(s for s in (extra, f"Same in every run: {same}." if same else "") if s)


def _rate_chart(cells: list[dict], varying: list[str], caption: str) -> Chart | None:
    metric = "consume_rate" if any(c["medians"].get("consume_rate", (None,))[0] is not None for c in cells) \
        else "makespan_s"
    x = "concurrency" if "concurrency" in varying else (varying[0] if varying else "cell")
    facet = "broker" if "broker" in varying and x != "broker" else None
    # Colour by pool; any other varying dimension joins the colour so one line is one series of cells.
    series_dims = [d for d in varying if d not in (x, facet)]
    series_dims.sort(key=lambda d: d != "pool")
    rows = []
    for c in cells:
        median, n, lo, hi = c["medians"].get(metric, (None, 0, None, None))
        if median is None:
            continue
        row = {"cell": c["label"], "median": median, "n": n, "min": lo, "max": hi,
               x: c["label"] if x == "cell" else c[x]}
        if facet:
            row[facet] = c[facet]
        if series_dims:
            row["series"] = " / ".join(str(c[d]) for d in series_dims)
        rows.append(row)
    if not rows:
        return None
    color_title = " / ".join(series_dims)
    spec = charts.rate_vs_concurrency(rows, metric, x, "series" if series_dims else None, facet,
                                      f"{metric} vs {x}", color_title or None).to_dict()
    note = "Median over ok runs; bars span min–max."
    if color_title:
        note += f" Colour: {color_title}."
    return Chart("throughput", f"{TITLES.get(metric, metric)} vs {x}", f"{note} {caption}".strip(), spec)


def _latency_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    cols = ("min_s", "p25_s", "p50_s", "p75_s", "p90_s", "p95_s", "p99_s", "max_s")
    rows = con.execute(f"""
        SELECT r.cell_id, {', '.join(f'median(l.{c}) AS {c}' for c in cols)}
        FROM latency_percentiles l JOIN runs r USING (run_id)
        WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' GROUP BY r.cell_id""",
                       [experiment, revision]).fetchall()
    data = [{"cell": labels.get(r[0], r[0]), **dict(zip(cols, r[1:]))} for r in rows]
    if not data:
        return None
    order = {c["label"]: i for i, c in enumerate(cells)}
    data.sort(key=lambda d: order.get(d["cell"], 0))
    spec = charts.latency_boxes(data, "latency per cell").to_dict()
    return Chart("latency", "Task latency per cell",
                 "Box p25–p75, tick at p50, whisker min–p99, diamond at max; each the median over the cell's ok "
                 "runs, warm-up left out. " + caption, spec)


def _memory_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    runs = con.execute("""
        SELECT run_id, cell_id FROM runs WHERE experiment = ? AND revision = ? AND status = 'ok'
          AND run_id IN (SELECT run_id FROM samples)
        QUALIFY row_number() OVER (PARTITION BY cell_id ORDER BY repeat, started_at) = 1""",
                         [experiment, revision]).fetchall()
    order = {c["cell_id"]: i for i, c in enumerate(cells)}
    runs = sorted(runs, key=lambda r: order.get(r[1], 0))[:MEMORY_RUNS]
    if not runs:
        return None
    # Bucket ticks (max per host within a bucket, then summed over hosts: ticks of hosts are not aligned).
    rows = con.execute(f"""
        WITH m AS (SELECT * FROM memory_timeseries WHERE run_id IN (SELECT unnest(?::VARCHAR[]))),
        w AS (SELECT run_id, greatest(max(t_s) / {MEMORY_POINTS}, 0.2) AS step FROM m GROUP BY run_id),
        b AS (SELECT m.run_id, m.host, m.role, floor(m.t_s / w.step) * w.step AS t_s, max(m.rss_bytes) AS rss
              FROM m JOIN w USING (run_id) GROUP BY ALL)
        SELECT run_id, role, t_s, sum(rss) / 1e6 AS rss_mb FROM b GROUP BY ALL ORDER BY ALL""",
                       [[r[0] for r in runs]]).fetchall()
    cell_of = dict(runs)
    data = [{"cell": labels.get(cell_of[r], r), "role": role, "t_s": t, "rss_mb": mb} for r, role, t, mb in rows]
    spec = charts.memory_over_time(data, "memory over time").to_dict()
    return Chart("memory", "Memory over time per role",
                 f"RSS summed over each role's processes, first ok run of {len(runs)} cell(s). " + caption, spec)


def _peak_chart(cells: list[dict], caption: str) -> Chart | None:
    data = []
    for c in cells:
        for metric, measure in (("peak_rss_bytes", "peak RSS"), ("peak_pss_bytes", "peak PSS")):
            median = c["medians"].get(metric, (None,))[0]
            if median is not None:
                data.append({"cell": c["label"], "measure": measure, "mb": median / 1e6})
    if not data:
        return None
    return Chart("peak_memory", "Peak worker memory per cell",
                 "Peak of the summed worker processes; RSS counts pages prefork children share once per "
                 "process, PSS splits them. " + caption, charts.peak_memory(data, "peak memory").to_dict())


def _connections_chart(con, experiment: str, revision: int, varying: list[str], caption: str) -> Chart | None:
    x = "pool" if "pool" in varying else None
    facet = "broker" if "broker" in varying else None
    group = [d for d in (x, facet) if d]
    sel = "".join(f"r.{_q(d)}, " for d in group)
    rows = con.execute(f"""
        SELECT {sel} c.role, median(c.max_connections) AS max_connections
        FROM connection_maxima c JOIN runs r USING (run_id)
        WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' GROUP BY ALL ORDER BY ALL""",
                       [experiment, revision]).fetchall()
    if not rows:
        return None
    keys = [*group, "role", "max_connections"]
    data = [dict(zip(keys, r)) for r in rows]
    if not x:
        for d in data:
            d["all runs"] = "all runs"
    spec = charts.connections(data, x or "all runs", facet, "connections").to_dict()
    return Chart("connections", "Connections by pool" if x else "Connections",
                 "Most connections seen at once during a run (median over ok runs"
                 + (", pooled over other dimensions" if len(varying) > len(group) else "") + "). " + caption, spec)


def build_charts(con, experiment: str, revision: int = 1) -> tuple[list[dict], list[str], dict[str, str], list[Chart]]:
    """(cells, varying dimensions, fixed dimensions, charts that fit the data) of one revision of
    one experiment (revisions are different definitions: never pooled)."""
    varying, fixed = dimensions(con, experiment, revision)
    cells = _cells(con, experiment, revision, varying)
    caption = _fixed_caption(fixed)
    found = [_rate_chart(cells, varying, caption), _latency_chart(con, experiment, revision, cells, caption),
             _memory_chart(con, experiment, revision, cells, caption), _peak_chart(cells, caption),
             _connections_chart(con, experiment, revision, varying, caption)]
    return cells, varying, fixed, [c for c in found if c is not None]


@lru_cache(maxsize=1)
def _javascript() -> str:
    # Vega, Vega-Lite and Vega-Embed in one script, so the page needs no network. Only "</script"
    # is escaped (it would close the inline script; "<\/script" means the same in strings and regexes).
    return re.sub(r"</(script)", r"<\\/\1", vl_convert.javascript_bundle(), flags=re.IGNORECASE)


def write_report(con, experiment: str, out_dir: Path, revision: int | None = None) -> Report:
    """Write ``index.html`` (self-contained) and ``<chart>.png`` / ``<chart>.vl.json`` into ``out_dir``,
    for one revision of the experiment (default its latest)."""
    known = revisions(con, experiment)
    if not known:
        raise LookupError(f"experiment {experiment!r} has no runs in this database")
    if revision is not None and revision not in known:
        raise LookupError(f"experiment {experiment!r} has no revision {revision} in this database "
                          f"(it has {', '.join(map(str, known))})")
    chosen = known[-1] if revision is None else revision
    cells, varying, fixed, found = build_charts(con, experiment, chosen)
    out_dir.mkdir(parents=True, exist_ok=True)
    for chart in found:
        (out_dir / f"{chart.name}.vl.json").write_text(json.dumps(chart.spec, indent=1))
        (out_dir / f"{chart.name}.png").write_bytes(vl_convert.vegalite_to_png(chart.spec, scale=1.5))
    from analysis.page import render_html  # the page template, kept apart from the data work

    page = out_dir / "index.html"
    page.write_text(render_html(experiment, cells, varying, fixed, found, TABLE_METRICS, _javascript(),
                                revision_note(chosen, known), tuple(pitfall_notes(con, experiment, chosen))))
    return Report(experiment, out_dir, page, tuple(c.name for c in found), len(cells),
                  sum(c["runs"] for c in cells), chosen)


def revision_note(chosen: int, known: list[int]) -> str:
    """What the page says about revisions: only when there is more than one."""
    if len(known) < 2:
        return ""
    which = "the latest" if chosen == known[-1] else f"not the latest ({known[-1]})"
    return (f"Revision {chosen} of {len(known)}, {which}: the experiment's definition changed between revisions, "
            "so their runs are reported apart (cmx report --revision N for another).")


def pitfall_notes(con, experiment: str, revision: int) -> list[str]:
    """The validate warnings (engine/pitfalls.py) for the cells this revision ran, from the
    dimension values stored with its runs."""
    from types import SimpleNamespace

    from engine.pitfalls import warnings

    cols = [r[0] for r in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs' ORDER BY column_index").fetchall()]
    dims = [c for c in cols if c not in RUN_COLUMNS]
    if not dims:
        return []
    sel = ", ".join(f"any_value({_q(d)})" for d in dims)
    cells = []
    for cell_id, *values in con.execute(f"SELECT cell_id, {sel} FROM runs WHERE experiment = ? AND revision = ? "
                                        "GROUP BY cell_id ORDER BY cell_id", [experiment, revision]).fetchall():
        cells.append(SimpleNamespace(cell_id=cell_id, values={d: _decoded(v) for d, v in zip(dims, values)
                                                              if v is not None}))
    return warnings(cells)


def _decoded(value):
    # Mappings and lists (celery.broker_transport_options, say) are stored as JSON text, and so are
    # the numbers of a column whose values are of mixed types (null and 1: '1').
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value
