"""What a sweep's end says of its experiment's history (cli/sweepend.py ``say_history``): the night's
changes and a regression that still stands, each cell named by its dimensions (issue 49)."""

from __future__ import annotations

from cmx.cli.sweepend import say_history
from tests.results_fixture import nightly


def test_a_regression_that_still_stands_is_said_at_the_sweeps_end_naming_the_cell(tmp_path, capsys):
    path = nightly(tmp_path / "r.duckdb", [{"consume_rate": v} for v in [1000.0] * 6 + [700.0, 700.0]])
    say_history("e", 1, path, {})
    said = capsys.readouterr().out
    cell = "backend=none broker=redis concurrency=4 pool=threads"
    assert "no headline change at this sweep" in said and f"still worse: consume_rate of {cell} since s007" in said


def test_the_nights_change_names_the_cell_by_its_dimensions(tmp_path, capsys):
    path = nightly(tmp_path / "r.duckdb", [{"consume_rate": v} for v in [1000.0] * 6 + [700.0]])
    say_history("e", 1, path, {})
    said = " ".join(capsys.readouterr().out.split())
    assert "changes at this sweep: consume_rate of backend=none broker=redis concurrency=4 pool=threads -30" in said
