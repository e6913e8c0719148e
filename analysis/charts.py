"""Altair chart builders for the report. They only draw: each takes rows already aggregated in
SQL (a few per cell or per tick, never raw task rows) and the names of the dimensions to encode.

Facets and colours are used only for dimensions with more than one value; the report puts the
others in the chart's caption.
"""
from __future__ import annotations

import altair as alt

WIDTH = 260


def _data(rows: list[dict]) -> alt.Data:
    return alt.Data(values=rows)


def _facet(chart: alt.Chart, facet: str | None, columns: int = 4) -> alt.Chart | alt.FacetChart:
    return chart.facet(facet=alt.Facet(f"{facet}:N", title=facet), columns=columns) if facet else chart


def _field(name: str) -> str:
    # Dimension names such as "params.size_mb" hold a dot, which Vega-Lite reads as a nested path.
    return name.replace(".", "\\.")


def rate_vs_concurrency(rows: list[dict], metric: str, x: str, color: str | None, facet: str | None,
                        title: str, color_title: str | None = None) -> alt.TopLevelMixin:
    """Median ``metric`` (field ``median``) against ``x``, its 95 % interval (``low``..``high``) as an
    error bar and ``n`` written beside each point; one line per ``color``."""
    base = alt.Chart(_data(rows)).encode(
        x=alt.X(f"{_field(x)}:Q" if x == "concurrency" else f"{_field(x)}:O", title=x,
                scale=alt.Scale(type="log", base=2) if x == "concurrency" else alt.Undefined,
                axis=alt.Axis(values=sorted({r[x] for r in rows})) if x == "concurrency" else alt.Undefined),
        color=alt.Color(f"{_field(color)}:N", title=color_title or color) if color else alt.Undefined,
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y("median:Q", title=metric),
        tooltip=[alt.Tooltip("cell:N"), alt.Tooltip("median:Q", format=",.4g"), alt.Tooltip("low:Q", format=",.4g"),
                 alt.Tooltip("high:Q", format=",.4g"), alt.Tooltip("n:Q", title="ok runs")],
    )
    spread = base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title=metric), y2="high:Q")
    n = base.mark_text(align="left", dx=5, dy=-7, fontSize=9).encode(y="median:Q", text="n_label:N")
    return _facet(alt.layer(line, spread, n).properties(width=WIDTH, height=200), facet).properties(title=title)


def latency_boxes(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """A box per cell from percentiles computed in SQL (min_s, p25_s, p50_s, p75_s, p99_s, max_s):
    whisker min..p99, box p25..p75, tick at p50, diamond at max; the 95 % intervals of p50 and p99
    over the cell's runs (p50_low..p50_high, p99_low..p99_high) as short black / red bars."""
    base = alt.Chart(_data(rows)).encode(y=alt.Y("cell:N", title=None, sort=None))
    whisker = base.mark_rule().encode(x=alt.X("min_s:Q", title="latency (s), finished − intended send (stream) or − sent"), x2="p99_s:Q")
    box = base.mark_bar(size=12, opacity=0.7).encode(x="p25_s:Q", x2="p75_s:Q", color=alt.value("#4c78a8"))
    median = base.mark_tick(color="black", size=12, thickness=2).encode(
        x="p50_s:Q", tooltip=[alt.Tooltip(f"{c}:Q", format=".3f") for c in ("p50_s", "p90_s", "p95_s", "p99_s", "max_s")]
        + [alt.Tooltip("cell:N")])
    tail = base.mark_point(shape="diamond", color="firebrick").encode(x="max_s:Q")
    p50_ci = base.mark_rule(color="black", strokeWidth=3, yOffset=9).encode(x="p50_low:Q", x2="p50_high:Q")
    p99_ci = base.mark_rule(color="firebrick", strokeWidth=3, yOffset=9).encode(x="p99_low:Q", x2="p99_high:Q")
    return alt.layer(whisker, box, median, tail, p50_ci, p99_ci).properties(width=560, title=title)


#: HdrHistogram's x axis: a percentile q sits at 1 / (1 - q), on a log scale.
SPECTRUM_TICKS = {2: "50%", 10: "90%", 100: "99%", 1000: "99.9%", 10000: "99.99%", 100000: "max"}


def latency_spectrum(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """Latency against percentile, HdrHistogram style: x is 1/(1−q) on a log scale (50 %, 90 %,
    99 %, 99.9 %, 99.99 %, max), y the latency on a log scale; one line per cell."""
    label = " : ".join(f"datum.value == {v} ? '{t}'" for v, t in SPECTRUM_TICKS.items()) + " : ''"
    return alt.Chart(_data(rows)).mark_line(point=True).encode(
        x=alt.X("x:Q", title="percentile", scale=alt.Scale(type="log"),
                axis=alt.Axis(values=list(SPECTRUM_TICKS), labelExpr=label, grid=True)),
        y=alt.Y("latency_s:Q", title="latency (s), finished − sent", scale=alt.Scale(type="log")),
        color=alt.Color("cell:N", title=None, sort=None),
        tooltip=["cell:N", "percentile:N", alt.Tooltip("latency_s:Q", format=".4f"), "tasks:Q", "runs:Q"],
    ).properties(width=560, height=280, title=title)


def rate_over_time(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """Per run panel: tasks finished per second (line) and queue depth (area, its own axis).
    Panels are concatenated, not facetted: Vega-Lite cannot facet a layer with independent axes."""
    panels = []
    for run in dict.fromkeys(r["run"] for r in rows):
        base = alt.Chart(_data([r for r in rows if r["run"] == run])).encode(
            x=alt.X("second:Q", title="seconds since the first task was sent"))
        rate = base.mark_line(color="#4c78a8").encode(
            y=alt.Y("rate:Q", title="finished per second", axis=alt.Axis(titleColor="#4c78a8")),
            tooltip=["second:Q", "width_s:Q", "completed:Q", alt.Tooltip("rate:Q", format=",.0f"), "queue_depth:Q"])
        depth = base.mark_area(color="#f58518", opacity=0.3).encode(
            y=alt.Y("queue_depth:Q", title="queue depth", axis=alt.Axis(titleColor="#f58518")))
        panels.append(alt.layer(depth, rate).resolve_scale(y="independent")
                      .properties(width=WIDTH, height=160, title=run))
    return alt.concat(*panels, columns=3).properties(title=title)


def rate_latency(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """Latency (median over runs, 95 % interval as an error bar) against achieved rate, one line per
    cell and latency percentile, as rabbitmq-perf-test's rate-vs-latency scenarios draw it."""
    base = alt.Chart(_data(rows)).encode(
        x=alt.X("rate:Q", title="achieved consume rate (tasks/s), median over runs"),
        color=alt.Color("series:N", title=None, sort=None))
    line = base.mark_line(point=True).encode(
        y=alt.Y("latency_s:Q", title="latency (s)", scale=alt.Scale(type="log")),
        tooltip=["series:N", "fraction:Q", alt.Tooltip("rate:Q", format=",.0f"),
                 alt.Tooltip("latency_s:Q", format=".4f"), "n:Q"])
    spread = base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title="latency (s)"), y2="high:Q")
    n = base.mark_text(align="left", dx=5, dy=-7, fontSize=9).encode(y="latency_s:Q", text="n_label:N")
    return alt.layer(line, spread, n).properties(width=560, height=280, title=title)


def memory_over_time(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """Summed RSS (MiB) of each role against seconds since run start, one panel per run."""
    chart = alt.Chart(_data(rows)).mark_line().encode(
        x=alt.X("t_s:Q", title="seconds since run start"),
        y=alt.Y("rss_mb:Q", title="RSS (MiB), summed per role"),
        color=alt.Color("role:N"),
        tooltip=["role:N", alt.Tooltip("t_s:Q", format=".1f"), alt.Tooltip("rss_mb:Q", format=".1f")],
    ).properties(width=WIDTH, height=180)
    return chart.facet(facet=alt.Facet("cell:N", title=None), columns=3).properties(title=title)


def peak_memory(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """Median peak PSS and RSS (MiB) per cell, side by side (RSS over-counts shared pages; PSS does
    not), with the 95 % interval of each median as an error bar."""
    base = alt.Chart(_data(rows)).encode(y=alt.Y("cell:N", title=None, sort=None), yOffset=alt.YOffset("measure:N", sort=["peak PSS", "peak RSS"]))
    bars = base.mark_bar().encode(
        x=alt.X("mb:Q", title="peak worker memory (MiB), median over ok runs"),
        color=alt.Color("measure:N", title=None, sort=["peak PSS", "peak RSS"]),
        tooltip=["cell:N", "measure:N", alt.Tooltip("mb:Q", format=".1f"), alt.Tooltip("low_mb:Q", format=".1f"),
                 alt.Tooltip("high_mb:Q", format=".1f"), "n:Q"],
    )
    spread = base.mark_rule(color="black").encode(x="low_mb:Q", x2="high_mb:Q")
    return alt.layer(bars, spread).properties(width=520, title=title)


def connections(rows: list[dict], x: str, series: str | None, title: str,
                series_title: str | None = None) -> alt.TopLevelMixin:
    """Median of the per-run most connections at once against ``x`` (concurrency: a line per
    ``series``; otherwise bars side by side), its 95 % interval as an error bar, one panel per role
    (broker, backend): nothing is pooled across the dimensions on the axes."""
    is_q = x == "concurrency"
    base = alt.Chart(_data(rows)).encode(
        x=alt.X(f"{_field(x)}:Q" if is_q else f"{_field(x)}:N", title=x,
                scale=alt.Scale(type="log", base=2) if is_q else alt.Undefined,
                axis=alt.Axis(values=sorted({r[x] for r in rows})) if is_q else alt.Undefined),
        color=alt.Color(f"{_field(series)}:N", title=series_title or series) if series else alt.Undefined,
    )
    tooltip = [alt.Tooltip(f"{_field(x)}:N"), "role:N", alt.Tooltip("max_connections:Q", title="median"),
               alt.Tooltip("low:Q"), alt.Tooltip("high:Q"), alt.Tooltip("n:Q", title="ok runs")] + ([alt.Tooltip(f"{_field(series)}:N")] if series else [])
    y_title = "most connections at once (median over runs)"
    y = alt.Y("max_connections:Q", title=y_title)
    if is_q:
        marks = base.mark_line(point=True).encode(y=y, tooltip=tooltip)
        spread = base.mark_errorbar().encode(y=alt.Y("low:Q", title=y_title), y2="high:Q")
    else:
        offset = alt.XOffset(f"{_field(series)}:N") if series else alt.Undefined
        marks = base.mark_bar().encode(y=y, xOffset=offset, tooltip=tooltip)
        spread = base.mark_errorbar().encode(y=alt.Y("low:Q", title=y_title), y2="high:Q", xOffset=offset)
    chart = alt.layer(marks, spread).properties(width=WIDTH, height=200)
    return chart.facet(facet=alt.Facet("role:N", title=None), columns=2).properties(title=title)
