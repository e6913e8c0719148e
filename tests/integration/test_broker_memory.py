"""The broker's memory by its own accounting, through a whole sweep (cmx run, ingest, report): a run
that fills its queue with large messages has a peak above the broker's idle figure (its first
reading, as the run began), by about what it queued; the report shows it beside the headline.
A cluster's figure (the sum over its nodes) is tests/integration/test_rabbitmq_cluster.py's."""

from __future__ import annotations

import pytest

from tests.conftest import cmx, query, sweep

pytestmark = pytest.mark.integration

TASKS, PAYLOAD = 100, 512 * 1024  # 50 MiB queued at once: the backlog is published before any is consumed


def test_a_backlog_of_large_messages_raises_the_redis_brokers_memory_by_their_size(tmp_path):
    db = sweep(
        tmp_path,
        "broker-memory",
        f"""
        workload: {{name: throughput, params: {{tasks: {TASKS}, payload_bytes: {PAYLOAD}, mode: backlog}}}}
        fixed: {{broker: redis, backend: none, pool: solo, concurrency: 1}}
        limits: {{run_timeout: 2m}}
    """,
    )
    m = dict(query(db, "SELECT name, value FROM metrics"))
    ((first, idle, ticks),) = query(
        db,
        "SELECT arg_min(used_bytes, ts), min(used_bytes), count(*) "
        "FROM server_memory WHERE role = 'broker' AND kind = 'redis'",
    )
    assert ticks >= 4, ticks
    peak = m["broker_memory_peak_bytes"]
    assert peak == query(db, "SELECT max(used_bytes) FROM server_memory WHERE role = 'broker'")[0][0]
    # Each message carries its payload base64-encoded in kombu's JSON: more than its size in Redis.
    assert peak - idle >= 0.6 * TASKS * PAYLOAD, (idle, peak)
    assert m["broker_memory_growth_bytes"] == peak - first
    out = tmp_path / "report"
    proc = cmx("report", "broker-memory", "--db", str(db), "--out", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "broker memory" in (out / "index.html").read_text()
