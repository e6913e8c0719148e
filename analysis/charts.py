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
    """Median ``metric`` (field ``median``) against ``x``, min–max as an error bar; one line per ``color``."""
    base = alt.Chart(_data(rows)).encode(
        x=alt.X(f"{_field(x)}:Q" if x == "concurrency" else f"{_field(x)}:O", title=x,
                scale=alt.Scale(type="log", base=2) if x == "concurrency" else alt.Undefined,
                axis=alt.Axis(values=sorted({r[x] for r in rows})) if x == "concurrency" else alt.Undefined),
        color=alt.Color(f"{_field(color)}:N", title=color_title or color) if color else alt.Undefined,
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y("median:Q", title=metric),
        tooltip=[alt.Tooltip("cell:N"), alt.Tooltip("median:Q", format=",.4g"), alt.Tooltip("n:Q", title="ok runs")],
    )
    spread = base.mark_errorbar().encode(y=alt.Y("min:Q", title=metric), y2="max:Q")
    return _facet(alt.layer(line, spread).properties(width=WIDTH, height=200), facet).properties(title=title)


def latency_boxes(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """A box per cell from percentiles computed in SQL (min_s, p25_s, p50_s, p75_s, p99_s, max_s):
    whisker min..p99, box p25..p75, tick at p50, diamond at max."""
    base = alt.Chart(_data(rows)).encode(y=alt.Y("cell:N", title=None, sort=None))
    whisker = base.mark_rule().encode(x=alt.X("min_s:Q", title="latency (s), finished − intended send (stream) or − sent"), x2="p99_s:Q")
    box = base.mark_bar(size=12, opacity=0.7).encode(x="p25_s:Q", x2="p75_s:Q", color=alt.value("#4c78a8"))
    median = base.mark_tick(color="black", size=12, thickness=2).encode(
        x="p50_s:Q", tooltip=[alt.Tooltip(f"{c}:Q", format=".3f") for c in ("p50_s", "p90_s", "p95_s", "p99_s", "max_s")]
        + [alt.Tooltip("cell:N")])
    tail = base.mark_point(shape="diamond", color="firebrick").encode(x="max_s:Q")
    return alt.layer(whisker, box, median, tail).properties(width=560, title=title)


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
    """Median peak PSS and RSS (MiB) per cell, side by side (RSS over-counts shared pages; PSS does not)."""
    return alt.Chart(_data(rows)).mark_bar().encode(
        y=alt.Y("cell:N", title=None, sort=None),
        yOffset=alt.YOffset("measure:N", sort=["peak PSS", "peak RSS"]),
        x=alt.X("mb:Q", title="peak worker memory (MiB), median over ok runs"),
        color=alt.Color("measure:N", title=None, sort=["peak PSS", "peak RSS"]),
        tooltip=["cell:N", "measure:N", alt.Tooltip("mb:Q", format=".1f")],
    ).properties(width=520, title=title)


def connections(rows: list[dict], x: str, series: str | None, title: str,
                series_title: str | None = None) -> alt.TopLevelMixin:
    """Median of the per-run most connections at once against ``x`` (concurrency: a line per
    ``series``; otherwise bars side by side), min–max as an error bar, one panel per role
    (broker, backend): nothing is pooled across the dimensions on the axes."""
    is_q = x == "concurrency"
    base = alt.Chart(_data(rows)).encode(
        x=alt.X(f"{_field(x)}:Q" if is_q else f"{_field(x)}:N", title=x,
                scale=alt.Scale(type="log", base=2) if is_q else alt.Undefined,
                axis=alt.Axis(values=sorted({r[x] for r in rows})) if is_q else alt.Undefined),
        color=alt.Color(f"{_field(series)}:N", title=series_title or series) if series else alt.Undefined,
    )
    tooltip = [alt.Tooltip(f"{_field(x)}:N"), "role:N", alt.Tooltip("max_connections:Q", title="median"),
               alt.Tooltip("n:Q", title="ok runs")] + ([alt.Tooltip(f"{_field(series)}:N")] if series else [])
    y_title = "most connections at once (median over runs)"
    y = alt.Y("max_connections:Q", title=y_title)
    if is_q:
        marks = base.mark_line(point=True).encode(y=y, tooltip=tooltip)
        spread = base.mark_errorbar().encode(y=alt.Y("min:Q", title=y_title), y2="max:Q")
    else:
        offset = alt.XOffset(f"{_field(series)}:N") if series else alt.Undefined
        marks = base.mark_bar().encode(y=y, xOffset=offset, tooltip=tooltip)
        spread = base.mark_errorbar().encode(y=alt.Y("min:Q", title=y_title), y2="max:Q", xOffset=offset)
    chart = alt.layer(marks, spread).properties(width=WIDTH, height=200)
    return chart.facet(facet=alt.Facet("role:N", title=None), columns=2).properties(title=title)
