"""concurrent_sleep's question is memory per concurrent task (issue 39): the run stores
``memory_per_task_bytes`` = (peak PSS − the idle workers' PSS) / the most tasks in flight at once,
and "Which configuration?" (``cmx recommend``, the report) ranks on it, not on the peak, which
always names the one-task cell (the measured memory per task decides, either way). Real workers on
the machine's Redis, real DuckDB; the figures are checked against the samples and task stamps cmx
stored."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cmx, query, sweep

pytestmark = pytest.mark.integration

#: The worker main processes' last PSS reading before the run's first task arrived, per host,
#: summed: read here from the stored samples and stamps, apart from metrics.sql.
IDLE_PSS = """
SELECT sum(pss) FROM (
    SELECT host, arg_max(pss, ts) AS pss FROM (
        SELECT host, ts, sum(pss_bytes) AS pss FROM sample_times
        WHERE run_id = $run AND role = 'worker' AND ts < (
            SELECT min(coalesce(received_at, started_at)) FROM task_times WHERE run_id = $run)
        GROUP BY host, ts HAVING count(pss_bytes) = count(*))
    GROUP BY host)
"""


def test_concurrent_sleep_stores_memory_per_task_and_ranks_on_it(tmp_path):
    db = sweep(
        tmp_path,
        "per-task",
        """
        workload: {name: concurrent_sleep, params: {sleep_s: 3.0}}
        fixed: {broker: redis, pool: threads, prefetch_multiplier: 1}
        zip:
          - {params.tasks: [1, 60], concurrency: [1, 60]}
        limits: {run_timeout: 2m}
    """,
    )
    runs = query(db, 'SELECT run_id, "params.tasks" FROM runs WHERE status = \'ok\' ORDER BY 2')
    assert [n for _, n in runs] == [1, 60], runs
    for run_id, tasks in runs:
        m = dict(query(db, "SELECT name, value FROM metrics WHERE run_id = ?", [run_id]))
        assert m["tasks_in_flight_max"] == tasks, (tasks, m["tasks_in_flight_max"])  # all asleep at once
        ((idle,),) = query(db, IDLE_PSS, {"run": run_id})
        assert idle is not None and 0 < idle < m["peak_pss_bytes"], (tasks, idle, m["peak_pss_bytes"])
        assert m["memory_per_task_bytes"] == pytest.approx((m["peak_pss_bytes"] - idle) / tasks), (tasks, m)
        assert m["memory_per_task_bytes"] > 0
    # The peak grows with the tasks (the one-task cell has the lowest, always); which cell a task costs
    # least in is what the runs measured (sixty threads' stacks may cost more a task than one, or less):
    # "Which configuration?" names the cell of the least memory per task, whichever it is.
    peaks = {
        n: v
        for n, v in query(
            db,
            """SELECT r."params.tasks", m.value FROM metrics m JOIN runs r USING (run_id)
                                           WHERE m.name = 'peak_pss_bytes'""",
        )
    }
    per_task = {
        n: v
        for n, v in query(
            db,
            """SELECT r."params.tasks", m.value FROM metrics m JOIN runs r USING (run_id)
                                              WHERE m.name = 'memory_per_task_bytes'""",
        )
    }
    assert peaks[1] < peaks[60], (peaks, per_task)
    proc = cmx("recommend", "per-task", "--db", str(db), "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rec = json.loads(proc.stdout)
    assert "memory_per_task_bytes" in json.dumps(rec["objectives"]), rec["objectives"]  # the workload's own
    best = next(r for r in rec["ranking"] if r["rank"] == 1)
    tasks_of = {cell: n for cell, n in query(db, 'SELECT cell_id, "params.tasks" FROM runs')}
    assert tasks_of[best["cell_id"]] == min(per_task, key=per_task.get), (rec["ranking"], per_task)
