"""Thresholds: read with units, refused at load as FILE:LINE:COL, checked on a cell's median."""

from __future__ import annotations

import pytest

from cmx.analysis.thresholds import check
from cmx.engine.model import thresholds
from cmx.engine.results import db
from tests.conftest import cmx, write
from tests.results_fixture import add_run, cell_id


@pytest.mark.parametrize(
    "text, op, value",
    [
        (">= 800", ">=", 800.0),
        ("<=2s", "<=", 2.0),
        ("< 250ms", "<", 0.25),
        ("<= 512MiB", "<=", 512 * 1024**2),
        ("== 0", "==", 0.0),
        (" > 1.5e3 ", ">", 1500.0),
        ("<= 2GB", "<=", 2e9),
    ],
)
def test_a_threshold_reads_as_an_operator_and_a_number_in_the_metrics_unit(text, op, value):
    rule = thresholds.parse(text)
    assert (rule.op, rule.value) == (op, pytest.approx(value))


@pytest.mark.parametrize("text", [">> 800", "800", ">= 8 apples", "", ">=", "=> 3", 3])
def test_anything_else_is_refused_naming_the_form(text):
    with pytest.raises(ValueError, match="is not a threshold: expected an operator among >=, <=, >, <, =="):
        thresholds.parse(text)


def test_holds():
    assert thresholds.parse(">= 800").holds(800) and not thresholds.parse(">= 800").holds(799.9)
    assert thresholds.parse("< 2s").holds(1.9) and not thresholds.parse("< 2s").holds(2.0)
    assert not thresholds.parse("<= 2").holds(None)  # no ok run: not held


def test_bad_thresholds_are_file_line_col_errors_exit_2(tmp_path):
    exp = write(
        tmp_path / "t.yaml",
        """
        name: t
        workload: {name: throughput, params: {tasks: 100}}
        thresholds:
          consume_rate: ">= 800"
          consume_rat: ">= 1"
          makespan_s: "<= 5MiB"
          latency_p95_s: 3
          peak_rss_bytes: "< 512MiB"
          queue_wait_p99_s: "<= 2s"
    """,
    )
    proc = cmx("validate", str(exp))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines() == [
        f"{exp}:7:18: thresholds.latency_p95_s: 3 is not a threshold: expected an operator among >=, <=, >, <, == "
        "and a number, with an optional unit (512MiB, 2s, 250ms), e.g. '>= 800' or '<= 2s'"
    ]
    write(exp, exp.read_text().replace("latency_p95_s: 3", "latency_p95_s: '<= 3'"))
    proc = cmx("validate", str(exp))
    assert proc.returncode == 2 and proc.stderr.splitlines() == [
        f"{exp}:5:3: thresholds: unknown metric 'consume_rat'; did you mean 'consume_rate'? "
        "(`cmx sql \"SELECT DISTINCT name FROM metrics\"` lists those stored)",
        f"{exp}:6:15: thresholds.makespan_s: unit 'MiB' does not fit makespan_s, which is in s; give a bare "
        "number or a duration (2s)",
    ]


def test_checked_on_the_median_of_the_cells_ok_runs_of_the_point(tmp_path):
    a, b = {"pool": "threads"}, {"pool": "solo"}
    with db.connect(tmp_path / "r.duckdb") as con:
        for i, rate in enumerate((700, 900, 950)):
            add_run(con, "e", f"a{i}", a, repeat=i + 1, sweep_id="s1", metrics={"consume_rate": rate})
        add_run(con, "e", "a-failed", a, repeat=4, sweep_id="s1", status="failed", metrics={"consume_rate": 1})
        add_run(con, "e", "a-other", a, repeat=1, sweep_id="s0", metrics={"consume_rate": 1})  # another point
        add_run(con, "e", "b1", b, sweep_id="s1", metrics={"consume_rate": 500})
        rules = {"consume_rate": ">= 800", "tasks_lost": "== 0"}
        checks = check(con, ["s1"], [cell_id(a), cell_id(b)], rules, {m: thresholds.parse(t) for m, t in rules.items()})
    got = {(c.cell_id, c.metric): (c.median, c.n, c.held) for c in checks}
    assert got == {
        (cell_id(a), "consume_rate"): (900, 3, True),
        (cell_id(b), "consume_rate"): (500, 1, False),
        (cell_id(a), "tasks_lost"): (None, 0, False),
        (cell_id(b), "tasks_lost"): (None, 0, False),
    }
