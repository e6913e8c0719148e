"""The end-of-sweep summary says what it shows: backlog cells show queue wait and service time,
not a latency that is their queue position; memory in binary units, PSS first."""

from __future__ import annotations

from rich.console import Console

from cmx.engine.model.cells import Cell
from cmx.analysis import views
from cmx.analysis.summary import CellSummary, cell_headlines, render
from cmx.analysis.units import fmt
from cmx.workloads.catalog import registry


def _cell(cell_id, mode):
    return Cell(cell_id, {"pool": "threads", "params.mode": mode})


def test_backlog_cells_hide_latency_and_the_caption_says_from_where_to_where():
    cells = [_cell("b", "backlog"), _cell("s", "stream")]
    headline, shown = cell_headlines(registry.get("throughput"), cells)
    assert "latency_p50_s" in headline and "queue_wait_p50_s" in headline and "service_time_p50_s" in headline
    assert "latency_p50_s" not in shown["b"] and "latency_p50_s" in shown["s"]
    assert headline.index("peak_pss_bytes") < headline.index("peak_rss_bytes")  # PSS leads
    from cmx.analysis.stats import summarize

    one = {"latency_p50_s": 4.8, "queue_wait_p50_s": 4.8, "service_time_p50_s": 0.001}
    sums = [
        CellSummary(c, runs=1, ok=1, metrics={k: summarize([v]) for k, v in one.items()}, shown=shown[c.cell_id])
        for c in cells
    ]
    console = Console(width=250, record=True)
    console.print(render("t", sums, headline))
    text = console.export_text()
    backlog_row = next(line for line in text.splitlines() if "backlog" in line)
    assert "n/a" in backlog_row and "4.8 s" in backlog_row  # queue wait shown, latency not
    assert "latency: finished − intended send (stream) or − sent (backlog)" in " ".join(text.split())
    assert "service time: finished − started" in " ".join(text.split())


def test_tasks_unseen_show_beside_lost_not_as_lost():
    cell = _cell("s", "stream")
    sums = [CellSummary(cell, runs=2, ok=1, lost=3, unseen=1200)]
    console = Console(width=250, record=True)
    console.print(render("t", sums, ("consume_rate",)))
    row = next(line for line in console.export_text().splitlines() if "1/2" in line)
    assert "3 (+1,200 unseen)" in row, row


def test_a_narrow_terminal_folds_values_and_never_cuts_them():
    from cmx.analysis.stats import summarize

    cells = [
        Cell("a", {"celery.broker_transport_options": {"visibility_timeout": 60}, "pool": "prefork"}),
        Cell("b", {"celery.broker_transport_options": {"visibility_timeout": 3600}, "pool": "threads"}),
    ]
    headline = ("consume_rate", "latency_p50_s", "latency_p99_s", "peak_pss_bytes", "peak_rss_bytes")
    sums = [CellSummary(c, runs=3, ok=3, metrics={k: summarize([1.0, 2.0, 3.0]) for k in headline}) for c in cells]
    console = Console(width=90, record=True)
    console.print(render("t", sums, headline))
    text = console.export_text()
    assert "…" not in text, text
    assert all(len(line) <= 90 for line in text.splitlines()), text


def test_only_backlog_cells_drop_the_latency_columns():
    headline, _ = cell_headlines(registry.get("throughput"), [_cell("b", "backlog")])
    assert not any(m.startswith("latency_") for m in headline)


def test_memory_is_printed_in_binary_units():
    assert fmt("peak_pss_bytes", 20 * 2**20) == "20.0 MiB"
    assert fmt("peak_rss_bytes", 3 * 2**30) == "3.00 GiB"
    assert fmt("peak_rss_bytes_worker", 2**20) == "1.0 MiB"


def test_status_and_report_flag_runs_whose_clocks_are_suspect(tmp_path):
    from tests.conftest import cmx
    from tests.results_fixture import add_run
    from cmx.engine.results import db

    path = tmp_path / "c.duckdb"
    with db.connect(path) as con:
        add_run(con, "e", "r1", {"pool": "threads"}, metrics={"clock_suspect": 1, "latency_p50_s": 0.01})
        add_run(con, "e", "r2", {"pool": "solo"}, metrics={"clock_suspect": 0, "latency_p50_s": 0.01})
    proc = cmx("status", "--db", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "e: 1 ok run(s) with clock_suspect = 1" in " ".join(proc.stdout.split())
    from cmx.analysis.report import build_charts
    from cmx.analysis.page import summary_table

    from cmx.analysis.report import table_metrics

    with views.connect(path, read_only=True) as con:
        cells, varying, _, _ = build_charts(con, "e")
        shown = table_metrics(con, "e")
    page = summary_table(cells, varying, shown)
    assert "clock suspect" in page


def test_the_report_leaves_backlog_cells_out_of_the_latency_chart(tmp_path):
    from cmx.analysis.page import summary_table
    from cmx.analysis.report import build_charts, table_metrics
    from cmx.engine.results import db
    from tests.results_fixture import T0, add_run

    path = tmp_path / "b.duckdb"
    tasks = [(f"t{i}", T0 + i, T0 + i + 1, T0 + i + 1.5, "SUCCESS") for i in range(5)]
    with db.connect(path) as con:
        add_run(
            con,
            "e",
            "s1",
            {"params.mode": "stream"},
            tasks=tasks,
            metrics={"latency_p50_s": 1.5, "queue_wait_p50_s": 1.0},
        )
        add_run(
            con,
            "e",
            "b1",
            {"params.mode": "backlog"},
            tasks=tasks,
            params={"mode": "backlog"},
            metrics={"latency_p50_s": 1.5, "queue_wait_p50_s": 1.0},
        )
    with views.connect(path, read_only=True) as con:
        cells, varying, _, found = build_charts(con, "e")
        shown = table_metrics(con, "e")
    latency = next(c for c in found if c.name == "latency")
    import json

    spec = json.dumps(latency.spec)
    assert '"cell": "stream (n=1)"' in spec and '"cell": "backlog' not in spec
    assert "1 backlog cell(s) left out" in latency.caption
    page = summary_table(cells, varying, shown)
    backlog_row = next(r for r in page.split("<tr") if ">backlog<" in r)
    assert "n/a" in backlog_row and '<td data-v="1.0">1 s<' in backlog_row  # data-v: the raw value the table sorts on


def test_cell_summary_and_report_page_count_unseen_tasks_apart_from_lost(tmp_path):
    # A run whose worker's records were not collected: its unrun tasks are unseen and tasks_lost
    # is unknown (NULL). The cell sums them apart, and the report's row says so.
    from cmx.analysis.page import summary_table
    from cmx.analysis.report import build_charts, table_metrics
    from cmx.engine.results import db
    from tests.results_fixture import add_run

    path = tmp_path / "u.duckdb"
    with db.connect(path) as con:
        add_run(con, "e", "r1", {"pool": "threads"}, status="failed", metrics={"tasks_lost": None, "tasks_unseen": 7})
        add_run(con, "e", "r2", {"pool": "solo"}, metrics={"tasks_lost": 2, "tasks_unseen": 0})
    with views.connect(path, read_only=True) as con:
        got = dict(con.execute("SELECT DISTINCT pool, (lost_tasks, unseen_tasks) FROM cell_summary").fetchall())
        cells, varying, _, _ = build_charts(con, "e")
        shown = table_metrics(con, "e")
    assert got == {"threads": (0, 7), "solo": (2, 0)}
    page = summary_table(cells, varying, shown)
    threads = next(r for r in page.split("<tr") if ">threads<" in r)
    solo = next(r for r in page.split("<tr") if ">solo<" in r)
    assert "7 tasks unseen" in threads and "tasks lost" not in threads
    assert "2 tasks lost" in solo and "unseen" not in solo


def test_a_peak_not_sampled_in_some_runs_says_so_in_the_summary(tmp_path):
    """One run of three without a PSS reading inside it: its peak PSS is left out and the summary
    says so beside n; with none at all, the column says "not sampled", never a bare dash."""
    from cmx.analysis.summary import summarize
    from cmx.engine.results import db
    from tests.results_fixture import add_run, cell_id

    path = tmp_path / "p.duckdb"
    with db.connect(path) as con:
        for i, pss in enumerate([40 << 20, None, 42 << 20]):
            add_run(
                con,
                "e",
                f"a{i}",
                {"pool": "threads"},
                repeat=i + 1,
                metrics={"peak_pss_bytes": pss, "peak_rss_bytes": 60 << 20},
            )
        for i in range(3):
            add_run(
                con,
                "e",
                f"b{i}",
                {"pool": "solo"},
                repeat=i + 1,
                metrics={"peak_pss_bytes": None, "peak_rss_bytes": 60 << 20},
            )
    cells = [Cell(cell_id({"pool": pool}), {"pool": pool}) for pool in ("threads", "solo")]
    headline = ("peak_pss_bytes", "peak_rss_bytes")
    with views.connect(path, read_only=True) as con:
        sums = summarize(con, "e", cells, headline)
    console = Console(width=200, record=True)
    console.print(render("t", sums, headline))
    text = console.export_text()
    threads = "\n".join(line for line in text.splitlines() if "threads" in line or "n=2" in line)
    assert "n=2 (1 not sampled)" in threads, text
    solo = next(line for line in text.splitlines() if "solo" in line)
    assert "not sampled" in solo and "60.0 MiB" in solo, text


def test_cells_split_over_hosts_show_the_smallest_host_share_and_the_slowest_driver():
    cells = [
        Cell("one", {"params.mode": "backlog", "machines": 1, "drivers": 1}),
        Cell("many", {"params.mode": "backlog", "machines": 8, "drivers": 2}),
    ]
    headline, shown = cell_headlines(registry.get("throughput"), cells)
    assert headline[-2:] == ("host_share_min", "publish_rate_min_driver")
    assert "host_share_min" not in shown["one"] and "publish_rate_min_driver" not in shown["one"]
    assert {"host_share_min", "publish_rate_min_driver"} <= set(shown["many"])
