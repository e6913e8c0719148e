"""Every broker and backend value, on the real services: redis, rabbitmq, rabbitmq-quorum ×
none, redis, rpc, postgres (the workers' connections to the backends that keep results counted,
and those results gone once the run ended: a run leaves nothing behind, the rpc backend's reply
queue included)."""

from __future__ import annotations

import re
import time

import psycopg2
import pytest
import redis
from kombu import Connection

from tests.conftest import cmx, query, rabbit_api, write

pytestmark = pytest.mark.integration

TASKS = 100


def test_each_broker_and_backend_carries_a_sweep(tmp_path):
    exp = write(
        tmp_path / "bb.yaml",
        f"""
        name: brokers-backends
        workload: {{name: throughput, params: {{tasks: {TASKS}, mode: backlog}}}}
        fixed: {{pool: threads, concurrency: 2, heartbeat: 30}}
        zip:
          - broker: [redis, rabbitmq, rabbitmq-quorum, rabbitmq]
            backend: [redis, postgres, rpc, none]
        limits: {{run_timeout: 2m}}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    before = _default_vhost_queues()
    proc = cmx("run", str(exp), "--db", str(db))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    rows = query(
        db,
        """
        SELECT broker, backend, status,
               max(value) FILTER (WHERE name = 'tasks_completed'),
               max(value) FILTER (WHERE name = 'heartbeat_negotiated_s')
        FROM runs JOIN metrics USING (run_id) GROUP BY ALL ORDER BY ALL""",
    )
    assert rows == [
        ("rabbitmq", "none", "ok", TASKS, 30.0),
        ("rabbitmq", "postgres", "ok", TASKS, 30.0),
        ("rabbitmq-quorum", "rpc", "ok", TASKS, 30.0),
        ("redis", "redis", "ok", TASKS, None),
    ]
    # The workers wrote their results to the backends that keep them (they held connections to
    # them), and each run removed its results at its end.
    used = query(
        db,
        """SELECT backend, max(value) FROM runs JOIN metrics USING (run_id)
                        WHERE name = 'backend_connections_worker_max' GROUP BY ALL ORDER BY ALL""",
    )
    assert [(b, v >= 1) for b, v in used] == [("postgres", True), ("redis", True)], used
    pg_ids = [
        t
        for (t,) in query(
            db,
            """SELECT t.task_id FROM tasks t JOIN runs r USING (run_id)
                                          WHERE r.backend = 'postgres'""",
        )
    ]
    assert len(set(pg_ids)) == TASKS
    with psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres") as con, con.cursor() as cur:
        cur.execute("SELECT count(*) FROM celery_taskmeta WHERE task_id = ANY(%s)", [pg_ids])
        assert cur.fetchone()[0] == 0
    (run_id,) = query(db, "SELECT run_id FROM runs WHERE backend = 'redis'")[0]
    client = redis.Redis.from_url("redis://127.0.0.1:6379/1")
    assert list(client.scan_iter(match=f"cmx.{run_id}*")) == []

    # The rpc backend's reply queue: Celery names it after the sending thread (a bare uuid) and
    # keeps it a day when no one reads it; cmx names it after the run and removes it at the end.
    # Each host wrote down the reply queues its threads named; none is on the broker now (a passive
    # declare is the broker's own answer), and no queue named by a bare uuid appeared (the API's
    # list lags the broker by its stats interval, 5 s).
    (rpc_run,) = query(db, "SELECT run_id FROM runs WHERE backend = 'rpc'")[0]
    replies = {n for f in (tmp_path / "results").rglob(f"{rpc_run}/*/rpc_replies.txt") for n in f.read_text().split()}
    assert replies and all(n.startswith(f"cmx.{rpc_run}.") for n in replies), replies
    with Connection("amqp://guest:guest@127.0.0.1:5672//") as conn:
        for name in replies:
            with pytest.raises(conn.channel_errors):
                conn.channel().queue_declare(name, passive=True)
    time.sleep(6)
    left = _default_vhost_queues() - before
    assert not [q for q in left if UUID.fullmatch(q) or rpc_run in q], left


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _default_vhost_queues() -> set[str]:
    return {q["name"] for q in rabbit_api("GET", "queues/%2F?columns=name")}
