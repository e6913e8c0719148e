"""Tables that fit (issue 43): at any width no number is split, no column appears twice, and a
table too wide loses columns from the right (never what names a row) with a note naming --wide;
--wide prints them all. Also the `tasks` workload's fault cells: `failed` once, not twice."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cmx.analysis import stats
from cmx.analysis.summary import CellSummary, cell_headlines, render, with_interval
from cmx.cli.tables import fit, show
from cmx.engine.model.cells import Cell
from cmx.engine.results import metricdefs
from cmx.workloads.catalog import registry
from tests.results_fixture import cell_id

WIDTHS = (80, 100, 130, 200)


def _summaries():
    workload = registry.get("tasks")
    cells = []
    for broker in ("redis", "rabbitmq"):
        for pool in ("threads", "prefork"):
            dims = {
                "broker": broker,
                "pool": pool,
                "fault": "kill_worker@2s",
                "params.task": "myapp.tasks.resize",
                "params.module": "myapp.tasks",
                "celery.broker_transport_options": {"health_check_interval": 5, "socket_timeout": 5},
            }
            cells.append(Cell(cell_id(dims), dims))
    headline, shown = cell_headlines(workload, cells)
    summaries = []
    for i, c in enumerate(cells):
        s = CellSummary(c, runs=5, ok=5, lost=1234 * i)
        s.metrics = {m: stats.summarize([(1000.0 + 37 * k) * (i + 1) / 7 for k in range(5)]) for m in headline}
        s.shown = shown[c.cell_id]
        summaries.append(s)
    return summaries, headline


def _printed(width: int, wide: bool = False) -> tuple[str, list[str]]:
    summaries, headline = _summaries()
    table = render("tasks with faults", summaries, headline)
    buf = io.StringIO()
    show(Console(file=buf, width=width, color_system=None), table, wide=wide)
    return buf.getvalue(), [
        Text.from_markup(c.header).plain if isinstance(c.header, str) else str(c.header) for c in table.columns
    ]


def test_a_metric_in_both_headlines_is_one_column():
    _, headline = _summaries()
    assert len(headline) == len(set(headline)), headline
    summaries, _ = _summaries()
    _, headers = _printed(400)
    assert len(headers) == len(set(headers)), headers
    assert headers.count("failed") == 1


@pytest.mark.parametrize("width", WIDTHS)
def test_no_number_is_ever_split(width):
    text, headers = _printed(width)
    assert max(len(line) for line in text.splitlines()) <= width, text
    lines = text.splitlines()
    summaries, headline = _summaries()
    checked = 0
    for s in summaries:
        for name in headline:
            if metricdefs.get(name).label not in headers:
                continue
            for part in with_interval(name, s.metrics.get(name), s.ok).plain.split("\n"):
                # a median or its interval is printed whole on one line of the table
                assert any(part in line for line in lines), (width, name, part)
                checked += 1
    assert checked >= 8


@pytest.mark.parametrize("width", WIDTHS)
def test_a_narrow_table_keeps_its_names_and_says_what_left(width):
    text, headers = _printed(width)
    _, every = _printed(1000)
    assert headers[:5] == every[:5]  # the dimensions, runs ok, lost
    if len(headers) < len(every):
        assert "--wide" in text and f"{len(every) - len(headers)} column(s) left out" in text
    else:
        assert "--wide" not in text


def test_wide_prints_every_column_however_narrow_the_terminal():
    text, headers = _printed(80, wide=True)
    _, every = _printed(1000)
    assert headers == every and "--wide" not in text
    assert max(len(line) for line in text.splitlines()) > 80


def test_fit_keeps_a_rank_and_the_names_before_the_numbers():
    from rich.table import Table

    t = Table()
    t.add_column("rank", justify="right")
    t.add_column("broker")
    t.add_column("pool")
    for n in range(8):
        t.add_column(f"metric number {n}", justify="right")
    t.add_row("1", "redis", "threads", *[f"{1234.5 * n:,.1f}/s" for n in range(8)])
    fit(t, 40)
    assert [c.header for c in t.columns] == ["rank", "broker", "pool", "metric number 0"]  # and one value


def test_a_chart_legend_never_cuts_a_label():
    from cmx.analysis import legend

    rows = [
        {"broker": b, "pool": "threads", "params.task": f"myapp.tasks.a_rather_long_task_name_{b}", "v": 1}
        for b in ("redis", "rabbitmq")
    ]
    series = legend.assign(rows, ["broker", "params.task"])
    spec = {name: ch.to_dict() for name, ch in legend.channels(series).items()}
    assert spec["color"]["legend"] == {"labelLimit": 0, "titleLimit": 0}, spec


def test_a_column_that_stays_and_columns_that_never_wrap():
    """compare's verdict stays however narrow the terminal, and a metric's name or a verdict marked
    no_wrap is never folded inside a word (issue 51: `broker_memory_peak_byte` / `s`)."""
    table = Table()
    table.add_column("metric", no_wrap=True)
    table.add_column("baseline", justify="right")
    table.add_column("p", justify="right")
    table.add_column("verdict", no_wrap=True)
    table.add_row("broker_memory_peak_bytes", "3 MiB [2.9–3.1 MiB]", "0.008", "? inconclusive: n=12 would tell")
    buf = io.StringIO()
    show(Console(file=buf, width=80, color_system=None), table, stay=("verdict",))
    out = buf.getvalue()
    assert "broker_memory_peak_bytes" in out and "? inconclusive: n=12 would tell" in out
    assert "left out to fit 80 columns (baseline, p)" in out and max(len(line) for line in out.splitlines()) <= 80


def _replay_summaries():
    workload = registry.get("replay")
    cells = []
    for pool in ("threads", "prefork", "gevent"):
        for prefetch in (1, 4):
            dims = {"broker": "redis", "pool": pool, "concurrency": 4, "prefetch_multiplier": prefetch}
            dims |= {"params.profile": "profiles/thumbs.parquet", "params.limit": 20}
            cells.append(Cell(cell_id(dims), dims))
    headline, shown = cell_headlines(workload, cells)
    sums = [
        CellSummary(
            c, runs=1, ok=1, metrics={m: stats.summarize([0.0123, 0.02]) for m in headline}, shown=shown[c.cell_id]
        )
        for c in cells
    ]
    sums[0].metrics["tasks_failed"] = stats.summarize([0.0, 0.0])
    return sums, headline


@pytest.mark.parametrize("width", (100, 160))
def test_the_replay_summary_fits_or_says_what_it_left_out(width):
    """Issue 51: the replay smoke's summary at 160 columns lost its right border with no caption
    (a header that never wraps, `runs ok`, was counted as its longest word) and split
    `prefetch_multipl` / `ier`."""
    sums, headline = _replay_summaries()
    buf = io.StringIO()
    show(Console(file=buf, width=width, color_system=None), render("replay", sums, headline))
    out = buf.getvalue()
    lines = out.splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    body = [line for line in lines if line[:1] in "│┃┏┡└"]
    assert all(line.rstrip()[-1] in "│┃┓┩┘" for line in body), out  # the right border is there
    assert "prefetch_multiplier" in out
    assert "left out to fit" in out


def test_an_interval_of_one_value_is_not_shown():
    assert with_interval("tasks_lost", stats.summarize([0.0, 0.0, 0.0]), ok=3).plain == "0"
