"""The depth of the run's queue, as the driver samples it, on the real brokers: an empty queue is
a depth of 0 on every broker. Redis keeps no empty list, so kombu answers NOT_FOUND of an empty
Redis queue; those samples were dropped, and a Redis run whose workers kept up stored no depth at
all (``queue_depth_max`` NULL, "not sampled") where the queue had in truth been empty."""

from __future__ import annotations

import time
import uuid

import pytest
from kombu import Connection, Queue

from cmx.workloads.servers import registry as servers
from tests.conftest import query, sweep

pytestmark = pytest.mark.integration

URLS = {"redis": "redis://127.0.0.1:6379/0", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_an_empty_queue_is_a_depth_of_zero_and_a_message_is_one(broker):
    name = f"cmx.depth.{uuid.uuid4().hex[:8]}"
    with Connection(URLS[broker]) as conn:
        queue = Queue(name, channel=conn.default_channel)
        queue.declare()
        try:
            server = servers.get(broker)
            assert server.queue_depth(conn, name) == 0
            conn.Producer().publish({"n": 1}, routing_key=name)
            deadline = time.monotonic() + 5  # RabbitMQ counts a published message a moment later
            while server.queue_depth(conn, name) == 0 and time.monotonic() < deadline:
                time.sleep(0.02)
            assert server.queue_depth(conn, name) == 1
        finally:
            queue.purge()
            queue.delete()


def test_a_queue_rabbitmq_does_not_have_is_no_depth():
    with Connection(URLS["rabbitmq"]) as conn, pytest.raises(Exception, match="NOT_FOUND"):
        servers.get("rabbitmq").queue_depth(conn, f"cmx.depth.{uuid.uuid4().hex[:8]}")


def test_a_redis_run_whose_workers_keep_up_stores_its_empty_queue(tmp_path):
    db = sweep(
        tmp_path,
        "depth-redis-stream",
        """
        workload: {name: throughput, params: {tasks: 40, mode: stream, rate: 20}}
        fixed: {broker: redis, backend: none, pool: threads, concurrency: 2}
        limits: {run_timeout: 2m}
    """,
    )
    # The driver samples the depth while it waits for the last tasks, after its 2 s of publishing at
    # 20 a second, which two threads keep up with: the queue is empty or nearly.
    ((samples, deepest),) = query(db, "SELECT count(*), max(depth) FROM queue_depth")
    assert samples >= 1 and deepest <= 5, (samples, deepest)
    ((depth_max,),) = query(db, "SELECT value FROM metrics WHERE name = 'queue_depth_max'")
    assert depth_max == deepest
