"""Fair measures on real services (issue 10): stream latency from the intended send time equals
what the task rows say; connection counts are the run's own clients only, whoever else is
connected to the same Redis."""

from __future__ import annotations

import psycopg2
import pytest
import redis

from tests.conftest import metrics_by, query, sweep

pytestmark = pytest.mark.integration

TASKS = 300
EXPERIMENT = (
    """
    workload:
      name: throughput
      params: {tasks: %d, mode: stream, rate: 400}
    fixed: {broker: redis, backend: redis, pool: threads, concurrency: 2}
    limits: {run_timeout: 2m}
"""
    % TASKS
)


@pytest.fixture(scope="module")
def quiet(tmp_path_factory):
    """One stream run with nobody else of ours on the server."""
    return sweep(tmp_path_factory.mktemp("quiet"), "fair-quiet", EXPERIMENT)


@pytest.fixture(scope="module")
def crowded(tmp_path_factory):
    """The same run while idle clients sit on the same Redis: unnamed ones, on the broker's db and
    the backend's, and ones named as another run's workers and driver."""
    names = [None] * 6 + ["cmx.someone-else.worker.broker", "cmx.someone-else.driver.backend", "celery"]
    idle = [redis.Redis(host="127.0.0.1", port=6379, db=i % 2, client_name=n) for i, n in enumerate(names)]
    try:
        for client in idle:
            client.ping()
        return sweep(tmp_path_factory.mktemp("crowded"), "fair-crowded", EXPERIMENT)
    finally:
        for client in idle:
            client.close()


def test_stream_latency_counts_from_the_intended_send_as_the_task_rows_say(quiet):
    (run_id,) = query(quiet, "SELECT run_id FROM runs")[0]
    want = query(
        quiet,
        """
        SELECT count(*), count(intended_at),
               quantile_cont(finished_at - intended_at, 0.50), quantile_cont(finished_at - intended_at, 0.99),
               quantile_cont(started_at - intended_at, 0.95), quantile_cont(finished_at - started_at, 0.50),
               quantile_cont(finished_at - sent_at, 0.99)
        FROM tasks WHERE run_id = ? AND state <> 'LOST'""",
        [run_id],
    )[0]
    n, with_intended, p50, p99, wait95, service50, p99_from_send = want
    assert n == with_intended == TASKS  # the driver stamped when it meant to send, every time
    m = metrics_by(quiet, "run_id")[run_id]
    assert m["latency_p50_s"] == pytest.approx(p50, rel=1e-9)
    assert m["latency_p99_s"] == pytest.approx(p99, rel=1e-9)
    assert m["queue_wait_p95_s"] == pytest.approx(wait95, rel=1e-9)
    assert m["service_time_p50_s"] == pytest.approx(service50, rel=1e-9)
    assert m["latency_p99_s"] >= p99_from_send  # the send never precedes its intended time
    assert m["clock_suspect"] == 0 and m["clock_uncorrected_tasks"] == 0  # one host: nothing to correct
    # The latency chart's view agrees with the metric.
    (view_p99,) = query(quiet, "SELECT p99_s FROM latency_percentiles WHERE run_id = ?", [run_id])[0]
    assert view_p99 == pytest.approx(p99, rel=1e-9)


def _connections(db):
    (run_id,) = query(db, "SELECT run_id FROM runs")[0]
    return {k: v for k, v in metrics_by(db, "run_id")[run_id].items() if "_connections_" in k}


def test_idle_clients_of_the_same_redis_do_not_change_the_runs_connection_counts(quiet, crowded):
    alone, beside = _connections(quiet), _connections(crowded)
    for side in (alone, beside):
        # The run's own clients, by role: its worker and its driver reach both broker and backend.
        assert side["broker_connections_worker_max"] >= 1, side
        assert side["backend_connections_worker_max"] >= 1, side
        assert side["broker_connections_max"] <= (
            side["broker_connections_worker_max"] + side["broker_connections_driver_max"]
        ), side
    # Nine idle clients joined the server: a server-wide count grows by nine. The run's own count
    # varies by a few from run to run (the driver's short-lived control connections), no more.
    # The driver's connections are short-lived (publish, then control polls): a probe tick may miss
    # them in one run, not in both.
    assert max(alone["broker_connections_driver_max"], beside["broker_connections_driver_max"]) >= 1
    assert set(alone) == set(beside)

    # The driver's own count swings from run to run (its publishing connections come and go
    # between probe ticks), so each total is compared without it: nine idle clients would add nine.
    def steady(side, name):
        if name.endswith("_connections_max") and name.count("_") == 2:  # broker/backend totals
            return side[name] - side.get(name.replace("_max", "_driver_max"), 0)
        return side[name]

    for name in alone:
        if "_driver_" in name:
            continue
        assert abs(steady(beside, name) - steady(alone, name)) <= 3, (name, alone, beside)


@pytest.fixture(scope="module")
def prefork_sleep(tmp_path_factory):
    """Four tasks sleeping at once in a prefork worker of four children (PSS read every ~1 s)."""
    return sweep(
        tmp_path_factory.mktemp("prefork"),
        "fair-prefork",
        """
        workload:
          name: concurrent_sleep
          params: {tasks: 4, sleep_s: 3}
        fixed: {broker: redis, pool: prefork, concurrency: 4, prefetch_multiplier: 1}
        limits: {run_timeout: 2m}
    """,
    )


def test_prefork_memory_per_slot_and_per_task_are_a_childs_worth(prefork_sleep):
    (run_id,) = query(prefork_sleep, "SELECT run_id FROM runs")[0]
    m = metrics_by(prefork_sleep, "run_id")[run_id]
    # What one child holds, read from the sampler's own rows: each child's highest PSS.
    per_child = [
        v
        for (v,) in query(
            prefork_sleep,
            """
        SELECT max(pss_bytes) FROM samples WHERE run_id = ? AND role = 'worker-child' GROUP BY pid""",
            [run_id],
        )
    ]
    assert len(per_child) == 4 and all(per_child), per_child
    child = sorted(per_child)[len(per_child) // 2]
    assert child / 2 <= m["peak_pss_per_slot_bytes"] <= child * 2, (m["peak_pss_per_slot_bytes"], per_child)
    assert m["peak_rss_per_slot_bytes"] >= m["peak_pss_per_slot_bytes"]  # RSS counts shared pages in full
    assert m["peak_pss_bytes"] < m["peak_rss_bytes"]  # and so over-counts prefork
    # The concurrent-sleep measure: a task costs a child, not the few KiB an idle baseline that
    # already holds every pre-forked child would leave.
    all_in_flight, pss_per_task = query(
        prefork_sleep,
        """
        SELECT all_in_flight, pss_per_task_bytes FROM memory_per_task WHERE run_id = ?""",
        [run_id],
    )[0]
    assert all_in_flight
    assert child / 2 <= pss_per_task <= child * 2, (pss_per_task, per_child)


def test_sql_fanout_workers_connect_to_the_database_before_the_first_timed_request(tmp_path):
    """Warm-up rule: the Celery workers' database connections are open before the clock starts, as
    the direct and union clients' are (they used to connect inside the first timed requests)."""
    import csv
    import threading
    import time

    seen: dict[int, float] = {}
    stop = threading.Event()

    def watch():  # the server's own record of when each worker connection began
        conn = psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            while not stop.is_set():
                cur.execute(
                    "SELECT pid, extract(epoch FROM backend_start) FROM pg_stat_activity "
                    "WHERE application_name = 'cmx-sql-fanout-worker'"
                )
                seen.update({pid: float(t) for pid, t in cur.fetchall()})
                time.sleep(0.1)
        conn.close()

    watcher = threading.Thread(target=watch, daemon=True)
    began = time.time()
    watcher.start()
    try:
        db = sweep(
            tmp_path,
            "fair-warmup",
            """
            workload:
              name: sql_fanout
              params: {rows: 20000, queries: 8, requests: 3, mode: celery}
            fixed: {broker: redis, backend: redis, pool: threads, concurrency: 4}
            limits: {run_timeout: 1m}
        """,
        )
    finally:
        stop.set()
        watcher.join(5)
    (run_id,) = query(db, "SELECT run_id FROM runs")[0]
    with (db.parent / "artifacts" / run_id / "localhost" / "requests.csv").open() as f:
        first_timed = min(float(r["started_at"]) for r in csv.DictReader(f))
    ours = {pid: t for pid, t in seen.items() if t >= began}
    assert ours, "no worker connection seen"
    assert max(ours.values()) < first_timed, (sorted(ours.values()), first_timed)


def test_a_green_pools_backlog_starts_when_released_and_the_wake_is_not_counted(tmp_path):
    """gevent and eventlet workers take ``add_consumer`` on a connection of their own and ran it
    only when their consumer's wait on the hold queue timed out (2 s): a backlog's queue wait held
    ~1.9 s of harness, against ~0.02 s for threads. The driver's wake message (a harness task to
    the hold queue) ends that wait; it is neither stamped nor counted."""
    tasks = 200
    db = sweep(
        tmp_path,
        "green-release",
        """
        workload:
          name: throughput
          params: {tasks: %d, mode: backlog}
        fixed: {backend: none, concurrency: 2}
        matrix: {pool: [gevent, eventlet, threads], broker: [redis, rabbitmq]}
        limits: {run_timeout: 2m}
    """
        % tasks,
    )
    rows = query(
        db,
        """
        SELECT r.pool, r.broker, count(*) FILTER (WHERE t.name = 'cmx.wake'),
               count(*) FILTER (WHERE t.state = 'SUCCESS'), min(t.started_at) - max(t.sent_at)
        FROM runs r JOIN tasks t USING (run_id) GROUP BY ALL ORDER BY ALL""",
    )
    assert len(rows) == 6
    for pool, broker, wakes, done, first_start_after_last_send in rows:
        assert wakes == 0 and done == tasks, (pool, broker, wakes, done)
        # Released at once: well under the 2 s poll the green pools waited out before.
        assert first_start_after_last_send < 1.0, (pool, broker, first_start_after_last_send)
    for (pool, broker), m in metrics_by(db, "pool, broker").items():
        assert m["tasks_published"] == m["tasks_completed"] == tasks, (pool, broker)
        assert m["tasks_lost"] == 0 and m["tasks_duplicated"] == 0, (pool, broker)
