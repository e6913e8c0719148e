"""Words that mean what happened (issue 43): the tasks an interrupted or failed run never executed
are `not run` (the run stopped before them), never `lost` (which reads as the broker losing them);
an ok run's unexecuted tasks stay lost."""

from __future__ import annotations

from rich.console import Console

from cmx.analysis import views
from cmx.analysis.report_cells import cells_of
from cmx.analysis.summary import render, summarize
from cmx.engine.model.cells import Cell
from cmx.engine.results import db
from cmx.engine.results.ingest import not_run
from cmx.workloads.vocab import metrics as M
from tests.results_fixture import add_run, cell_id

DIMS = {"broker": "redis", "pool": "threads"}


def _metric(con, run_id: str, name: str):
    row = con.execute("SELECT value FROM metrics WHERE run_id = ? AND name = ?", [run_id, name]).fetchone()
    return row[0] if row else "absent"


def test_an_interrupted_runs_unfinished_tasks_are_not_run_not_lost(tmp_path):
    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        add_run(con, "e", "ok1", DIMS, metrics={M.TASKS_LOST: 2, M.CONSUME_RATE: 100.0})
        add_run(con, "e", "int1", DIMS, repeat=2, status="interrupted", metrics={M.TASKS_LOST: 1270})
        add_run(con, "e", "int0", DIMS, repeat=3, status="failed", metrics={M.TASKS_LOST: 0})
        assert not_run(con, "int1") == {M.TASKS_LOST: None, M.TASKS_NOT_RUN: 1270}
        assert not_run(con, "int0") == {M.TASKS_LOST: 0.0, M.TASKS_NOT_RUN: 0}
        assert _metric(con, "int1", M.TASKS_LOST) is None  # unknown: the run stopped first
        assert _metric(con, "int1", M.TASKS_NOT_RUN) == 1270
        assert _metric(con, "ok1", M.TASKS_LOST) == 2  # an ok run: nothing changes
        assert _metric(con, "ok1", M.TASKS_NOT_RUN) == "absent"
    with views.connect(path, read_only=True) as con:
        cell = Cell(cell_id(DIMS), DIMS)
        [s] = summarize(con, "e", [cell], (M.CONSUME_RATE,))
        assert (s.lost, s.not_run) == (2, 1270)
        console = Console(width=200, record=True)
        console.print(render("e", [s], (M.CONSUME_RATE,)))
        row = next(line for line in console.export_text().splitlines() if "threads" in line)
        assert "2 (1,270 not run)" in row, row
        [c] = cells_of(con, "e", 1, ["pool"])
        assert (c["lost_tasks"], c["not_run_tasks"]) == (2, 1270)


def test_a_summary_of_only_an_interrupted_run_says_not_run_and_no_lost(tmp_path):
    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        add_run(con, "e", "int1", DIMS, status="interrupted", metrics={M.TASKS_LOST: 1270})
        not_run(con, "int1")
    with views.connect(path, read_only=True) as con:
        [s] = summarize(con, "e", [Cell(cell_id(DIMS), DIMS)], (M.CONSUME_RATE,))
    console = Console(width=200, record=True)
    console.print(render("e", [s], (M.CONSUME_RATE,)))
    row = next(line for line in console.export_text().splitlines() if "threads" in line)
    assert "1,270 not run" in row and "lost" not in row, row


def test_the_summary_says_lost_adds_every_run_of_a_cell(tmp_path):
    """Three runs each losing 40 show 120 lost: the caption says it is every run together, not a median
    beside the medians (a fault sweep read '120 lost' of 60 tasks)."""
    path = tmp_path / "l.duckdb"
    with db.connect(path) as con:
        for r in (1, 2, 3):
            add_run(con, "e", f"r{r}", DIMS, repeat=r, metrics={M.TASKS_LOST: 40, M.CONSUME_RATE: 10})
    with views.connect(path, read_only=True) as con:
        [s] = summarize(con, "e", [Cell(cell_id(DIMS), DIMS)], (M.CONSUME_RATE,))
    console = Console(width=300, record=True)
    console.print(render("e", [s], (M.CONSUME_RATE,)))
    text = console.export_text()
    assert "120" in next(line for line in text.splitlines() if "threads" in line)
    assert "lost: every run of the cell together, not a median" in " ".join(text.split())


def test_a_run_failed_for_tasks_lost_before_the_queue_keeps_them_lost(tmp_path):
    """The driver ended the run (failed) because 21 tasks were lost before the queue (issue 42): it
    stopped before none of them, so they stay lost; any other count of unexecuted tasks is not run."""
    path = tmp_path / "q.duckdb"
    with db.connect(path) as con:
        add_run(con, "e", "lost21", DIMS, status="failed", metrics={M.TASKS_LOST: 21})
        add_run(con, "e", "more", DIMS, repeat=2, status="failed", metrics={M.TASKS_LOST: 30})
        assert not_run(con, "lost21", lost_before_queue=21) == {M.TASKS_NOT_RUN: 0.0}
        assert not_run(con, "more", lost_before_queue=21) == {M.TASKS_LOST: None, M.TASKS_NOT_RUN: 30}
        assert (_metric(con, "lost21", M.TASKS_LOST), _metric(con, "lost21", M.TASKS_NOT_RUN)) == (21, 0)
    with views.connect(path, read_only=True) as con:
        [s] = summarize(con, "e", [Cell(cell_id(DIMS), DIMS)], (M.CONSUME_RATE,))
    assert (s.lost, s.not_run) == (21, 30)
