"""``io_chord`` and ``sql_fanout`` at small sizes, through the real `cmx run`, read from DuckDB.

Real RabbitMQ, Redis and PostgreSQL; the sleep service is the real one the engine starts. Each
assertion on a finding also checks the measurement behind it (every task ran, the service saw
every request, the results are right), so a broken stamp or a silent loss fails the test.
"""

from __future__ import annotations

import csv

import pytest

from tests.conftest import metrics_by, query, sweep

pytestmark = pytest.mark.integration


# --------------------------------------------------------------------------- io_chord
def test_io_chord_makespan_falls_with_concurrency(tmp_path):
    db = sweep(
        tmp_path,
        "chords",
        """
        workload:
          name: io_chord
          params: {chords: [7, 3], sleep_min_s: 0.3, sleep_max_s: 0.4}
        fixed: {broker: rabbitmq, backend: redis, pool: gevent, prefetch_multiplier: 1, heartbeat: 0}
        matrix:
          concurrency: [1, 10]
        limits: {run_timeout: 1m}
    """,
    )
    m = metrics_by(db, "concurrency")
    assert sorted(m) == [1, 10]
    for cell, v in m.items():
        # 10 header tasks and 2 callbacks, each run once; the service answered exactly the 10 calls
        assert v["tasks_published"] == v["tasks_completed"] == 12, cell
        assert v["tasks_lost"] == v["tasks_duplicated"] == v["tasks_failed"] == 0, cell
        assert v["header_tasks"] == v["service_requests"] == v["service_distinct_ids"] == 10, cell
        assert 10 * 0.3 <= v["service_slept_s"] <= 10 * 0.4, cell
        # the chords' makespan is inside the whole run's (which adds the callbacks)
        assert 0.3 <= v["chords_makespan_s"] <= v["makespan_s"], cell
        # This machine's RabbitMQ lists a connection only after its next stats collection (5 s): a
        # short run's broker count is then unknown (NULL), never a false 0.
        assert v["backend_connections_max"] > 0, cell
        assert v["broker_connections_max"] is None or v["broker_connections_max"] > 0, cell
    one, ten = m[1], m[10]
    assert one["chords_makespan_s"] >= 10 * 0.3  # one call at a time
    # ten at once: about one sleep (the study: 1947 s at concurrency 1, 207 s at 16)
    assert ten["chords_makespan_s"] < 2 * 0.4
    assert ten["makespan_s"] * 3 < one["makespan_s"], (ten["makespan_s"], one["makespan_s"])
    names = dict(query(db, "SELECT name, count(*) FROM tasks GROUP BY name"))
    assert names == {"cmx.io_chord.waitinate": 20, "cmx.io_chord.summarize": 4}
    # the service's own record, fetched with the artifacts
    for (run_id,) in query(db, "SELECT run_id FROM runs"):
        path = db.parent / "artifacts" / run_id / "localhost" / "service-requests.csv"
        with path.open() as f:
            rows = list(csv.DictReader(f))
        assert sorted(r["id"] for r in rows) == sorted([f"0-{i}" for i in range(7)] + [f"1-{i}" for i in range(3)])
        assert all(0.3 <= float(r["slept_s"]) <= 0.4 for r in rows)
    # the service was sampled like every other process of the run
    roles = {r for (r,) in query(db, "SELECT DISTINCT role FROM samples")}
    assert "service" in roles, roles


# --------------------------------------------------------------------------- sql_fanout
def test_sql_fanout_celery_matches_direct_and_times_every_request(tmp_path):
    queries, requests = 8, 4
    db = sweep(
        tmp_path,
        "fanout-sql",
        f"""
        workload:
          name: sql_fanout
          params: {{rows: 20000, queries: {queries}, requests: {requests}}}
        fixed: {{broker: rabbitmq, backend: redis, pool: threads, concurrency: 8}}
        matrix:
          params.mode: [direct, celery]
          params.client_threads: [1, 2]
        exclude:
          - {{params.mode: direct, params.client_threads: 1}}  # three runs keep the test short
        limits: {{run_timeout: 1m}}
    """,
    )
    m = metrics_by(db, '"params.mode", "params.client_threads"')
    assert sorted(m) == [("celery", 1), ("celery", 2), ("direct", 2)]
    for cell, v in m.items():
        assert v["results_correct"] == 1 and v["result_rows"] > 0, cell
        for name in ("request_p50_s", "request_p95_s", "request_p99_s", "request_mean_s", "requests_per_s"):
            assert v[name] > 0, (cell, name)
        assert v["request_p50_s"] <= v["request_p95_s"] <= v["request_p99_s"], cell
    # celery: one task per query of every request, each run once; direct: no task at all
    tasks = dict(
        query(
            db,
            """SELECT "params.mode" || '/' || "params.client_threads", count(t.task_id)
                              FROM runs LEFT JOIN tasks t USING (run_id) WHERE t.state IS NULL OR t.state <> 'LOST'
                              GROUP BY ALL""",
        )
    )
    # (each client thread sends one untimed warm-up request first: requests + 1 per thread)
    assert tasks == {"celery/1": queries * (requests + 1), "celery/2": queries * (requests + 1) * 2, "direct/2": 0}, (
        tasks
    )
    for threads in (1, 2):
        v = m[("celery", threads)]
        assert v["tasks_published"] == v["tasks_completed"] == queries * (requests + 1) * threads
        assert v["tasks_lost"] == v["tasks_duplicated"] == v["tasks_failed"] == 0
    # the study's finding, robust at this size (a few ms of SQL per request): the round trips
    # through broker and backend cost more than running the queries in the client
    assert m[("celery", 2)]["request_p50_s"] > m[("direct", 2)]["request_p50_s"]
    # every request timed, in the driver's requests.csv
    for run_id, mode, threads in query(db, 'SELECT run_id, "params.mode", "params.client_threads" FROM runs'):
        with (db.parent / "artifacts" / run_id / "localhost" / "requests.csv").open() as f:
            rows = list(csv.DictReader(f))
        assert len(rows) == requests * threads and {r["mode"] for r in rows} == {mode}
        assert all(float(r["seconds"]) > 0 for r in rows)
