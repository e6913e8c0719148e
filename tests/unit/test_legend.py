"""No chart of the report colours more than ten series (issue 28): at 100 cells and at the
quickstart's 12, every colour scale of every spec the report builds holds at most ten values."""

from __future__ import annotations

import pytest

from cmx.analysis import views
from cmx.analysis.report import _answer, build_charts
from tests.results_fixture import build_grid

PALETTE = 10  # Vega's default categorical palette (tableau10)


def _colour_domains(spec, values=None) -> list[tuple[str, int]]:
    """(field, distinct values in the data beside it) of every colour encoding in a Vega-Lite spec;
    data is inline (``data.values``) at the level of the chart, its layers or its facetted spec."""
    found = []
    if isinstance(spec, dict):
        values = spec.get("data", {}).get("values", values) if isinstance(spec.get("data"), dict) else values
        color = spec.get("encoding", {}).get("color") if isinstance(spec.get("encoding"), dict) else None
        if isinstance(color, dict) and "field" in color:
            name = color["field"].replace("\\.", ".")
            assert values and name in values[0], f"colour field {name!r} is not in the chart's data"
            found.append((name, len({repr(r.get(name)) for r in values})))
        for key, sub in spec.items():
            if key != "data":
                found += _colour_domains(sub, values)
    elif isinstance(spec, list):
        for sub in spec:
            found += _colour_domains(sub, values)
    return found


@pytest.fixture(scope="module", params=[(5, 10), (3, 2)], ids=["100 cells", "12 cells"])
def report_specs(request, tmp_path_factory):
    pools, concurrency = request.param
    path = build_grid(
        tmp_path_factory.mktemp("grid") / "g.duckdb",
        pools=("prefork", "threads", "gevent", "eventlet", "solo")[:pools],
        concurrency=tuple(2**k for k in range(concurrency)),
    )
    with views.connect(path, read_only=True) as con:
        cells, _, _, charts = build_charts(con, "grid")
        _, tradeoffs = _answer(con, "grid", 1, cells)
    assert len(cells) == 2 * pools * concurrency
    return {c.name: c.spec for c in [*tradeoffs, *charts]}


def test_no_chart_colours_more_than_ten_series(report_specs):
    # Every chart the report has data for is built, trade-offs included.
    assert {
        "tradeoff_memory",
        "tradeoff_latency",
        "throughput",
        "latency",
        "latency_spectrum",
        "memory",
        "peak_memory",
        "connections",
    } <= set(report_specs)
    coloured = {name: _colour_domains(spec) for name, spec in report_specs.items()}
    assert coloured["latency_spectrum"] and coloured["throughput"], "the per-cell lines are coloured"
    too_many = {name: d for name, d in coloured.items() if any(n > PALETTE for _, n in d)}
    assert not too_many, too_many


def test_the_rule_splits_series_over_colour_dash_and_panels():
    from cmx.analysis.legend import LEGEND, PANEL, Series, assign

    # pools × six concurrencies × prefetch: 60 series; colour takes concurrency (the most values
    # that fit), dash prefetch (the fewest), panels the pools.
    rows = [
        {"pool": p, "concurrency": c, "prefetch": f}
        for p in ("prefork", "threads", "gevent", "solo")
        for c in (1, 2, 4, 8, 16, 32)
        for f in (1, 4, 16)
    ]
    assert assign(rows, ["pool", "concurrency", "prefetch"]) == Series("concurrency", "prefetch", "pool", "pool")
    # No dash on bars: the fourth dimension joins the panels.
    assert assign(rows, ["pool", "concurrency", "prefetch"], dash=False) == Series(
        "concurrency", None, PANEL, "pool / prefetch"
    )
    assert rows[0][PANEL] == "prefork / 1"
    # Few enough series for the palette: colour their combination, one legend.
    small = [{"broker": b, "pool": p} for b in ("redis", "rabbitmq") for p in ("prefork", "threads")]
    assert assign(small, ["broker", "pool"]) == Series(LEGEND, color_title="broker / pool")
    assert small[-1][LEGEND] == "rabbitmq / threads"
    # Eleven values of one dimension: not coloured, one panel each.
    many = [{"concurrency": c} for c in range(1, 12)]
    assert assign(many, ["concurrency"]) == Series(None, None, "concurrency", "concurrency")
    # A dimension with one value splits nothing.
    assert assign([{"pool": "solo"}], ["pool"]) == Series()


def test_tradeoff_marks_the_known_pareto_front(report_specs):
    # Peak PSS grows with concurrency alone and rabbitmq / prefork is the fastest at each level;
    # the rate peaks at 64: the front is rabbitmq / prefork at every concurrency up to 64.
    rows = report_specs["tradeoff_memory"]["data"]["values"]
    concurrency = sorted({int(r["cell"].split(" / ")[-1]) for r in rows})
    assert sorted(r["label"] for r in rows if r["front"] == "Pareto front") == sorted(
        f"rabbitmq / prefork / {c}" for c in concurrency if c <= 64
    )
    assert all(r["label"] == "" for r in rows if r["front"] == "dominated")
    assert {r["cell"] for r in report_specs["tradeoff_latency"]["data"]["values"]} == {r["cell"] for r in rows}


def test_a_chart_built_validated_once_is_still_checked_whole():
    """report.write_report builds its charts inside charts.validated_once (no check per object as
    it is made): the chart's to_dict() still refuses what Vega-Lite's schema refuses."""
    import altair as alt

    from cmx.analysis.charts import validated_once

    with validated_once():
        bad = (
            alt.Chart(alt.Data(values=[{"a": 1}])).mark_point().encode(x=alt.X("a:Q", scale=alt.Scale(type="sideways")))
        )  # made without a word
        with pytest.raises(alt.utils.schemapi.SchemaValidationError):
            bad.to_dict()
    with pytest.raises(alt.utils.schemapi.SchemaValidationError):  # outside it, as altair does by default
        alt.Scale(type="sideways")
