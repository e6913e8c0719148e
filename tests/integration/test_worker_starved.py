"""A starved worker is a finding (issue 51): a gevent worker on Redis at concurrency 1, prefetch 1
takes one task per 2 s however fast they come (experiments/pitfalls/green-one-slot.yaml
says why), and the run stores it (metric worker_starved_share) and says so under its summary; a
threads worker of the same cell keeps up, its share near 0, and nothing is said of it.

Cost: one sweep of two runs, 5 no-op tasks at 5/s each: measured 2026-12-07 at load ~10 on 2
cores, the gevent run 19.3 s (one task per 2 s), the threads run 5.1 s, the sweep's start and end
~45 s: ~70 s in all, plus any wait for another sweep holding the host's work dir (250 s that day
behind another developer's suite)."""

from __future__ import annotations

import textwrap

import pytest

from tests.conftest import cmx, query, write

pytestmark = pytest.mark.integration

TASKS = 5


def test_a_green_worker_on_redis_with_one_slot_is_starved_and_the_run_says_so(tmp_path):
    exp = write(
        tmp_path / "starve.yaml",
        textwrap.dedent(
            f"""
            name: starve
            workload:
              name: throughput
              params: {{tasks: {TASKS}, payload_bytes: 64, mode: stream, rate: 5}}
            fixed: {{broker: redis, backend: none, concurrency: 1, prefetch_multiplier: 1}}
            matrix:
              pool: [gevent, threads]
            limits: {{run_timeout: 2m}}
            """
        ),
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db), timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    share = dict(
        query(db, "SELECT pool, value FROM metrics JOIN runs USING (run_id) WHERE name = 'worker_starved_share'")
    )
    done = dict(query(db, "SELECT pool, value FROM metrics JOIN runs USING (run_id) WHERE name = 'tasks_completed'"))
    assert done == {"gevent": TASKS, "threads": TASKS}  # the runs really ran
    # The receipts: the stream sends one every 0.2 s; the starved worker takes one every 2 s.
    gaps = dict(
        query(
            db,
            "SELECT pool, median(gap) FROM (SELECT run_id, received_at - lag(received_at) OVER "
            "(PARTITION BY run_id ORDER BY received_at) AS gap FROM task_times) JOIN runs USING (run_id) "
            "WHERE gap IS NOT NULL GROUP BY pool",
        )
    )
    assert 1.8 <= gaps["gevent"] <= 2.3, gaps
    assert gaps["threads"] < 0.5, gaps
    assert share["gevent"] >= 0.8, share
    assert share["threads"] < 0.05, share
    out = " ".join(proc.stdout.split())  # a narrow terminal folds the line
    assert "starved: pool=gevent: its workers held no task while its tasks waited in the broker" in out, out
    assert "experiments/pitfalls/green-one-slot.yaml shows it" in out, out
    assert "starved: pool=threads" not in out
    # ...and validation warned before the runs
    assert "walk into 'A gevent/eventlet worker on Redis at its prefetch limit'" in " ".join(proc.stderr.split())
