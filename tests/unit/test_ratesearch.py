"""The rate search's judge over stored ramp runs of known shape (no services)."""

from __future__ import annotations

from cmx.engine.results import db
from cmx.engine.plan import ratesearch
from cmx.engine.model.cells import Cell
from tests.results_fixture import T0, add_run

FACTS = {"ramp_steps_run": 4, "ramp_start_rate": 100, "ramp_factor": 2, "ramp_step_s": 1.0}


def _ramp(con, run_id: str, latency) -> None:
    """Steps of 1 s at 100, 200, 400, 800 tasks/s; latency(step, i, n) gives each task's latency."""
    add_run(con, "r", run_id, {"broker": "redis", "pool": "threads", "params.mode": "ramp"}, metrics=FACTS)
    rows = []
    for k in range(4):
        n = 100 * 2**k
        for i in range(n):
            intended = T0 + k + i / n
            lat = latency(k, i, n)
            rows.append(
                (
                    run_id,
                    f"{k}-{i}",
                    intended,
                    intended + lat if lat is not None else None,
                    "SUCCESS" if lat is not None else "LOST",
                )
            )
    con.executemany(
        "INSERT INTO tasks (run_id, task_id, sent_at, intended_at, finished_at, state) VALUES (?, ?, ?, ?, ?, ?)",
        [(r, t, i, i, f, s) for r, t, i, f, s in rows],
    )


def test_the_step_where_latency_grows_through_the_step_is_the_limit(tmp_path):
    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        # 100/s and 200/s keep up (10–12 ms); from 400/s the queue grows: latency climbs through the step.
        _ramp(con, "a", lambda k, i, n: 0.010 + 0.002 * k if k < 2 else 0.01 + 0.8 * i / n)
        steps = ratesearch.steps(con, "a")
        assert [s.sustained for s in steps] == [True, True, False, False]
        assert [s.sent for s in steps] == [100, 200, 400, 800]
        best, how = ratesearch.judge(con, "a")
        assert best == 200 and "200/s sustained; 400/s was not" in how
        assert ratesearch.after_ingest(con, "a", {"mode": "ramp"}) is None
        cell = con.execute("SELECT cell_id FROM runs WHERE run_id = 'a'").fetchone()[0]
        assert ratesearch.stored_max(con, "r", cell) == 200


def test_p99_runaway_and_lost_tasks_end_the_search(tmp_path):
    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        # flat through each step, but step 2's p99 is 30× the first step's: p99 ran away
        _ramp(con, "b", lambda k, i, n: 0.01 if k < 2 or i < n * 0.9 else 0.3)
        assert ratesearch.judge(con, "b")[0] == 200
        # one task of step 1 was lost: only step 0 counts
        _ramp(con, "c", lambda k, i, n: None if (k, i) == (1, 5) else 0.01)
        assert ratesearch.judge(con, "c")[0] == 100
        # every step kept up: the maximum is the top step, and the sentence says it may be more
        _ramp(con, "d", lambda k, i, n: 0.01)
        best, how = ratesearch.judge(con, "d")
        assert best == 800 and "may sustain more" in how
        # nothing sustained: no maximum, and the run fails with why
        _ramp(con, "e", lambda k, i, n: None if i == 0 else 0.01)
        assert ratesearch.judge(con, "e")[0] is None
        assert "not even the first step" in ratesearch.after_ingest(con, "e", {"mode": "ramp"})


def test_search_cell_drops_the_fraction_and_ramps():
    cell = Cell("x", {"broker": "redis", "pool": "threads", "params.mode": "stream", "params.rate_fraction": 0.5})
    other = Cell("y", {"broker": "redis", "pool": "threads", "params.mode": "stream", "params.rate_fraction": 0.9})
    a, b = ratesearch.search_cell("throughput", cell), ratesearch.search_cell("throughput", other)
    assert a == b or a.cell_id == b.cell_id  # one search per cell, whatever the fraction
    assert dict(a.values) == {"broker": "redis", "pool": "threads", "params.mode": "ramp"}
