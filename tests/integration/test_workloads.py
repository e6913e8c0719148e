"""Each workload's qualitative finding, at small sizes, through the real `cmx run` and read from DuckDB.

The reference studies' findings are asserted only where they hold robustly on a 2-core machine;
every assertion also checks that the measurement behind it is real (data resident, tasks all
run, rates computed), so a broken sampler or stamp fails the test instead of passing it.
"""

from __future__ import annotations


import pytest

from tests.conftest import metrics_by, query, sweep

pytestmark = pytest.mark.integration

MB = 1024 * 1024


# --------------------------------------------------------------------------- memory_fanout
def test_memory_fanout_sequential_is_slow_but_lean(tmp_path):
    units, size_mb, work_s = 8, 8.0, 0.3
    db = sweep(
        tmp_path,
        "fanout-speed",
        f"""
        workload:
          name: memory_fanout
          params: {{subtasks: {units}, size_mb: {size_mb}, work_s: {work_s}, inner_workers: {units}}}
        fixed: {{broker: redis, pool: prefork, concurrency: 1}}
        matrix:
          params.inner: [sequential, threads]
        limits: {{run_timeout: 2m}}
    """,
    )
    m = metrics_by(db, '"params.inner"')
    seq, thr = m["sequential"], m["threads"]
    for cell in (seq, thr):
        assert cell["tasks_published"] == cell["tasks_completed"] == 1 and cell["tasks_lost"] == 0
    # units one after another vs all at once: 8 x 0.3 s against ~0.3 s
    assert seq["makespan_s"] >= units * work_s
    assert work_s <= thr["makespan_s"] < seq["makespan_s"] / 3
    # ...but holding one unit's data at a time, not eight: the child's exact peak shows the difference
    held_more = thr["worker_vmhwm_max_bytes"] - seq["worker_vmhwm_max_bytes"]
    assert held_more > 0.7 * (units - 1) * size_mb * MB, held_more


def test_memory_fanout_prefork_threads_sums_more_rss_than_gevent(tmp_path):
    units, size_mb = 40, 4.0
    db = sweep(
        tmp_path,
        "fanout-memory",
        f"""
        workload:
          name: memory_fanout
          params: {{subtasks: {units}, size_mb: {size_mb}, work_s: 3.0, inner_workers: {units}}}
        fixed: {{broker: redis, concurrency: 1}}
        zip:
          - {{pool: [prefork, gevent], params.inner: [threads, gevent]}}
        limits: {{run_timeout: 2m}}
    """,
    )
    m = metrics_by(db, 'pool, "params.inner"')
    prefork, gevent = m[("prefork", "threads")], m[("gevent", "gevent")]
    live = units * size_mb * MB
    for cell in (prefork, gevent):
        assert cell["tasks_completed"] == 1 and cell["tasks_lost"] == 0
        assert 3.0 <= cell["makespan_s"] < 6.0  # all 40 units held their data at the same time
        # the data is really resident in the process that ran the task, and the sampler saw it
        assert cell["worker_vmhwm_max_bytes"] > live
        assert cell["peak_rss_bytes"] > live and live * 0.8 < cell["peak_pss_bytes"] <= cell["peak_rss_bytes"]
    # The study's direction (490 MB vs 262 MB): summed RSS of prefork's parent + child is above the
    # single gevent process. Robust here only as RSS: it counts the pages parent and child share twice.
    assert prefork["peak_rss_bytes"] > 1.1 * gevent["peak_rss_bytes"]


# --------------------------------------------------------------------------- concurrent_sleep
#: The worker's growth per in-flight task: the view memory_per_task (analysis/sql), as docs/workloads.md
#: reads it: peak minus the worker main process's memory at its last tick before the first task.
GROWTH_PER_TASK = """
SELECT r.pool, m.tasks, m.all_in_flight, m.idle_rss_bytes, m.peak_rss_bytes, m.rss_per_task_bytes
FROM memory_per_task m JOIN runs r USING (run_id)
ORDER BY r.pool
"""


def test_concurrent_sleep_gevent_costs_less_per_task_than_threads(tmp_path):
    # All must be in flight at once: on a loaded 2-core machine starting 500 threads can take
    # seconds, so each task sleeps long enough that the last starts before the first ends.
    tasks = 500
    db = sweep(
        tmp_path,
        "sleepers",
        f"""
        workload:
          name: concurrent_sleep
          params: {{tasks: {tasks}, sleep_s: 8.0}}
        fixed: {{broker: redis, concurrency: {tasks}, prefetch_multiplier: 1}}
        matrix:
          pool: [gevent, threads]
        limits: {{run_timeout: 2m}}
    """,
    )
    rows = {pool: rest for pool, *rest in query(db, GROWTH_PER_TASK)}
    assert sorted(rows) == ["gevent", "threads"]
    for pool, (n, all_in_flight, idle_rss, peak_rss, per_task) in rows.items():
        assert n == tasks, pool
        assert all_in_flight, f"{pool}: the last task started after the first finished"
        assert idle_rss is not None and 20 * MB < idle_rss < peak_rss  # an idle tick was seen
        # a task in flight costs something real, and far less than a process would
        assert 2 * 1024 < per_task < 1 * MB, (pool, per_task)
    assert rows["gevent"][-1] < rows["threads"][-1], rows


# --------------------------------------------------------------------------- throughput via raw
def test_raw_broker_client_consumes_faster_than_celery(tmp_path):
    tasks = 2000
    db = sweep(
        tmp_path,
        "raw-vs-celery",
        f"""
        workload:
          name: throughput
          # publisher: celery: Celery's own client (apply_async), as the study compared
          params: {{tasks: {tasks}, payload_bytes: 64, mode: backlog, publisher: celery}}
        fixed: {{broker: redis, pool: gevent, concurrency: 8}}
        matrix:
          params.via: [celery, raw]
        limits: {{run_timeout: 2m}}
    """,
    )
    m = metrics_by(db, '"params.via"')
    celery, raw = m["celery"], m["raw"]
    for via, cell in m.items():
        # every message is stamped on both sides and counted, raw or not
        assert cell["tasks_published"] == cell["tasks_completed"] == tasks, via
        assert cell["tasks_lost"] == 0 and cell["tasks_duplicated"] == 0, via
        assert cell["publish_rate"] > 0 and cell["consume_rate"] > 0, via
    assert raw["raw_driver_maxrss_bytes"] > 0 and "raw_driver_maxrss_bytes" not in celery
    # the study: raw redis-py 12 s vs Celery 350 s for 100k; here several times faster is robust
    assert raw["consume_rate"] > 2 * celery["consume_rate"], (raw["consume_rate"], celery["consume_rate"])
    assert raw["publish_rate"] > 2 * celery["publish_rate"], (raw["publish_rate"], celery["publish_rate"])
    names = {
        n for (n,) in query(db, "SELECT DISTINCT name FROM tasks JOIN runs USING (run_id) WHERE \"params.via\" = 'raw'")
    }
    assert names == {"cmx.throughput.raw"}
