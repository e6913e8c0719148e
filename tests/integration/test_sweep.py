"""A small sweep on the real Redis and RabbitMQ, through real Ansible, checked from DuckDB."""

from __future__ import annotations

import json

import pytest

from tests.conftest import cmx, query, run_processes, write

pytestmark = pytest.mark.integration

TASKS = 300


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sweep")
    exp = write(
        tmp / "small.yaml",
        f"""
        name: small-sweep
        workload:
          name: throughput
          params: {{tasks: {TASKS}, payload_bytes: 128, mode: backlog}}
        matrix:
          broker: [redis, rabbitmq]
          pool: [prefork, threads]
        fixed: {{concurrency: 2, prefetch_multiplier: 4, worker.events: true, worker.mingle: true}}
        limits: {{run_timeout: 2m}}
    """,
    )
    db = tmp / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--db", str(db))
    return exp, db, proc


def test_every_run_is_ok_and_nothing_is_lost(sweep):
    _, db, proc = sweep
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = query(
        db,
        """
        SELECT r.broker, r.pool, r.status,
               max(value) FILTER (WHERE name = 'tasks_published'),
               max(value) FILTER (WHERE name = 'tasks_completed'),
               max(value) FILTER (WHERE name = 'tasks_lost'),
               max(value) FILTER (WHERE name = 'tasks_duplicated')
        FROM runs r JOIN metrics USING (run_id) WHERE experiment = 'small-sweep' GROUP BY ALL ORDER BY ALL""",
    )
    assert [(b, p) for b, p, *_ in rows] == [
        ("rabbitmq", "prefork"),
        ("rabbitmq", "threads"),
        ("redis", "prefork"),
        ("redis", "threads"),
    ]
    for broker, pool, status, published, completed, lost, duplicated in rows:
        assert status == "ok"
        assert published == completed == TASKS, (broker, pool)
        assert lost == 0 and duplicated == 0


def test_tasks_are_stamped_where_they_ran(sweep):
    _, db, _ = sweep
    rows = query(
        db,
        """
        SELECT r.pool, count(*), count(DISTINCT t.task_id), count(DISTINCT t.pid), min(t.host), max(t.host),
               count(*) FILTER (WHERE t.sent_at <= t.received_at AND t.received_at <= t.started_at
                                AND t.started_at <= t.finished_at)
        FROM tasks t JOIN runs r USING (run_id) WHERE r.experiment = 'small-sweep' GROUP BY r.pool ORDER BY r.pool""",
    )
    (pf, n1, d1, pids1, h1, h1b, ordered1), (th, n2, d2, pids2, h2, h2b, ordered2) = rows
    assert (pf, th) == ("prefork", "threads")
    assert n1 == d1 == n2 == d2 == 2 * TASKS
    assert h1 == h1b == h2 == h2b == "localhost"  # the inventory name, not the kernel's hostname
    assert pids1 >= 3  # prefork: two children per run, over two runs (a child ran the tasks)
    assert pids2 == 2  # threads: the worker process itself, one per run
    assert ordered1 == n1 and ordered2 == n2  # publish ≤ receive ≤ start ≤ finish for every task


def test_rates_memory_connections_and_hosts_are_recorded(sweep):
    _, db, _ = sweep
    metrics = dict(
        query(
            db,
            """
        SELECT name, min(value) FROM metrics JOIN runs USING (run_id) WHERE experiment = 'small-sweep'
        GROUP BY name""",
        )
    )
    for name in (
        "publish_rate",
        "consume_rate",
        "makespan_s",
        "latency_p50_s",
        "peak_rss_bytes",
        "peak_pss_bytes",
        "broker_connections_max",
        "queue_depth_max",
    ):  # backlog: the queue was full
        assert metrics[name] and metrics[name] > 0, name
    assert metrics["peak_pss_bytes"] <= metrics["peak_rss_bytes"] * 1.5
    roles = {r for (r,) in query(db, "SELECT DISTINCT role FROM samples")}
    assert {"worker", "worker-child", "broker", "driver", "sampler"} <= roles
    hosts = query(
        db,
        "SELECT host, cores, memory_bytes, python, celery, broker_version, clock_offset_s, "
        "clock_uncertainty_s FROM hosts",
    )
    assert len(hosts) == 4
    for host, cores, mem, py, celery, broker_version, offset, uncertainty in hosts:
        assert host == "localhost" and cores >= 1 and mem > 0 and py and celery
        assert abs(offset) <= uncertainty + 0.002 and uncertainty < 0.05  # measured, and one clock here
        assert broker_version.startswith(("redis", "RabbitMQ"))


def test_sql_from_the_issue_just_works(sweep):
    _, db, _ = sweep
    proc = cmx(
        "sql",
        "SELECT pool, concurrency, median(value) FROM metrics JOIN runs USING (run_id) "
        "WHERE name='consume_rate' GROUP BY ALL ORDER BY ALL",
        "--db",
        str(db),
        "--format",
        "json",
    )
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert [(r["pool"], r["concurrency"]) for r in rows] == [("prefork", 2), ("threads", 2)]
    assert all(r["median(\"value\")"] > 0 for r in rows)


def test_summary_table_and_status(sweep):
    _, db, proc = sweep
    table = proc.stdout.split("small-sweep (results in", 1)[1]
    assert "consume" in table and "rabbitmq" in table and table.count("1/1") == 4
    status = cmx("status", "--db", str(db))
    assert status.returncode == 0
    assert "small-sweep" in status.stdout and "4" in status.stdout


def test_no_process_is_left_behind(sweep):
    _, db, _ = sweep
    assert run_processes(db) == []


def test_worker_flags_reach_every_worker(sweep):
    _, db, _ = sweep
    run_ids = [r for (r,) in query(db, 'SELECT run_id FROM runs WHERE "worker.events" AND "worker.mingle"')]
    assert len(run_ids) == 4
    for run_id in run_ids:
        cmd = (db.parent / "artifacts" / run_id / "localhost" / "worker.cmd").read_text().split()
        assert "-E" in cmd and "--without-mingle" not in cmd
        assert "--without-gossip" in cmd and "--without-heartbeat" in cmd
