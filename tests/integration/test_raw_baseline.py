"""The raw baseline's publisher (workloads/catalog/throughput_raw.py) is timed to the server's acknowledgement,
the last batch included, on the real Redis and RabbitMQ: what the broker holds when publishing
returns is everything, and the stamps end when it does."""

from __future__ import annotations

import time
import uuid

import pytest
import redis

from cmx.workloads.servers import registry as servers
from cmx.workloads.catalog.throughput_raw import drive_raw, publish, schedule_for
from cmx.workloads.catalog.throughput import ThroughputParams

pytestmark = pytest.mark.integration

TASKS, BATCH = 1500, 500
PAYLOAD = 32 * 1024  # big messages: a batch's round trip takes long enough to see where the stamps end


class PublishOnly:
    """The two things of a DriveContext the raw publisher uses."""

    host = "h1"

    def check_deadline(self, what: str) -> None:
        pass


def _publish(broker, params):
    pubs: list[tuple] = []
    broker.reset()
    began = time.time()
    publish(PublishOnly(), params, schedule_for(params), pubs, broker)
    returned = time.time()
    return began, returned, sorted(p[5] for p in pubs)


def _assert_timed_to_acknowledgement(began, returned, sent, batch):
    assert len(sent) == TASKS
    last_batch = sent[-1] - sent[-batch - 1]  # the last batch's own round trip
    assert last_batch > 0
    # Stamped when the last batch's answer arrived, not when its messages entered a local buffer
    # (that would leave the whole last round trip after the last stamp).
    assert returned - sent[-1] < 0.25 * last_batch, (returned - sent[-1], last_batch)
    # The first batch's round trip counts too: the rate spans (almost) the whole publish.
    rate = TASKS / (sent[-1] - sent[0])
    assert rate <= TASKS / (returned - began) * 1.1, (rate, TASKS / (returned - began))


@pytest.fixture
def queue():
    return f"cmx.test-raw-{uuid.uuid4().hex[:8]}.raw"


def test_redis_batches_are_stamped_at_the_servers_reply(queue):
    params = ThroughputParams(tasks=TASKS, payload_bytes=PAYLOAD, via="raw", raw_batch=BATCH)
    broker = servers.get("redis").raw_client(
        "redis://127.0.0.1:6379/0", queue, "cmx.test-raw.driver.broker", {}, False, 1
    )
    try:
        began, returned, sent = _publish(broker, params)
        assert redis.Redis(host="127.0.0.1").llen(queue) == TASKS  # all there when publish returned
    finally:
        broker.close()
    _assert_timed_to_acknowledgement(began, returned, sent, BATCH)


def test_redis_one_call_per_message(queue):
    params = ThroughputParams(tasks=300, via="raw", raw_batch=1)
    broker = servers.get("redis").raw_client(
        "redis://127.0.0.1:6379/0", queue, "cmx.test-raw.driver.broker", {}, False, 1
    )
    try:
        pubs: list[tuple] = []
        broker.reset()
        publish(PublishOnly(), params, schedule_for(params), pubs, broker)
        assert redis.Redis(host="127.0.0.1").llen(queue) == 300
    finally:
        broker.close()
    sent = [p[5] for p in pubs]
    assert sent == sorted(sent) and len(set(sent)) == 300  # one stamp per acknowledged call


@pytest.mark.parametrize("batch", [BATCH, 1])
def test_rabbitmq_publishes_are_stamped_at_the_brokers_answer(queue, batch):
    params = ThroughputParams(tasks=TASKS, payload_bytes=PAYLOAD, via="raw", raw_batch=batch)
    broker = servers.get("rabbitmq").raw_client(
        "amqp://guest:guest@127.0.0.1:5672//", queue, "cmx.test-raw.driver.broker", {}, False, 1
    )
    try:
        began, returned, sent = _publish(broker, params)
        # A passive declare on a fresh channel: what the broker holds now.
        held = broker.conn.channel().queue_declare(queue, passive=True).method.message_count
    finally:
        broker.close()
    if batch > 1:
        _assert_timed_to_acknowledgement(began, returned, sent, batch)
    else:
        assert len(set(sent)) == TASKS and returned - sent[-1] < 0.05
    assert held == TASKS


class UnknownServer:
    """A DriveContext whose run names a broker kind on a server with no raw client."""

    host = "h1"
    notes: list = []

    class spec:
        run_id, raw_queue, concurrency, prefetch_multiplier = "test-raw", "q", 1, 1
        broker = "postgres-broker"

        @staticmethod
        def queue_arguments():
            return {}

    def wait_for_workers(self) -> None:
        pass


def test_a_server_without_a_raw_client_is_an_error_not_rabbitmq(monkeypatch):
    """Before, any broker not on Redis went down the RabbitMQ branch."""
    from cmx.workloads.vocab import kinds

    monkeypatch.setattr(
        kinds, "BROKERS", {**kinds.BROKERS, "postgres-broker": kinds.Kind("postgres-broker", "postgres")}
    )
    monkeypatch.setenv("CMX_BROKER_URL", "postgresql://127.0.0.1:5432/postgres")
    with pytest.raises(NotImplementedError, match="PostgreSQL has no raw client"):
        drive_raw(UnknownServer(), ThroughputParams(tasks=1, via="raw"))
    with pytest.raises(ValueError, match="unknown server 'nosuch'"):
        servers.get("nosuch")
