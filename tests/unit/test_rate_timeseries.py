"""Rate over time (analysis/sql/rate_timeseries.sql): buckets sized to the run, and a partial last
bucket divided by its real width, so a steady rate reads steady however long the run (issue 24.7:
a one-second quickstart run at 1,750 tasks/s was drawn as two 1-second buckets, the second read
as a fall to 244/s)."""

from __future__ import annotations

import pytest

from cmx.analysis import views
from tests.results_fixture import T0, add_run


def _steady(tmp_path, rate: float, seconds: float) -> list[dict]:
    """One run whose tasks finish at exactly ``rate`` a second for ``seconds`` from the first send."""
    n = int(rate * seconds) + 1
    with views.connect(tmp_path / "r.duckdb") as con:
        add_run(con, "e", "r1", {"broker": "redis"})
        con.execute(
            "INSERT INTO tasks (run_id, task_id, sent_at, started_at, finished_at, state) "
            "SELECT 'r1', 't' || i, ? + i / ?, ? + i / ?, ? + i / ? + 0.0001, 'SUCCESS' FROM range(?) r(i)",
            [T0, rate, T0, rate, T0, rate, n],
        )
        cur = con.execute("SELECT * FROM rate_timeseries WHERE run_id = 'r1' ORDER BY second")
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


@pytest.mark.parametrize("seconds, width", [(1.1, 0.05), (1.01, 0.05), (7.3, 0.2), (65.0, 2.0)])
def test_a_steady_rate_reads_steady_in_every_bucket_the_partial_last_one_included(tmp_path, seconds, width):
    rows = _steady(tmp_path, 1750.0, seconds)
    assert rows[0]["width_s"] == pytest.approx(width) and len(rows) <= 40
    assert sum(r["completed"] for r in rows) == int(1750 * seconds) + 1
    # every bucket but the last is whole; the last ends at the last finish, no narrower than half a bucket
    assert all(r["width_s"] == pytest.approx(width) for r in rows[:-1])
    assert 0.5 * width <= rows[-1]["width_s"] < 1.5 * width
    assert rows[-1]["second"] + rows[-1]["width_s"] == pytest.approx(seconds, abs=0.01)
    for r in rows:  # 1,750/s everywhere, within what whole tasks in a bucket allow
        assert r["rate"] == pytest.approx(1750, abs=1.5 / r["width_s"]), r


def test_a_stall_still_shows_as_buckets_of_zero(tmp_path):
    # 10/s for 2 s, nothing for 4 s, then 10/s for 2 s: 0.2 s buckets, the middle ones at 0
    tasks = [(f"a{i}", T0 + i / 100, T0 + i / 100, T0 + i / 100, "SUCCESS") for i in range(0, 200, 10)]
    tasks += [(f"b{i}", T0 + 6 + i / 100, T0 + 6 + i / 100, T0 + 6 + i / 100, "SUCCESS") for i in range(0, 201, 10)]
    with views.connect(tmp_path / "r.duckdb") as con:
        add_run(con, "e", "r1", {"broker": "redis"}, tasks=tasks, queue_depth=[(T0 + 3, 7)])
        rows = con.execute(
            "SELECT second, rate, queue_depth FROM rate_timeseries WHERE run_id = 'r1' ORDER BY second"
        ).fetchall()
    assert len(rows) == 40
    assert [s for s, rate, _ in rows if rate == 0] == pytest.approx([2 + 0.2 * k for k in range(20)])
    assert [(s, d) for s, _, d in rows if d is not None] == [(3.0, 7)]
