"""`cmx trend`'s terminal view fits a screen for a few cells (issue 51: 561 lines for 6 cells): the
series with a change first, unchanged headline series after, the rest counted; markdown and json
keep every series. A hand-made history (no services; 2–9 s each on a loaded 2-core machine: 90 runs stored)."""

from __future__ import annotations

from cmx.analysis import views
from cmx.analysis.trend import trend
from cmx.analysis.trend_format import TABLE_ROWS, as_markdown, shown_in_table
from tests.results_fixture import HISTORY_CELL, history

CELLS = [{**HISTORY_CELL, "concurrency": c} for c in (1, 2, 4)]


def test_changes_first_and_the_rest_counted(tmp_path):
    path = history(tmp_path / "r.duckdb", [100.0] * 5 + [150.0] * 5, cells=CELLS)
    with views.connect(path, read_only=True) as con:
        res = trend(con, "e")
    shown, left = shown_in_table(res)
    series = [res.series[i] for i in shown]
    changed = [s for s in series if s.changes]
    assert changed and series[: len(changed)] == changed  # the changes first
    assert len(shown) <= TABLE_ROWS
    if len(shown) < len(res.series):
        assert left.startswith("not shown: ") and "without a change" in left
    assert as_markdown(res).count("\n| ") == len(res.series) + 1  # the header and every series


def test_a_screen_for_many_metrics_of_a_few_cells(tmp_path):
    path = history(tmp_path / "r.duckdb", [100.0, 101.0, 99.0], cells=CELLS)
    with views.connect(path, read_only=True) as con:
        res = trend(con, "e")
    shown, left = shown_in_table(res)
    assert all(res.series[i].group == "headline" for i in shown)
    assert "without a change" in left and "--format markdown or json lists every series" in left
