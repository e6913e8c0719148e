"""The report's history charts are labelled by the `--by` tag when asked (issue 51: labelled by
sweep id while `cmx trend --by tag.night` spoke of nights). A hand-made history (no services;
about 2 s); one `cmx report --by` with a bad value (about 3 s)."""

from __future__ import annotations

from cmx.analysis import views
from cmx.analysis.report_history import history_charts
from tests.conftest import cmx
from tests.results_fixture import history

NIGHTS = {1: {"night": "mon"}, 2: {"night": "tue"}, 3: {"night": "wed"}}


def _ats(chart) -> list[str]:
    return list(dict.fromkeys(row["at"] for row in chart.spec["data"]["values"]))


def test_the_history_is_labelled_by_the_tag(tmp_path):
    path = history(tmp_path / "r.duckdb", [100.0, 101.0, 99.0], tags=NIGHTS)
    with views.connect(path, read_only=True) as con:
        [by_sweep] = history_charts(con, "e", 1, [], ["pool"], ("consume_rate",))
        [by_night] = history_charts(con, "e", 1, [], ["pool"], ("consume_rate",), by="tag.night")
    assert _ats(by_sweep) == ["s001", "s002", "s003"]
    assert _ats(by_night) == ["mon", "tue", "wed"]
    assert "One point per tag.night value (3)" in by_night.caption
    assert "tag.night (in the order its sweeps ran)" in str(by_night.spec)


def test_a_bad_by_is_one_line_exit_2(tmp_path):
    path = history(tmp_path / "r.duckdb", [100.0, 101.0], tags=NIGHTS)
    p = cmx("report", "e", "--db", str(path), "--by", "night", "--out", str(tmp_path / "rep"))
    assert p.returncode == 2 and "--by 'night': expected sweep or tag.KEY" in p.stderr and "Traceback" not in p.stderr
