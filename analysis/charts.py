"""Altair chart builders for the report. They only draw: each takes rows already aggregated in
SQL (a few per cell or per tick, never raw task rows) and the names of the dimensions to encode.

Which dimension is coloured, dashed or facetted is decided by one rule (analysis/legend.py): no
colour scale carries more than ten values. Dimensions with one value are said in the caption.
"""

from __future__ import annotations

from contextlib import contextmanager

import altair as alt
from altair.utils import schemapi

from cmx.analysis.legend import Series, channels, facet as _series_facet, field as _field

WIDTH = 260


@contextmanager
def validated_once():
    """Altair checks every object against the Vega-Lite schema as it is made (its debug mode), and
    the whole chart again in ``to_dict()``: inside this block only the latter, the same check of
    the same spec (the inline data was validated twice; about 0.3 CPU-s of a report at 100 cells)."""
    with schemapi.debug_mode(False):
        yield


def _data(rows: list[dict]) -> alt.Data:
    return alt.Data(values=rows)


def rate_vs_concurrency(rows: list[dict], metric: str, x: str, series: Series, title: str) -> alt.TopLevelMixin:
    """Median ``metric`` (field ``median``) against ``x``, its 95 % interval (``low``..``high``) as an
    error bar and ``n`` written beside each point; one line per ``line`` field (the other dimensions)."""
    base = alt.Chart(_data(rows)).encode(
        x=alt.X(
            f"{_field(x)}:Q" if x == "concurrency" else f"{_field(x)}:O",
            title=x,
            scale=alt.Scale(type="log", base=2) if x == "concurrency" else alt.Undefined,
            axis=alt.Axis(values=sorted({r[x] for r in rows})) if x == "concurrency" else alt.Undefined,
        ),
        detail="line:N",
        **channels(series),
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y("median:Q", title=metric),
        tooltip=[
            alt.Tooltip("cell:N"),
            alt.Tooltip("median:Q", format=",.4g"),
            alt.Tooltip("low:Q", format=",.4g"),
            alt.Tooltip("high:Q", format=",.4g"),
            alt.Tooltip("n:Q", title="ok runs"),
        ],
    )
    spread = base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title=metric), y2="high:Q")
    n = base.mark_text(align="left", dx=5, dy=-7, fontSize=9).encode(y="median:Q", text="n_label:N")
    return _series_facet(alt.layer(line, spread, n).properties(width=WIDTH, height=200), series).properties(title=title)


def latency_boxes(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """A box per cell from percentiles computed in SQL (min_s, p25_s, p50_s, p75_s, p99_s, max_s):
    whisker min..p99, box p25..p75, tick at p50, diamond at max; the 95 % intervals of p50 and p99
    over the cell's runs (p50_low..p50_high, p99_low..p99_high) as short black / red bars."""
    base = alt.Chart(_data(rows)).encode(y=alt.Y("cell:N", title=None, sort=None))
    whisker = base.mark_rule().encode(
        x=alt.X("min_s:Q", title="latency (s), finished − intended send (stream) or − sent"), x2="p99_s:Q"
    )
    box = base.mark_bar(size=12, opacity=0.7).encode(x="p25_s:Q", x2="p75_s:Q", color=alt.value("#4c78a8"))
    median = base.mark_tick(color="black", size=12, thickness=2).encode(
        x="p50_s:Q",
        tooltip=[alt.Tooltip(f"{c}:Q", format=".3f") for c in ("p50_s", "p90_s", "p95_s", "p99_s", "max_s")]
        + [alt.Tooltip("cell:N")],
    )
    tail = base.mark_point(shape="diamond", color="firebrick").encode(x="max_s:Q")
    p50_ci = base.mark_rule(color="black", strokeWidth=3, yOffset=9).encode(x="p50_low:Q", x2="p50_high:Q")
    p99_ci = base.mark_rule(color="firebrick", strokeWidth=3, yOffset=9).encode(x="p99_low:Q", x2="p99_high:Q")
    return alt.layer(whisker, box, median, tail, p50_ci, p99_ci).properties(width=560, title=title)


#: HdrHistogram's x axis: a percentile q sits at 1 / (1 - q), on a log scale.
SPECTRUM_TICKS = {2: "50%", 10: "90%", 100: "99%", 1000: "99.9%", 10000: "99.99%", 100000: "max"}


def latency_spectrum(rows: list[dict], series: Series, title: str) -> alt.TopLevelMixin:
    """Latency against percentile, HdrHistogram style: x is 1/(1−q) on a log scale (50 %, 90 %,
    99 %, 99.9 %, 99.99 %, max), y the latency on a log scale; one line per cell."""
    label = " : ".join(f"datum.value == {v} ? '{t}'" for v, t in SPECTRUM_TICKS.items()) + " : ''"
    chart = (
        alt.Chart(_data(rows))
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "x:Q",
                title="percentile",
                scale=alt.Scale(type="log"),
                axis=alt.Axis(values=list(SPECTRUM_TICKS), labelExpr=label, grid=True),
            ),
            y=alt.Y("latency_s:Q", title="latency (s), finished − sent", scale=alt.Scale(type="log")),
            detail="cell:N",
            **channels(series),
            tooltip=["cell:N", "percentile:N", alt.Tooltip("latency_s:Q", format=".4f"), "tasks:Q", "runs:Q"],
        )
        .properties(width=WIDTH if series.facet else 560, height=200 if series.facet else 280)
    )
    return _series_facet(chart, series).properties(title=title)


def rate_over_time(rows: list[dict], title: str, faults: list[dict] = ()) -> alt.TopLevelMixin:
    """Per run panel: tasks finished per second (line) and queue depth (area, its own axis); a fault
    run's faults as red rules where they struck (``faults``: run, second, fault).
    Panels are concatenated, not facetted: Vega-Lite cannot facet a layer with independent axes."""
    panels = []
    for run in dict.fromkeys(r["run"] for r in rows):
        base = alt.Chart(_data([r for r in rows if r["run"] == run])).encode(
            x=alt.X("second:Q", title="seconds since the first task was sent")
        )
        rate = base.mark_line(color="#4c78a8").encode(
            y=alt.Y("rate:Q", title="finished per second", axis=alt.Axis(titleColor="#4c78a8")),
            tooltip=["second:Q", "width_s:Q", "completed:Q", alt.Tooltip("rate:Q", format=",.0f"), "queue_depth:Q"],
        )
        depth = base.mark_area(color="#f58518", opacity=0.3).encode(
            y=alt.Y("queue_depth:Q", title="queue depth", axis=alt.Axis(titleColor="#f58518"))
        )
        layers = [depth, rate]
        struck = [f for f in faults if f["run"] == run]
        if struck:
            layers.append(
                alt.Chart(_data(struck))
                .mark_rule(color="#e45756", strokeWidth=2)
                .encode(x="second:Q", tooltip=["fault:N", alt.Tooltip("second:Q", format=".2f")])
            )
        panels.append(alt.layer(*layers).resolve_scale(y="independent").properties(width=WIDTH, height=160, title=run))
    return alt.concat(*panels, columns=3).properties(title=title)


def rate_latency(rows: list[dict], series: Series, title: str) -> alt.TopLevelMixin:
    """Latency (median over runs, 95 % interval as an error bar) against achieved rate, one line per
    ``series`` field (cell group and latency percentile), as rabbitmq-perf-test's rate-vs-latency
    scenarios draw it."""
    base = alt.Chart(_data(rows)).encode(
        x=alt.X("rate:Q", title="achieved consume rate (tasks/s), median over runs"),
        detail="series:N",
        **channels(series),
    )
    line = base.mark_line(point=True).encode(
        y=alt.Y("latency_s:Q", title="latency (s)", scale=alt.Scale(type="log")),
        tooltip=[
            "series:N",
            "fraction:Q",
            alt.Tooltip("rate:Q", format=",.0f"),
            alt.Tooltip("latency_s:Q", format=".4f"),
            "n:Q",
        ],
    )
    spread = base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title="latency (s)"), y2="high:Q")
    n = base.mark_text(align="left", dx=5, dy=-7, fontSize=9).encode(y="latency_s:Q", text="n_label:N")
    chart = alt.layer(line, spread, n).properties(
        width=WIDTH if series.facet else 560, height=200 if series.facet else 280
    )
    return _series_facet(chart, series).properties(title=title)


def memory_over_time(rows: list[dict], series: Series, title: str) -> alt.TopLevelMixin:
    """Summed RSS (MiB) of each role against seconds since run start, one panel per run (a few
    runs: the caller picks them); ``series`` colours the roles."""
    chart = (
        alt.Chart(_data(rows))
        .mark_line()
        .encode(
            x=alt.X("t_s:Q", title="seconds since run start"),
            y=alt.Y("rss_mb:Q", title="RSS (MiB), summed per role"),
            detail="role:N",
            **channels(series),
            tooltip=["role:N", alt.Tooltip("t_s:Q", format=".1f"), alt.Tooltip("rss_mb:Q", format=".1f")],
        )
        .properties(width=WIDTH, height=180)
    )
    return chart.facet(facet=alt.Facet("cell:N", title=None), columns=3).properties(title=title)


def peak_memory(rows: list[dict], title: str) -> alt.TopLevelMixin:
    """Median peak PSS and RSS (MiB) per cell, side by side (RSS over-counts shared pages; PSS does
    not), with the 95 % interval of each median as an error bar."""
    base = alt.Chart(_data(rows)).encode(
        y=alt.Y("cell:N", title=None, sort=None), yOffset=alt.YOffset("measure:N", sort=["peak PSS", "peak RSS"])
    )
    bars = base.mark_bar().encode(
        x=alt.X("mb:Q", title="peak worker memory (MiB), median over ok runs"),
        color=alt.Color("measure:N", title=None, sort=["peak PSS", "peak RSS"]),
        tooltip=[
            "cell:N",
            "measure:N",
            alt.Tooltip("mb:Q", format=".1f"),
            alt.Tooltip("low_mb:Q", format=".1f"),
            alt.Tooltip("high_mb:Q", format=".1f"),
            "n:Q",
        ],
    )
    spread = base.mark_rule(color="black").encode(x="low_mb:Q", x2="high_mb:Q")
    return alt.layer(bars, spread).properties(width=520, title=title)


def connections(rows: list[dict], x: str, series: Series, title: str) -> alt.TopLevelMixin:
    """Median of the per-run most connections at once against ``x`` (concurrency: a line per
    ``line`` field; otherwise bars side by side per ``line``), its 95 % interval as an error bar,
    one panel row per role (broker, backend): nothing is pooled across the dimensions on the axes."""
    is_q = x == "concurrency"
    split = "line" in rows[0]
    base = alt.Chart(_data(rows)).encode(
        x=alt.X(
            f"{_field(x)}:Q" if is_q else f"{_field(x)}:N",
            title=x,
            scale=alt.Scale(type="log", base=2) if is_q else alt.Undefined,
            axis=alt.Axis(values=sorted({r[x] for r in rows})) if is_q else alt.Undefined,
        ),
        detail="line:N" if split else alt.Undefined,
        **channels(series),
    )
    tooltip = [
        alt.Tooltip(f"{_field(x)}:N"),
        "role:N",
        alt.Tooltip("max_connections:Q", title="median"),
        alt.Tooltip("low:Q"),
        alt.Tooltip("high:Q"),
        alt.Tooltip("n:Q", title="ok runs"),
    ] + (["line:N"] if split else [])
    y_title = "most connections at once (median over runs)"
    y = alt.Y("max_connections:Q", title=y_title)
    if is_q:
        marks = base.mark_line(point=True).encode(y=y, tooltip=tooltip)
        spread = base.mark_errorbar().encode(y=alt.Y("low:Q", title=y_title), y2="high:Q")
    else:
        offset = alt.XOffset("line:N") if split else alt.Undefined
        marks = base.mark_bar().encode(y=y, xOffset=offset, tooltip=tooltip)
        spread = base.mark_errorbar().encode(y=alt.Y("low:Q", title=y_title), y2="high:Q", xOffset=offset)
    chart = alt.layer(marks, spread).properties(width=WIDTH, height=200)
    panels = alt.Column(f"{_field(series.facet)}:N", title=series.facet_title) if series.facet else alt.Undefined
    return chart.facet(row=alt.Row("role:N", title=None), column=panels).properties(title=title)


def tradeoff(rows: list[dict], x_title: str, y_title: str, title: str) -> alt.TopLevelMixin:
    """One point per cell (``x``, ``y``); the cells whose ``front`` is "Pareto front" coloured, joined
    in ``x`` order and named (``label``); ``x_text``/``y_text`` are the values in the metric's units."""
    base = alt.Chart(_data(rows)).encode(
        x=alt.X("x:Q", title=x_title, scale=alt.Scale(zero=False)),
        y=alt.Y("y:Q", title=y_title, scale=alt.Scale(zero=False)),
    )
    front = base.transform_filter("datum.front == 'Pareto front'")
    points = base.mark_point(filled=True, size=50).encode(
        color=alt.Color(
            "front:N", title=None, scale=alt.Scale(domain=["Pareto front", "dominated"], range=["#e45756", "#9d9d9d"])
        ),
        tooltip=[
            "cell:N",
            alt.Tooltip("x_text:N", title="x"),
            alt.Tooltip("y_text:N", title="y"),
            alt.Tooltip("n:Q", title="ok runs"),
        ],
    )
    line = front.mark_line(color="#e45756").encode(order="x:Q")
    names = front.mark_text(align="left", dx=6, dy=-6, fontSize=9).encode(text="label:N")
    return alt.layer(line, points, names).properties(width=420, height=260, title=title)


def history(
    rows: list[dict], ats: list[str], metric_title: str, series: Series, title: str, by: str = "sweep"
) -> alt.TopLevelMixin:
    """A metric's history: per cell (``cell``) one point per sweep or tag value (``at``, in the
    order ``ats``), its median with the 95 % interval (``low``..``high``) as an error bar; rows whose
    ``change`` is set (a change point, cmx trend's) get a red triangle labelled with it."""
    along = "sweep (in the order they ran)" if by == "sweep" else f"{by} (in the order its sweeps ran)"
    x = alt.X("at:O", title=along, sort=ats, axis=alt.Axis(labelAngle=-40, labelLimit=140))
    base = alt.Chart(_data(rows)).encode(x=x, detail="cell:N", **channels(series))
    line = base.mark_line(point=True).encode(
        y=alt.Y("median:Q", title=metric_title),
        tooltip=[
            alt.Tooltip("cell:N"),
            alt.Tooltip("at:N"),
            alt.Tooltip("median:Q", format=",.4g"),
            alt.Tooltip("low:Q", format=",.4g"),
            alt.Tooltip("high:Q", format=",.4g"),
            alt.Tooltip("n:Q", title="ok runs"),
            alt.Tooltip("noise:N", title="noise"),
        ],
    )
    spread = base.mark_errorbar(ticks=True).encode(y=alt.Y("low:Q", title=metric_title), y2="high:Q")
    changed = base.transform_filter("datum.change != null")
    red = alt.value("#d62728")  # over the series' colour: a change reads the same in every series
    marks = changed.mark_point(shape="triangle-down", size=140, filled=True, opacity=1).encode(
        y="median:Q",
        color=red,
        tooltip=[
            alt.Tooltip("cell:N"),
            alt.Tooltip("at:N", title="change at"),
            alt.Tooltip("change:N", title="change"),
            alt.Tooltip("p_value:Q", format=".2g"),
            alt.Tooltip("verdict:N"),
            alt.Tooltip("noise_change:N", title="noise differs"),
        ],
    )
    said = changed.mark_text(dy=-14, fontSize=10, fontWeight="bold").encode(y="median:Q", text="change:N", color=red)
    layered = alt.layer(line, spread, marks, said).properties(width=max(WIDTH, 18 * len(ats)), height=200)
    return _series_facet(layered, series).properties(title=title)
