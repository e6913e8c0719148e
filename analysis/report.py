"""``cmx report``: an offline HTML report of one experiment, plus a PNG and a Vega-Lite JSON per chart.

Every figure comes from the SQL views (``analysis/sql``) aggregated in DuckDB: the charts receive
a few rows per cell or per sampler tick, never raw task rows, so a report over millions of tasks
takes seconds. Which charts appear depends on the data: a chart whose data is empty is left out.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import vl_convert

from cmx.analysis import charts, stats
from cmx.engine.results import metricdefs
from cmx.engine.results.db import RUN_COLUMNS

#: Summary-table columns when the experiment's workload is not registered here: every declared
#: metric with a better direction that the runs have (the workload's headline metrics otherwise).
CHARTED = ("consume_rate", "makespan_s", "peak_rss_bytes", "peak_pss_bytes", "latency_p50_s",  # medians the
           "latency_p99_s", "max_sustainable_rate")                                          # charts draw
FRACTION = "params.rate_fraction"  # the rate-vs-latency sweeps' dimension (engine/plan/ratesearch.py)
MEMORY_RUNS = 6          # memory- and rate-over-time panels: the first ok run of at most this many cells
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
    row = con.execute(f"SELECT {exprs} FROM runs WHERE experiment = ? AND revision = ?",
                      [experiment, revision]).fetchone()
    varying, fixed = [], {}
    for i, d in enumerate(dims):
        distinct, present, value = row[3 * i: 3 * i + 3]
        if distinct > 1:
            varying.append(d)
        elif present:
            fixed[d] = value
    return varying, fixed


def _cells(con, experiment: str, revision: int, varying: list[str], shown: tuple[str, ...] = ()) -> list[dict]:
    """One dict per cell: cell_id, label (its varying values), dimension values, run counts, and
    ``medians``: {metric: (median, n, low, high)}, low..high the 95 % interval of the median for
    the metrics in ``shown`` (None for the others)."""
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
        cell["label"] = " / ".join("–" if cell[d] is None else str(cell[d]) for d in varying) or cell["cell_id"]
        cell["medians"] = {}
        cells[cell["cell_id"]] = cell
    for cell_id, metric, median, n in con.execute(
            "SELECT cell_id, metric, median, n FROM cell_summary WHERE experiment = ? AND revision = ? "
            "AND metric IS NOT NULL", [experiment, revision]).fetchall():
        cells[cell_id]["medians"][metric] = (median, n, None, None)
    # The 95 % interval of the median (seeded bootstrap) for the metrics shown; the run values
    # are a few per cell, so this stays cheap however many tasks there were.
    for cell_id, metric, values in con.execute("""
            SELECT r.cell_id, m.name, list(m.value ORDER BY r.run_id) FROM runs r JOIN metrics m USING (run_id)
            WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' AND m.value IS NOT NULL
              AND m.name IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""",
            [experiment, revision, list(shown)]).fetchall():
        s = stats.summarize(values)
        cells[cell_id]["medians"][metric] = (s.median, s.n, s.low, s.high)
    for cell_id, own in _cell_headlines(con, experiment, table_metrics(con, experiment)).items():
        if cell_id in cells:
            cells[cell_id]["shown"] = own
    return list(cells.values())


def table_metrics(con, experiment: str) -> tuple[str, ...]:
    """The summary table's columns: the workload's headline metrics, else every judged metric present."""
    from cmx.workloads.catalog import registry

    workloads = [w for (w,) in con.execute("SELECT DISTINCT workload FROM runs WHERE experiment = ?",
                                           [experiment]).fetchall()]
    names: list[str] = []
    for w in workloads:
        try:
            names += [m for m in registry.get(w).headline_metrics if m not in names]
        except KeyError:
            pass
    if names:
        # Facts every workload may carry: shown when some run has them.
        extra = [m for (m,) in con.execute(
            "SELECT DISTINCT name FROM metrics JOIN runs USING (run_id) WHERE experiment = ? AND value IS NOT NULL "
            "AND name IN ('host_share_min', 'clock_suspect') ORDER BY name DESC", [experiment]).fetchall()]
        return tuple(names) + tuple(m for m in extra if m not in names)
    present = {n for (n,) in con.execute("SELECT DISTINCT name FROM metrics JOIN runs USING (run_id) "
                                         "WHERE experiment = ?", [experiment]).fetchall()}
    return tuple(m for m, d in metricdefs.METRICS.items() if m in present and d.better is not metricdefs.Better.NEITHER)


def _cell_headlines(con, experiment: str, table: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """{cell_id: the table's metrics that mean something for it}: those its workload leaves out of
    its headline for its params are dropped (throughput backlog: latency, which is queue position
    there). A cell of a workload this version does not know keeps every column."""
    from cmx.workloads.catalog import registry

    out = {}
    for cell_id, workload, params in con.execute(
            "SELECT cell_id, any_value(workload), any_value(params) FROM run_starts WHERE experiment = ? "
            "GROUP BY cell_id", [experiment]).fetchall():
        try:
            w = registry.get(workload)
            dropped = set(w.headline_metrics) - set(w.headline(w.Params(**json.loads(params or "{}"))))
        except Exception:  # noqa: BLE001 (an unknown or changed workload: show every column)
            continue
        out[cell_id] = tuple(m for m in table if m not in dropped)
    return out


def _n_label(n: int | None) -> str:
    return f"n={n}" if n else ""


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
        row = {"cell": c["label"], "median": median, "n": n, "low": lo, "high": hi, "n_label": _n_label(n),
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
    note = "Median over ok runs; bars span its 95 % bootstrap interval; n = ok runs."
    if color_title:
        note += f" Colour: {color_title}."
    return Chart("throughput", f"{metricdefs.get(metric).label} vs {x}", f"{note} {caption}".strip(), spec)


def _latency_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    cols = ("min_s", "p25_s", "p50_s", "p75_s", "p90_s", "p95_s", "p99_s", "max_s")
    rows = con.execute(f"""
        SELECT r.cell_id, {', '.join(f'median(l.{c}) AS {c}' for c in cols)}, list(l.p50_s), list(l.p99_s)
        FROM latency_percentiles l JOIN runs r USING (run_id)
        WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' GROUP BY r.cell_id""",
                       [experiment, revision]).fetchall()
    # A cell whose workload drops latency for its params (a backlog: finished - sent is queue
    # position there) is left out; the table shows its queue wait and service time instead.
    hidden = {c["cell_id"] for c in cells if c.get("shown") is not None and "latency_p50_s" not in c["shown"]}
    data = []
    for r in rows:
        if r[0] in hidden:
            continue
        p50, p99 = stats.summarize(r[-2]), stats.summarize(r[-1])
        data.append({"cell": f"{labels.get(r[0], r[0])} (n={p50.n})", "order": labels.get(r[0], r[0]),
                     **dict(zip(cols, r[1:-2])), "p50_low": p50.low, "p50_high": p50.high, "p99_low": p99.low,
                     "p99_high": p99.high})
    if not data:
        return None
    order = {c["label"]: i for i, c in enumerate(cells)}
    data.sort(key=lambda d: order.get(d.pop("order"), 0))
    spec = charts.latency_boxes(data, "latency per cell").to_dict()
    return Chart("latency", "Task latency per cell",
                 "Finished − intended send (stream) or − sent; box p25–p75, tick at p50, whisker min–p99, diamond "
                 "at max; each the median over the cell's n ok runs, warm-up left out"
                 + (f"; {len(hidden)} backlog cell(s) left out (see queue wait and service time in the table)"
                    if hidden else "") + ". Thick bars under the box: the 95 % interval of p50 (black) and p99 "
                 "(red) over those runs. " + caption, spec)


def _spectrum_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    points = (("p50_s", 0.5, "50%"), ("p90_s", 0.9, "90%"), ("p99_s", 0.99, "99%"), ("p999_s", 0.999, "99.9%"),
              ("p9999_s", 0.9999, "99.99%"))
    rows = con.execute(f"""SELECT cell_id, runs, tasks, {', '.join(c for c, _, _ in points)}, max_s
                           FROM latency_spectrum WHERE experiment = ? AND revision = ?""",
                       [experiment, revision]).fetchall()
    order = {c["cell_id"]: i for i, c in enumerate(cells)}
    data = []
    for cell_id, runs, tasks, *values in sorted(rows, key=lambda r: order.get(r[0], 0)):
        name = f"{labels.get(cell_id, cell_id)} (n={runs}, {tasks:,} tasks)"
        for (_, q, label), v in zip(points, values):
            if 1 / (1 - q) <= tasks:  # a percentile finer than 1 in `tasks` is just the maximum again
                data.append({"cell": name, "percentile": label, "x": round(1 / (1 - q)), "latency_s": v,
                             "tasks": tasks, "runs": runs})
        data.append({"cell": name, "percentile": "max", "x": 100000, "latency_s": values[-1], "tasks": tasks,
                     "runs": runs})
    if not data:
        return None
    return Chart("latency_spectrum", "Latency by percentile per cell",
                 "HdrHistogram style: every task of the cell's n ok runs pooled (warm-up left out), latency at "
                 "p50 … p99.99 and max, both axes logarithmic; a percentile the task count cannot resolve is "
                 "left out. " + caption, charts.latency_spectrum(data, "latency by percentile").to_dict())


def _first_ok_runs(con, experiment: str, revision: int, cells: list[dict], having: str) -> list[tuple]:
    """(run_id, cell_id, repeat) of the first ok run of at most MEMORY_RUNS cells (in the table's
    order) that has rows in table ``having`` (tasks, samples): the runs the over-time panels draw."""
    runs = con.execute(f"""
        SELECT run_id, cell_id, repeat FROM runs WHERE experiment = ? AND revision = ? AND status = 'ok'
          AND run_id IN (SELECT run_id FROM {having})
        QUALIFY row_number() OVER (PARTITION BY cell_id ORDER BY repeat, started_at) = 1""",
                       [experiment, revision]).fetchall()
    order = {c["cell_id"]: i for i, c in enumerate(cells)}
    return sorted(runs, key=lambda r: order.get(r[1], 0))[:MEMORY_RUNS]


def _rate_over_time_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    runs = _first_ok_runs(con, experiment, revision, cells, "tasks")
    if not runs:
        return None
    name = {r: f"{labels.get(c, c)} #{k}" for r, c, k in runs}
    # Long runs are bucketed to about MEMORY_POINTS points a panel (mean rate, deepest queue per
    # bucket): inline chart data stays small, and a stall of one bucket still shows.
    rows = con.execute(f"""
        WITH r AS (SELECT * FROM rate_timeseries WHERE run_id IN (SELECT unnest(?::VARCHAR[]))),
        w AS (SELECT run_id, greatest(ceil((max(second) - min(second) + 1) / {MEMORY_POINTS}), 1) AS step
              FROM r GROUP BY run_id)
        SELECT run_id, floor(second / step) * step AS second, avg(completed) AS completed, max(queue_depth)
        FROM r JOIN w USING (run_id) GROUP BY ALL ORDER BY run_id, second""", [list(name)]).fetchall()
    data = [{"run": name[r], "second": s, "completed": c, "queue_depth": q} for r, s, c, q in rows]
    if not data:
        return None
    return Chart("rate_over_time", "Rate over time per run",
                 f"Tasks finished per second (line; averaged over buckets of seconds in long runs) and queue "
                 f"depth (shaded, its own axis) over one run of "
                 f"{len(runs)} cell(s), seconds from the first task sent: warm-up and stalls show here, "
                 "medians hide them. " + caption, charts.rate_over_time(data, "rate over time").to_dict())


def _memory_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    runs = [(r, c) for r, c, _ in _first_ok_runs(con, experiment, revision, cells, "samples")]
    if not runs:
        return None
    # Bucket ticks (max per host within a bucket, then summed over hosts: ticks of hosts are not aligned).
    rows = con.execute(f"""
        WITH m AS (SELECT * FROM memory_timeseries WHERE run_id IN (SELECT unnest(?::VARCHAR[]))),
        w AS (SELECT run_id, greatest(max(t_s) / {MEMORY_POINTS}, 0.2) AS step FROM m GROUP BY run_id),
        b AS (SELECT m.run_id, m.host, m.role, floor(m.t_s / w.step) * w.step AS t_s, max(m.rss_bytes) AS rss
              FROM m JOIN w USING (run_id) GROUP BY ALL)
        SELECT run_id, role, t_s, sum(rss) / 1048576 AS rss_mb FROM b GROUP BY ALL ORDER BY ALL""",
                       [[r[0] for r in runs]]).fetchall()
    cell_of = dict(runs)
    data = [{"cell": labels.get(cell_of[r], r), "role": role, "t_s": t, "rss_mb": mb} for r, role, t, mb in rows]
    spec = charts.memory_over_time(data, "memory over time").to_dict()
    return Chart("memory", "Memory over time per role",
                 f"RSS summed over each role's processes, first ok run of {len(runs)} cell(s). " + caption, spec)


def _peak_chart(cells: list[dict], caption: str) -> Chart | None:
    data = []
    for c in cells:
        for metric in ("peak_pss_bytes", "peak_rss_bytes"):  # PSS first: RSS over-counts shared pages
            median, n, lo, hi = c["medians"].get(metric, (None, 0, None, None))
            if median is not None:
                data.append({"cell": f"{c['label']} (n={n})", "measure": metricdefs.get(metric).label,
                             "mb": median / 2**20, "low_mb": None if lo is None else lo / 2**20,
                             "high_mb": None if hi is None else hi / 2**20, "n": n})
    if not data:
        return None
    return Chart("peak_memory", "Peak worker memory per cell",
                 "Peak of the summed worker processes in MiB, median over n ok runs with its 95 % interval; PSS "
                 "(first) splits the pages prefork children share, RSS counts them once per process. " + caption,
                 charts.peak_memory(data, "peak memory").to_dict())


def _connections_chart(con, experiment: str, revision: int, varying: list[str], caption: str) -> Chart | None:
    # Concurrency stays on the x axis and pool (and broker/backend) on the colour: connection counts
    # grow with concurrency in some pools (prefork opens one per child), which a median across
    # concurrency levels would hide.
    x = next((d for d in ("concurrency", "pool") if d in varying), None)
    series_dims = [d for d in ("pool", "broker", "backend") if d in varying and d != x]
    group = [d for d in (x, *series_dims) if d]
    sel = "".join(f"r.{_q(d)}, " for d in group)
    rows = con.execute(f"""
        SELECT {sel} c.role, list(c.max_connections ORDER BY r.run_id)
        FROM connection_maxima c JOIN runs r USING (run_id)
        WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' GROUP BY ALL ORDER BY ALL""",
                       [experiment, revision]).fetchall()
    if not rows:
        return None
    data = []
    for *keys, role, values in rows:
        st = stats.summarize(values)
        d = {**dict(zip(group, keys)), "role": role, "max_connections": st.median, "low": st.low, "high": st.high,
             "n": st.n}
        if not x:
            d["all runs"] = "all runs"
        if series_dims:
            d["series"] = " / ".join(str(d[s]) for s in series_dims)
        data.append(d)
    series_title = " / ".join(series_dims)
    spec = charts.connections(data, x or "all runs", "series" if series_dims else None, "connections",
                              series_title or None).to_dict()
    pooled = [d for d in varying if d not in group]
    note = "Most connections of the run's own clients (workers and driver) at once; median over n ok runs, " \
           "bars span its 95 % interval"
    note += f"; colour: {series_title}" if series_title else ""
    note += f"; pooled over {', '.join(pooled)}" if pooled else ""
    return Chart("connections", f"Connections by {x}" if x else "Connections", f"{note}. {caption}".strip(), spec)


def _rate_latency_chart(cells: list[dict], varying: list[str], caption: str) -> Chart | None:
    """Latency against achieved rate, one line per cell group (the cell without its rate_fraction)."""
    if FRACTION not in varying:
        return None
    group_dims = [d for d in varying if d not in (FRACTION, "params.mode")]
    data, found = [], []
    for c in cells:
        group = " / ".join(str(c[d]) for d in group_dims) or "all"
        best = c["medians"].get("max_sustainable_rate", (None,))[0]
        if best is not None:
            found.append(f"{group}: {best:,.0f}/s")
        rate = c["medians"].get("consume_rate", (None,))[0]
        if c.get(FRACTION) is None or rate is None:
            continue
        for metric, name in (("latency_p50_s", "p50"), ("latency_p99_s", "p99")):
            median, n, low, high = c["medians"].get(metric, (None, 0, None, None))
            if median is not None:
                data.append({"series": f"{group} {name}", "fraction": c[FRACTION], "rate": rate, "latency_s": median,
                             "low": low, "high": high, "n": n, "n_label": _n_label(n)})
    if not data:
        return None
    note = ("Each point is one cell run at a fraction of its maximum sustainable rate (found first by one ramp "
            "search run per cell"
            + (": " + "; ".join(found) if found else "") + "). x: median achieved consume rate; y: median p50 and "
            "p99 latency over n ok runs with the 95 % interval.")
    return Chart("rate_latency", "Latency against achieved rate", f"{note} {caption}".strip(),
                 charts.rate_latency(sorted(data, key=lambda d: (d["series"], d["fraction"])),
                                     "latency vs rate").to_dict())


def build_charts(con, experiment: str, revision: int = 1) -> tuple[list[dict], list[str], dict[str, str], list[Chart]]:
    """(cells, varying dimensions, fixed dimensions, charts that fit the data) of one revision of
    one experiment (revisions are different definitions: never pooled)."""
    varying, fixed = dimensions(con, experiment, revision)
    shown = tuple(dict.fromkeys([*table_metrics(con, experiment), *CHARTED]))
    cells = _cells(con, experiment, revision, varying, shown)
    caption = _fixed_caption(fixed)
    found = [_rate_chart(cells, varying, caption), _rate_latency_chart(cells, varying, caption),
             _latency_chart(con, experiment, revision, cells, caption),
             _spectrum_chart(con, experiment, revision, cells, caption),
             _rate_over_time_chart(con, experiment, revision, cells, caption),
             _memory_chart(con, experiment, revision, cells, caption), _peak_chart(cells, caption),
             _connections_chart(con, experiment, revision, varying, caption)]
    return cells, varying, fixed, [c for c in found if c is not None]


@lru_cache(maxsize=1)
def _javascript() -> str:
    # Vega, Vega-Lite and Vega-Embed in one script, so the page needs no network. Only "</script"
    # is escaped (it would close the inline script; "<\/script" means the same in strings and regexes).
    # Bundling takes ~3 s of CPU and gives the same text for a vl-convert version: kept in the
    # user's cache dir (benchmarks/scale.py: it was a third of `cmx report`'s time).
    cache = (Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "cmx"
             / f"vega-bundle-{vl_convert.__version__}.js")
    try:
        return cache.read_text()
    except OSError:
        pass
    text = re.sub(r"</(script)", r"<\\/\1", vl_convert.javascript_bundle(), flags=re.IGNORECASE)
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(cache)  # atomic: a concurrent report reads the whole bundle or none
    except OSError:
        pass  # no cache, still a report
    return text


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
    from cmx.analysis.page import render_html  # the page template, kept apart from the data work

    from cmx.analysis.hostshare import host_shares, shares_html

    page = out_dir / "index.html"
    shares = shares_html(host_shares(con, experiment, chosen), {c["cell_id"]: c["label"] for c in cells})
    page.write_text(render_html(experiment, cells, varying, fixed, found, table_metrics(con, experiment),
                                _javascript(), revision_note(chosen, known), shares,
                                tuple(pitfall_notes(con, experiment, chosen))))
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
    """The validate warnings (engine/model/pitfalls.py) for the cells this revision ran, from the
    dimension values stored with its runs."""
    from types import SimpleNamespace

    from cmx.engine.model.pitfalls import warnings

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
