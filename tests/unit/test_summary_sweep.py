"""A sweep's summary holds that sweep's runs only (issue 51: a 3-run night printed `5/5` and an
interval over two runs of an earlier night); a resumed sweep's holds its own and the ones it
resumes. Hand-made database, no services (under 1 s)."""

from __future__ import annotations

from cmx.analysis import views
from cmx.analysis.summary import summarize
from cmx.engine.model.cells import Cell
from cmx.engine.results import db
from cmx.workloads.vocab import metrics as M
from tests.results_fixture import T0, add_run, cell_id

DIMS = {"broker": "redis", "pool": "threads"}


def _sweep(con, sweep_id: str, night: int, resumes: str | None = None) -> None:
    db.record_sweep(con, sweep_id, "e", "e.yaml", "throughput", "", "inv", {}, {"revision": 1}, resumes=resumes)
    con.execute("UPDATE sweeps SET started_at = to_timestamp(?) WHERE sweep_id = ?", [T0 + 3600 * night, sweep_id])


def _runs(con, sweep_id: str, night: int, repeats, rate: float) -> None:
    for repeat in repeats:
        add_run(
            con,
            "e",
            f"{sweep_id}-{repeat}",
            DIMS,
            repeat=repeat,
            sweep_id=sweep_id,
            started_at=T0 + 3600 * night + repeat,
            metrics={M.CONSUME_RATE: rate + repeat},
        )


def test_a_nights_summary_holds_its_own_runs(tmp_path):
    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        _sweep(con, "night1", 1)
        _runs(con, "night1", 1, range(1, 6), 100.0)  # five runs
        _sweep(con, "night2", 2)
        _runs(con, "night2", 2, range(1, 4), 200.0)  # three runs, a night later
        _sweep(con, "night3", 3)
        _runs(con, "night3", 3, (1,), 300.0)  # interrupted after one run…
        _sweep(con, "night3b", 4, resumes="night3")
        _runs(con, "night3b", 4, (2, 3), 300.0)  # …and resumed
    cell = Cell(cell_id(DIMS), DIMS)
    with views.connect(path, read_only=True) as con:
        [night2] = summarize(con, "e", [cell], (M.CONSUME_RATE,), point="night2")
        [night3] = summarize(con, "e", [cell], (M.CONSUME_RATE,), point="night3")
        [every] = summarize(con, "e", [cell], (M.CONSUME_RATE,))
    assert (night2.ok, night2.runs) == (3, 3)  # not 5/5
    rate = night2.metrics[M.CONSUME_RATE]
    assert rate.n == 3 and 201 <= rate.low <= rate.high <= 203  # no run of night 1 in its interval
    assert (night3.ok, night3.runs) == (3, 3) and night3.metrics[M.CONSUME_RATE].median == 302
    assert (every.ok, every.runs) == (5, 5)  # without a point: the latest run of each repeat, as before
