"""Issue 41 point 4: analysis reads what each run stored of its workload's headline (table
run_headlines), never the workload class: a user's class's headline reaches the report, a backlog's
cells drop latency, an older database gets its built-in runs' headlines when it is upgraded."""

from __future__ import annotations

import json

from cmx.analysis import headline, recommend, views
from cmx.analysis.report_cells import table_metrics
from cmx.engine.results import db
from cmx.workloads.catalog.base import Workload
from cmx.workloads.vocab import metrics as M
from tests.results_fixture import add_run


class Resize(Workload):  # a user's class: analysis could not import it (no file here)
    name = "./resize.py:Resize"
    headline_metrics = (M.LATENCY_P50_S, M.CONSUME_RATE)
    objective = M.LATENCY_P50_S

    def register_tasks(self, app):  # never run here
        raise AssertionError

    def drive(self, ctx, params):
        raise AssertionError


def _user_run(con, run_id: str) -> None:
    db.record_run_start(
        con,
        experiment="u",
        sweep_id="s1",
        run_id=run_id,
        cell_id="c1",
        repeat=1,
        workload=Resize.name,
        dims={"pool": "threads"},
        params={},
        warmup_s=0,
        loaded=Resize(),
    )
    db.record_run_end(con, run_id, "ok", None, {})
    for name, value in ((M.LATENCY_P50_S, 0.2), (M.CONSUME_RATE, 50.0), (M.MAKESPAN_S, 3.0)):
        con.execute("INSERT INTO metrics VALUES (?, ?, ?, '')", [run_id, name, value])


def test_a_user_classs_headline_and_objective_reach_analysis_from_the_database(tmp_path):
    path = tmp_path / "u.duckdb"
    with db.connect(path) as con:
        db.record_sweep(con, "s1", "u", "u.yaml", Resize.name, "", "inv", {}, {"revision": 1})
        _user_run(con, "r1")
    with views.connect(path, read_only=True) as con:
        assert table_metrics(con, "u")[:2] == (M.LATENCY_P50_S, M.CONSUME_RATE)  # its order, not the registry's
        assert M.MAKESPAN_S not in table_metrics(con, "u")
        assert headline.of_experiment(con, "u", 1) == {M.LATENCY_P50_S, M.CONSUME_RATE}
        assert recommend.default_objective(con, "u", 1).metric == M.LATENCY_P50_S


def test_each_run_stores_the_headline_of_its_own_params(tmp_path):
    path = tmp_path / "b.duckdb"
    with db.connect(path) as con:
        add_run(con, "e", "s", {"params.mode": "stream"}, params={"mode": "stream"})
        add_run(con, "e", "b", {"params.mode": "backlog"}, params={"mode": "backlog"})
        got = dict(con.execute("SELECT run_id, headline FROM run_headlines").fetchall())
    assert any(m.startswith("latency_") for m in json.loads(got["s"]))
    assert not any(m.startswith("latency_") for m in json.loads(got["b"]))


def test_an_older_database_gets_its_built_in_runs_headlines_on_upgrade(tmp_path):
    path = tmp_path / "old.duckdb"
    with db.connect(path) as con:
        add_run(con, "e", "r1", {"pool": "threads"}, params={"mode": "stream"})
        _user_run(con, "r2")
        # As a cmx before run_headlines left it: no table, no version.
        con.execute("DROP TABLE run_headlines")
        con.execute("DELETE FROM cmx_schema WHERE table_name = 'run_headlines'")
    db._CHECKED.clear()  # this process upgraded it already: make it look again, as a new process would
    with views.connect(path, read_only=True) as con:
        rows = dict(con.execute("SELECT run_id, headline_all FROM run_headlines").fetchall())
    assert set(rows) == {"r1"}  # the built-in's; the user's class is not imported to learn its own
    assert M.CONSUME_RATE in json.loads(rows["r1"])
