"""The report's charts: each takes the cells (analysis/report_cells.py) or a few aggregated rows
from the views, and returns a :class:`Chart`, or None when its data is empty (the chart is left out)."""

from __future__ import annotations

from cmx.analysis import charts, legend, stats
from cmx.analysis.chartspec import Chart
from cmx.analysis.report_cells import _q, cells_of, dimensions, table_metrics
from cmx.analysis.report_timelines import memory_chart, rate_over_time_chart
from cmx.engine.results import metricdefs
from cmx.workloads.vocab import metrics as M


#: Summary-table columns when the experiment's workload is not registered here: every declared
#: metric with a better direction that the runs have (the workload's headline metrics otherwise).
CHARTED = (
    M.CONSUME_RATE,
    M.MAKESPAN_S,
    M.PEAK_RSS_BYTES,
    M.PEAK_PSS_BYTES,
    M.LATENCY_P50_S,  # medians the
    M.LATENCY_P99_S,
    M.MAX_SUSTAINABLE_RATE,
)  # charts draw
FRACTION = "params.rate_fraction"  # the rate-vs-latency sweeps' dimension (engine/plan/ratesearch.py)


def _n_label(n: int | None) -> str:
    return f"n={n}" if n else ""


def _fixed_caption(fixed: dict[str, str], extra: str = "") -> str:
    same = ", ".join(f"{k}={v}" for k, v in fixed.items())
    return " ".join(s for s in (extra, f"Same in every run: {same}." if same else "") if s)


def _rate_chart(cells: list[dict], varying: list[str], caption: str) -> Chart | None:
    metric = (
        M.CONSUME_RATE if any(c["medians"].get(M.CONSUME_RATE, (None,))[0] is not None for c in cells) else M.MAKESPAN_S
    )
    x = "concurrency" if "concurrency" in varying else (varying[0] if varying else "cell")
    others = [d for d in varying if d != x]  # one line per combination of them: legend.assign splits them
    rows = []
    for c in cells:
        median, n, lo, hi = c["medians"].get(metric, (None, 0, None, None))
        if median is None:
            continue
        rows.append(
            {
                "cell": c["label"],
                "median": median,
                "n": n,
                "low": lo,
                "high": hi,
                "n_label": _n_label(n),
                x: c["label"] if x == "cell" else c[x],
                **{d: c[d] for d in others},
                "line": " / ".join(str(c[d]) for d in others),
            }
        )
    if not rows:
        return None
    series = legend.assign(rows, others)
    spec = charts.rate_vs_concurrency(rows, metric, x, series, f"{metric} vs {x}").to_dict()
    note = f"Median over ok runs; bars span its 95 % bootstrap interval; n = ok runs. {series.caption()}"
    return Chart("throughput", f"{metricdefs.get(metric).label} vs {x}", f"{note} {caption}".strip(), spec)


def _latency_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    cols = ("min_s", "p25_s", "p50_s", "p75_s", "p90_s", "p95_s", "p99_s", "max_s")
    rows = con.execute(
        f"""
        SELECT r.cell_id, {', '.join(f'median(l.{c}) AS {c}' for c in cols)}, list(l.p50_s), list(l.p99_s)
        FROM latency_percentiles l JOIN runs r USING (run_id)
        WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' GROUP BY r.cell_id""",
        [experiment, revision],
    ).fetchall()
    # A cell whose workload drops latency for its params (a backlog: finished - sent is queue
    # position there) is left out; the table shows its queue wait and service time instead.
    hidden = {c["cell_id"] for c in cells if c.get("shown") is not None and M.LATENCY_P50_S not in c["shown"]}
    rows = [r for r in rows if r[0] not in hidden]
    summaries = iter(stats.summarize_many([values for r in rows for values in (r[-2], r[-1])]))
    data = []
    for r in rows:
        p50, p99 = next(summaries), next(summaries)
        data.append(
            {
                "cell": f"{labels.get(r[0], r[0])} (n={p50.n})",
                "order": labels.get(r[0], r[0]),
                **dict(zip(cols, r[1:-2])),
                "p50_low": p50.low,
                "p50_high": p50.high,
                "p99_low": p99.low,
                "p99_high": p99.high,
            }
        )
    if not data:
        return None
    order = {c["label"]: i for i, c in enumerate(cells)}
    data.sort(key=lambda d: order.get(d.pop("order"), 0))
    spec = charts.latency_boxes(data, "latency per cell").to_dict()
    return Chart(
        "latency",
        "Task latency per cell",
        "Finished − intended send (stream) or − sent; box p25–p75, tick at p50, whisker min–p99, diamond "
        "at max; each the median over the cell's n ok runs, warm-up left out"
        + (f"; {len(hidden)} backlog cell(s) left out (see queue wait and service time in the table)" if hidden else "")
        + ". Thick bars under the box: the 95 % interval of p50 (black) and p99 "
        "(red) over those runs. " + caption,
        spec,
    )


def _spectrum_chart(
    con, experiment: str, revision: int, cells: list[dict], varying: list[str], caption: str
) -> Chart | None:
    by_id = {c["cell_id"]: c for c in cells}
    labels = {c["cell_id"]: c["label"] for c in cells}
    points = (
        ("p50_s", 0.5, "50%"),
        ("p90_s", 0.9, "90%"),
        ("p99_s", 0.99, "99%"),
        ("p999_s", 0.999, "99.9%"),
        ("p9999_s", 0.9999, "99.99%"),
    )
    rows = con.execute(
        f"""SELECT cell_id, runs, tasks, {', '.join(c for c, _, _ in points)}, max_s
                           FROM latency_spectrum WHERE experiment = ? AND revision = ?""",
        [experiment, revision],
    ).fetchall()
    order = {c["cell_id"]: i for i, c in enumerate(cells)}
    data = []
    for cell_id, runs, tasks, *values in sorted(rows, key=lambda r: order.get(r[0], 0)):
        name = f"{labels.get(cell_id, cell_id)} (n={runs}, {tasks:,} tasks)"
        dims = {d: by_id[cell_id][d] for d in varying} if cell_id in by_id else {}
        for (_, q, label), v in zip(points, values):
            if 1 / (1 - q) <= tasks:  # a percentile finer than 1 in `tasks` is just the maximum again
                data.append(
                    {
                        "cell": name,
                        "percentile": label,
                        "x": round(1 / (1 - q)),
                        "latency_s": v,
                        "tasks": tasks,
                        "runs": runs,
                        **dims,
                    }
                )
        data.append(
            {
                "cell": name,
                "percentile": "max",
                "x": 100000,
                "latency_s": values[-1],
                "tasks": tasks,
                "runs": runs,
                **dims,
            }
        )
    if not data:
        return None
    series = legend.assign(data, varying)
    return Chart(
        "latency_spectrum",
        "Latency by percentile per cell",
        "HdrHistogram style: every task of the cell's n ok runs pooled (warm-up left out), latency at "
        "p50 … p99.99 and max, both axes logarithmic; a percentile the task count cannot resolve is "
        f"left out. {series.caption()} {caption}".replace("  ", " "),
        charts.latency_spectrum(data, series, "latency by percentile").to_dict(),
    )


def _peak_chart(cells: list[dict], caption: str) -> Chart | None:
    data = []
    for c in cells:
        for metric in (M.PEAK_PSS_BYTES, M.PEAK_RSS_BYTES):  # PSS first: RSS over-counts shared pages
            median, n, lo, hi = c["medians"].get(metric, (None, 0, None, None))
            if median is not None:
                data.append(
                    {
                        "cell": f"{c['label']} (n={n})",
                        "measure": metricdefs.get(metric).label,
                        "mb": median / 2**20,
                        "low_mb": None if lo is None else lo / 2**20,
                        "high_mb": None if hi is None else hi / 2**20,
                        "n": n,
                    }
                )
    if not data:
        return None
    return Chart(
        "peak_memory",
        "Peak worker memory per cell",
        "Peak of the summed worker processes in MiB, median over n ok runs with its 95 % interval; PSS "
        "(first) splits the pages prefork children share, RSS counts them once per process. " + caption,
        charts.peak_memory(data, "peak memory").to_dict(),
    )


def _connections_chart(con, experiment: str, revision: int, varying: list[str], caption: str) -> Chart | None:
    # Concurrency stays on the x axis and pool (and broker/backend) on the colour: connection counts
    # grow with concurrency in some pools (prefork opens one per child), which a median across
    # concurrency levels would hide.
    x = next((d for d in ("concurrency", "pool") if d in varying), None)
    series_dims = [d for d in ("pool", "broker", "backend") if d in varying and d != x]
    group = [d for d in (x, *series_dims) if d]
    sel = "".join(f"r.{_q(d)}, " for d in group)
    rows = con.execute(
        f"""
        SELECT {sel} c.role, list(c.max_connections ORDER BY r.run_id)
        FROM connection_maxima c JOIN runs r USING (run_id)
        WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' GROUP BY ALL ORDER BY ALL""",
        [experiment, revision],
    ).fetchall()
    if not rows:
        return None
    data = []
    for *keys, role, values in rows:
        st = stats.summarize(values)
        d = {
            **dict(zip(group, keys)),
            "role": role,
            "max_connections": st.median,
            "low": st.low,
            "high": st.high,
            "n": st.n,
        }
        if not x:
            d["all runs"] = "all runs"
        if series_dims:
            d["line"] = " / ".join(str(d[s]) for s in series_dims)
        data.append(d)
    series = legend.assign(data, series_dims, dash=x == "concurrency")
    spec = charts.connections(data, x or "all runs", series, "connections").to_dict()
    pooled = [d for d in varying if d not in group]
    note = (
        "Most connections of the run's own clients (workers and driver) at once; median over n ok runs, "
        "bars span its 95 % interval"
    )
    note += f". {series.caption()[:-1]}" if series_dims else ""
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
        best = c["medians"].get(M.MAX_SUSTAINABLE_RATE, (None,))[0]
        if best is not None:
            found.append(f"{group}: {best:,.0f}/s")
        rate = c["medians"].get(M.CONSUME_RATE, (None,))[0]
        if c.get(FRACTION) is None or rate is None:
            continue
        for metric, name in ((M.LATENCY_P50_S, "p50"), (M.LATENCY_P99_S, "p99")):
            median, n, low, high = c["medians"].get(metric, (None, 0, None, None))
            if median is not None:
                data.append(
                    {
                        "series": f"{group} {name}",
                        "fraction": c[FRACTION],
                        "rate": rate,
                        "latency_s": median,
                        "low": low,
                        "high": high,
                        "n": n,
                        "n_label": _n_label(n),
                        "percentile": name,
                        **{d: c[d] for d in group_dims},
                    }
                )
    if not data:
        return None
    series = legend.assign(data, [*group_dims, "percentile"])
    note = (
        "Each point is one cell run at a fraction of its maximum sustainable rate (found first by one ramp "
        "search run per cell"
        + (": " + "; ".join(found) if found else "")
        + "). x: median achieved consume rate; y: median p50 and "
        f"p99 latency over n ok runs with the 95 % interval. {series.caption()}"
    )
    return Chart(
        "rate_latency",
        "Latency against achieved rate",
        f"{note} {caption}".strip(),
        charts.rate_latency(
            sorted(data, key=lambda d: (d["series"], d["fraction"])), series, "latency vs rate"
        ).to_dict(),
    )


def build_charts(
    con, experiment: str, revision: int = 1, on_chart=None
) -> tuple[list[dict], list[str], dict[str, str], list[Chart]]:
    """(cells, varying dimensions, fixed dimensions, charts that fit the data) of one revision of
    one experiment (revisions are different definitions: never pooled); ``on_chart(chart)`` is
    called with each as soon as it is built (the report draws its PNG meanwhile)."""
    varying, fixed = dimensions(con, experiment, revision)
    shown = tuple(dict.fromkeys([*table_metrics(con, experiment), *CHARTED]))
    cells = cells_of(con, experiment, revision, varying, shown)
    caption = _fixed_caption(fixed)
    builders = [
        lambda: _rate_chart(cells, varying, caption),
        lambda: _rate_latency_chart(cells, varying, caption),
        lambda: _latency_chart(con, experiment, revision, cells, caption),
        lambda: _spectrum_chart(con, experiment, revision, cells, varying, caption),
        lambda: rate_over_time_chart(con, experiment, revision, cells, caption),
        lambda: memory_chart(con, experiment, revision, cells, caption),
        lambda: _peak_chart(cells, caption),
        lambda: _connections_chart(con, experiment, revision, varying, caption),
    ]
    found = []
    for build in builders:
        chart = build()
        if chart is not None:
            found.append(chart)
            if on_chart is not None:
                on_chart(chart)
    return cells, varying, fixed, found
