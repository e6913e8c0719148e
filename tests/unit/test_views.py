"""The analysis views over small fixture databases, with values worked out by hand."""

from __future__ import annotations

import math

import duckdb
import pytest

from cmx.analysis import views
from tests.conftest import cmx
from tests.results_fixture import T0, add_run, build_matrix


@pytest.fixture
def matrix_db(tmp_path):
    return build_matrix(tmp_path / "r.duckdb")


def rows(path, sql, params=None):
    with views.connect(path, read_only=True) as con:
        cur = con.execute(sql, params or [])
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def test_run_summary_is_runs_plus_pivoted_metrics(matrix_db):
    got = rows(matrix_db, "SELECT * FROM run_summary ORDER BY run_id")
    assert len(got) == 17
    r = next(x for x in got if x["run_id"] == "rabbitmq-threads-4-2")
    assert (r["experiment"], r["broker"], r["pool"], r["concurrency"], r["status"]) == (
        "exp",
        "rabbitmq",
        "threads",
        4,
        "ok",
    )
    assert r["consume_rate"] == 2142 and r["publish_rate"] == 4284
    assert (r["peak_rss_bytes"], r["peak_pss_bytes"], r["broker_connections_max"]) == (414, 209, 6)
    assert r["backend_connections_max"] is None  # no such metric stored: NULL, not 0
    failed = next(x for x in got if x["run_id"] == "redis-prefork-1-3")
    assert (failed["status"], failed["tasks_lost"], failed["latency_p50_s"]) == ("failed", 2, None)
    headline = {
        "tasks_published",
        "tasks_completed",
        "tasks_lost",
        "tasks_duplicated",
        "publish_rate",
        "consume_rate",
        "makespan_s",
        "latency_p50_s",
        "latency_p95_s",
        "latency_p99_s",
        "peak_rss_bytes",
        "peak_pss_bytes",
        "broker_connections_max",
        "backend_connections_max",
    }
    assert headline <= set(got[0])


def test_cell_summary_counts_failures_apart_from_statistics(matrix_db):
    got = rows(
        matrix_db,
        "SELECT * FROM cell_summary WHERE broker = 'redis' AND pool = 'prefork' "
        "AND concurrency = 1 AND metric = 'consume_rate'",
    )
    assert len(got) == 1
    c = got[0]
    # ok runs: 1011 and 1012; the failed run's 1.0 must not be in there.
    assert (c["n"], c["median"], c["min"], c["max"]) == (2, 1011.5, 1011, 1012)
    assert c["stddev"] == pytest.approx(math.sqrt(0.5))
    assert c["iqr"] == pytest.approx(0.5)
    assert (c["runs"], c["ok_runs"], c["failed_runs"], c["timeout_runs"], c["lost_tasks"]) == (3, 2, 1, 0, 2)
    clean = rows(
        matrix_db,
        "SELECT runs, failed_runs, lost_tasks FROM cell_summary WHERE broker = 'rabbitmq' "
        "AND pool = 'threads' AND concurrency = 4 AND metric = 'consume_rate'",
    )
    assert clean == [{"runs": 2, "failed_runs": 0, "lost_tasks": 0}]
    assert rows(matrix_db, "SELECT count(DISTINCT cell_id) AS n FROM cell_summary") == [{"n": 8}]


def test_cell_without_metrics_still_shows(tmp_path):
    path = tmp_path / "r.duckdb"
    with views.connect(path) as con:
        add_run(con, "e", "r1", {"pool": "solo"}, status="timeout")
    got = rows(path, "SELECT pool, metric, runs, timeout_runs, lost_tasks FROM cell_summary")
    assert got == [{"pool": "solo", "metric": None, "runs": 1, "timeout_runs": 1, "lost_tasks": 0}]


def test_latency_percentiles(matrix_db):
    (r,) = rows(matrix_db, "SELECT * FROM latency_percentiles WHERE run_id = 'redis-threads-4-1'")
    # latencies 0.1, 0.2, ..., 1.0
    assert r["tasks"] == 10
    assert (r["min_s"], r["max_s"]) == pytest.approx((0.1, 1.0))
    assert r["p50_s"] == pytest.approx(0.55)
    assert r["p90_s"] == pytest.approx(0.91)
    assert r["p99_s"] == pytest.approx(0.991)


def test_latency_leaves_out_warmup_and_lost_tasks(tmp_path):
    path = tmp_path / "r.duckdb"
    tasks = [
        ("a", T0 + 0, T0 + 0, T0 + 9, "SUCCESS"),  # warm-up (first sent at T0, warmup 1.5 s)
        ("b", T0 + 1, T0 + 1, T0 + 9, "SUCCESS"),  # warm-up
        ("c", T0 + 2, T0 + 2, T0 + 3, "SUCCESS"),  # 1 s
        ("d", T0 + 3, T0 + 3, T0 + 6, "SUCCESS"),  # 3 s
        ("e", T0 + 4, None, None, "LOST"),
    ]
    with views.connect(path) as con:
        add_run(con, "e", "r1", {"pool": "solo"}, tasks=tasks, warmup_s=1.5)
    (r,) = rows(path, "SELECT tasks, p50_s, max_s FROM latency_percentiles")
    assert r == {"tasks": 2, "p50_s": 2.0, "max_s": 3.0}
    # one rule (steady_tasks) for both latency views: the per-cell spectrum takes the same tasks
    (s,) = rows(path, "SELECT runs, tasks, p50_s, max_s FROM latency_spectrum")
    assert s == {"runs": 1, "tasks": 2, "p50_s": 2.0, "max_s": 3.0}
    assert rows(path, "SELECT task_id, latency_s FROM steady_tasks ORDER BY task_id") == [
        {"task_id": "c", "latency_s": 1.0},
        {"task_id": "d", "latency_s": 3.0},
    ]


def test_memory_timeseries_sums_per_role_and_tick(tmp_path):
    path = tmp_path / "r.duckdb"
    samples = [
        ("w1", 1, "worker", T0 + 2, 100, 60),
        ("w1", 2, "worker-child", T0 + 2, 30, 10),
        ("w1", 3, "worker-child", T0 + 2, 30, 10),
        ("w1", 1, "worker", T0 + 2.5, 110, None),
        ("w1", 2, "worker-child", T0 + 2.5, 40, 12),
        ("w1", 3, "worker-child", T0 + 2.5, 40, None),  # PSS not read for every child: NULL
        ("b1", 9, "broker", T0 + 2, 500, 400),
    ]
    with views.connect(path) as con:
        add_run(con, "e", "r1", {"pool": "prefork"}, samples=samples)
    got = rows(path, "SELECT host, role, t_s, processes, rss_bytes, pss_bytes FROM memory_timeseries ORDER BY ALL")
    assert got == [
        {"host": "b1", "role": "broker", "t_s": 2.0, "processes": 1, "rss_bytes": 500, "pss_bytes": 400},
        {"host": "w1", "role": "worker", "t_s": 2.0, "processes": 1, "rss_bytes": 100, "pss_bytes": 60},
        {"host": "w1", "role": "worker", "t_s": 2.5, "processes": 1, "rss_bytes": 110, "pss_bytes": None},
        {"host": "w1", "role": "worker-child", "t_s": 2.0, "processes": 2, "rss_bytes": 60, "pss_bytes": 20},
        {"host": "w1", "role": "worker-child", "t_s": 2.5, "processes": 2, "rss_bytes": 80, "pss_bytes": None},
    ]


def test_connection_maxima(matrix_db):
    got = rows(matrix_db, "SELECT * FROM connection_maxima WHERE run_id = 'rabbitmq-prefork-4-1'")
    assert got == [
        {
            "run_id": "rabbitmq-prefork-4-1",
            "role": "broker",
            "kind": "rabbitmq",
            "max_connections": 6,
            "mean_connections": 4.0,
            "samples": 2,
            "worker_max_connections": None,
            "driver_max_connections": None,
        }
    ]  # stored before clients were named


def test_connection_maxima_sums_client_roles_per_tick(tmp_path):
    with views.connect(tmp_path / "c.duckdb") as con:
        add_run(con, "e", "r1", {"pool": "threads"})
        con.execute("""INSERT INTO connections (run_id, host, role, kind, ts, count, client) VALUES
            ('r1', 'd1', 'broker', 'redis', 1, 4, 'worker'), ('r1', 'd1', 'broker', 'redis', 1, 1, 'driver'),
            ('r1', 'd1', 'broker', 'redis', 2, 6, 'worker'), ('r1', 'd1', 'broker', 'redis', 2, 0, 'driver')""")
    got = rows(
        tmp_path / "c.duckdb",
        "SELECT max_connections, worker_max_connections, driver_max_connections, samples FROM connection_maxima",
    )
    assert got == [{"max_connections": 6, "worker_max_connections": 6, "driver_max_connections": 1, "samples": 2}]


def test_views_follow_new_dimensions(matrix_db):
    # A later experiment adds a dimension: `runs` gains a column, and run_summary with it.
    with views.connect(matrix_db) as con:
        add_run(con, "other", "o1", {"pool": "solo", "params.size_mb": 8}, metrics={"consume_rate": 5})
    got = rows(matrix_db, 'SELECT "params.size_mb", consume_rate FROM run_summary WHERE experiment = \'other\'')
    assert got == [{"params.size_mb": 8, "consume_rate": 5}]


def test_views_are_stored_for_other_duckdb_clients(matrix_db):
    with views.connect(matrix_db):  # as `cmx run` opens its database, before and after the sweep
        pass
    con = duckdb.connect(str(matrix_db), read_only=True)  # plain DuckDB, no cmx code involved
    try:
        assert con.execute("SELECT count(*) FROM run_summary").fetchall() == [(17,)]
    finally:
        con.close()


def test_cmx_sql_reads_views(matrix_db):
    p = cmx(
        "sql",
        "SELECT count(*) AS n FROM cell_summary WHERE metric = 'consume_rate'",
        "--db",
        str(matrix_db),
        "--format",
        "csv",
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout == "n\n8\n"  # plain newlines: the output goes to shells and pipes
