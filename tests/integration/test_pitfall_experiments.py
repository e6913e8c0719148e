"""Celery's pitfalls (experiments/pitfalls/): each one's effect, at small size, through the real
`cmx run` and read from DuckDB. Small versions of the shipped experiments (same workload and
dimensions, fewer and shorter tasks); every test also checks that the runs really ran (tasks all
completed, none lost) so a broken measurement fails instead of passing. Margins are generous: the
machine may be loaded.
"""

from __future__ import annotations

import json
import os
import re

import pytest
import redis

from tests.conftest import REPO, metrics_by, query, sweep

pytestmark = pytest.mark.integration


def test_prefetch_makes_short_tasks_wait_behind_long_ones(tmp_path):
    db = sweep(
        tmp_path,
        "pitfall-prefetch",
        f"""
        inventory: {REPO / 'inventory/local-two-workers.yml'}
        workload:
          name: mixed
          params: {{tasks: 100, long_every: 10, long_s: 1.0, short_s: 0.01, rate: 10}}
        fixed: {{broker: rabbitmq, backend: none, pool: prefork, concurrency: 1, machines: 2}}
        zip:
          - {{prefetch_multiplier: [16, 1], celery.task_acks_late: [false, true]}}
        limits: {{run_timeout: 2m}}
    """,
    )
    m = metrics_by(db, "prefetch_multiplier")
    greedy, cured = m[16], m[1]
    for cell in (greedy, cured):
        assert cell["tasks_completed"] == 100 and cell["tasks_lost"] == 0
    # prefetch 16: a busy worker sits on short tasks for up to a long task (1 s), while the other idles
    assert greedy["short_delayed_share"] >= 0.1, greedy
    assert greedy["short_latency_p99_s"] > 0.5
    # prefetch 1 + acks_late: a busy worker reserves nothing, the other takes the short tasks
    assert cured["short_delayed_share"] < greedy["short_delayed_share"] / 3, (cured, greedy)
    assert cured["short_latency_p99_s"] < greedy["short_latency_p99_s"] / 2


def test_max_tasks_per_child_of_1_collapses_throughput(tmp_path):
    db = sweep(
        tmp_path,
        "pitfall-mtpc",
        """
        workload:
          name: throughput
          params: {tasks: 60, payload_bytes: 64, mode: backlog}
        fixed: {broker: redis, backend: none, pool: prefork, concurrency: 2, prefetch_multiplier: 4}
        matrix:
          celery.worker_max_tasks_per_child: [null, 1]
        limits: {run_timeout: 3m}
    """,
    )
    # null and 1 in one column: stored as text ('1'), null as NULL
    m = {None if k is None else int(k): v for k, v in metrics_by(db, '"celery.worker_max_tasks_per_child"').items()}
    never, each = m[None], m[1]
    for cell in (never, each):
        assert cell["tasks_completed"] == 60 and cell["tasks_lost"] == 0
    assert each["consume_rate"] < never["consume_rate"] / 3, (each["consume_rate"], never["consume_rate"])


def test_countdown_beyond_visibility_timeout_runs_tasks_twice(tmp_path):
    # The restore sweep every second (kombu's default is ~100 s) and keys of this test's own, so
    # a 2 s visibility_timeout restores only its messages, never another consumer's: not even those
    # of a full-size visibility-timeout.yaml sweeping beside it (its 3600 s cell once counted 600
    # duplicates when this test shared its keys).
    keys = f"cmx_pitfall_test_{os.getpid()}"
    options = (
        f"unacked_restore_interval: 1, unacked_restore_throttle: 1, unacked_key: {keys}, "
        f"unacked_index_key: {keys}_index, unacked_mutex_key: {keys}_mutex"
    )
    db = sweep(
        tmp_path,
        "pitfall-visibility",
        f"""
        workload:
          name: mixed
          params: {{tasks: 20, long_every: 0, short_s: 0.01, rate: 20, countdown_s: 8, settle_s: 3}}
        fixed: {{broker: redis, backend: none, pool: prefork, concurrency: 2}}
        matrix:
          celery.broker_transport_options:
            - {{visibility_timeout: 2, {options}}}
            - {{visibility_timeout: 3600, {options}}}
        limits: {{run_timeout: 2m}}
    """,
    )
    redis.Redis.from_url("redis://127.0.0.1:6379/0").delete(keys, f"{keys}_index", f"{keys}_mutex")
    m = {
        json.loads(key)["visibility_timeout"]: cell
        for key, cell in metrics_by(db, '"celery.broker_transport_options"').items()
    }  # stored as JSON text
    short, default = m[2], m[3600]
    for cell in (short, default):
        assert cell["tasks_completed"] == 20 and cell["tasks_lost"] == 0
    assert short["tasks_duplicated"] >= 10, short  # (nearly) every task ran more than once
    assert default["tasks_duplicated"] == 0, default


def test_chord_time_to_callback_grows_with_header(tmp_path):
    db = sweep(
        tmp_path,
        "pitfall-chord",
        """
        workload:
          name: chord_size
          params: {chords: 2}
        fixed: {broker: redis, backend: redis, pool: prefork, concurrency: 2, prefetch_multiplier: 4}
        matrix:
          params.header: [10, 300]
        limits: {run_timeout: 3m}
    """,
    )
    m = metrics_by(db, '"params.header"')
    small, big = m[10], m[300]
    assert small["tasks_completed"] == 2 * 11 and big["tasks_completed"] == 2 * 301
    assert big["chord_callback_s"] > 3 * small["chord_callback_s"], (big, small)
    # server-wide, so only a lower bound holds: at least one backend command per header task
    assert big["backend_commands_approx"] >= 300 and small["backend_commands_approx"] >= 10


def test_blocking_task_under_gevent_with_heartbeats_runs_a_task_twice(tmp_path):
    # Small gevent-heartbeat.yaml: heartbeat 6 s (not 4 s or less: that starves gevent's loop, see
    # the experiment's header) and one task blocking the loop for 20 s (after a 2 s yield) among
    # short ones: RabbitMQ closes a connection silent for 2-3 heartbeats, so > 3 x 6 s is sure.
    # Two workers of one slot, prefetch 1. Prefork at the same heartbeat is the control.
    db = sweep(
        tmp_path,
        "pitfall-heartbeat",
        f"""
        inventory: {REPO / 'inventory/local-two-workers.yml'}
        workload:
          name: mixed
          params: {{tasks: 20, long_every: 20, long_s: 22, short_s: 0.01, rate: 10, blocking: true, settle_s: 3}}
        fixed: {{broker: rabbitmq, backend: none, concurrency: 1, prefetch_multiplier: 1, machines: 2}}
        zip:
          - {{pool: [gevent, gevent, prefork], heartbeat: [6, 0, 6]}}
        limits: {{run_timeout: 3m}}
    """,
    )
    m = metrics_by(db, "pool, heartbeat")
    dropped, off, prefork = m[("gevent", 6.0)], m[("gevent", 0.0)], m[("prefork", 6.0)]
    for (pool, beat), cell in m.items():
        assert cell["tasks_completed"] == 20 and cell["tasks_lost"] == 0, (pool, beat, cell)
        assert cell["heartbeat_negotiated_s"] == beat, (pool, beat, cell)  # what the connection really got
    # The blocked worker's connection was dropped: the task it had prefetched was redelivered to the
    # other worker, and it still ran its own copy afterwards; it could not acknowledge it.
    assert dropped["tasks_redelivered"] >= 1 and dropped["tasks_duplicated"] >= 1, dropped
    (run_id,) = query(db, "SELECT run_id FROM runs WHERE pool = 'gevent' AND heartbeat = 6")[0]
    logs = " ".join(
        p.read_text(errors="replace") for p in (tmp_path / "results" / "artifacts" / run_id).glob("*/worker.log")
    )
    assert re.search(r"Couldn't ack|ConnectionResetError|BrokenPipeError|Connection to broker lost", logs), logs[-2000:]
    # Heartbeat off, or the connection in prefork's parent: nothing runs twice.
    for cell in (off, prefork):
        assert cell["tasks_redelivered"] == 0 and cell["tasks_duplicated"] == 0, cell
