"""A peak PSS is measured inside the run (issue #24 point 6).

PSS is read every few sampler ticks; a run whose work lasts well under a second could get its
only reading as the worker's interpreter started (6.4 MiB for a 60 MiB worker) or none. The driver
marks when the clock starts and when the work drained, and the sampler reads PSS of every watched
process then; the peak comes only from readings between the two.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import cmx, query, sweep

pytestmark = pytest.mark.integration


def test_a_short_threads_run_gets_its_peak_pss_from_inside_the_run(tmp_path):
    db = sweep(
        tmp_path,
        "pss-window",
        """
        repeats: 3
        workload: {name: throughput, params: {tasks: 200}}
        fixed: {broker: redis, backend: none, pool: threads}
    """,
    )
    runs = query(db, "SELECT run_id FROM runs ORDER BY started_at")
    for (run_id,) in runs:
        driver = json.loads((db.parent / "artifacts" / run_id / "localhost" / "driver.json").read_text())
        start, end = driver["consuming_at"], driver["finished_at"]  # the driver's own clock start and end
        assert end - start < 5, driver  # a short run indeed
        (peak_pss,), (peak_rss,) = (
            query(db, "SELECT value FROM metrics WHERE run_id = ? AND name = ?", [run_id, m])[0]
            for m in ("peak_pss_bytes", "peak_rss_bytes")
        )
        # The worker's PSS readings inside the run, summed per tick (one process: the threads pool).
        inside = query(
            db,
            """SELECT ts, sum(pss_bytes) FROM samples
                              WHERE run_id = ? AND role IN ('worker', 'worker-child') GROUP BY ts
                              HAVING count(pss_bytes) = count(*) AND ts BETWEEN ? AND ?""",
            [run_id, start, end],
        )
        assert inside, f"{run_id}: no PSS reading of the worker between its clock start and its end"
        assert peak_pss is not None and peak_pss == max(v for _, v in inside), (run_id, peak_pss, inside)
        assert peak_pss >= 0.3 * peak_rss, (run_id, peak_pss, peak_rss)  # a single-process worker


def test_a_run_whose_workers_never_worked_has_no_peak_pss_and_says_not_sampled(tmp_path):
    """The raw baseline: its Celery workers start but never consume (no clock starts for them):
    no PSS reading inside a run, so no peak, and the summary and `cmx compare` say so."""
    db = sweep(
        tmp_path,
        "pss-none",
        """
        repeats: 3
        workload: {name: throughput, params: {tasks: 200, via: raw}}
        fixed: {broker: redis, backend: none, pool: threads}
    """,
    )
    values = query(db, "SELECT value FROM metrics WHERE name = 'peak_pss_bytes'")
    assert values == [(None,)] * 3, values
    assert all(v is not None for (v,) in query(db, "SELECT value FROM metrics WHERE name = 'peak_rss_bytes'"))
    proc = cmx("compare", "pss-none", "pss-none", "--db", str(db))
    assert "peak_pss_bytes: not sampled in 3 of the baseline's 3 run(s)" in proc.stderr, proc.stdout + proc.stderr
