"""The fast publisher puts on the broker what ``apply_async`` puts there, and workers run it.

Real Redis and RabbitMQ: one message by ``apply_async`` and a few by workloads/drive/publisher.py go
to the same queue; read back raw, they differ only in the per-task values (ids, delivery tag,
stamps). Then sweeps with each publisher show a real worker executing every fast message with
its id and stamp.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest

from tests.conftest import metrics_by, query, sweep

pytestmark = pytest.mark.integration

URLS = {"redis": "redis://127.0.0.1:6379/0", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}
PER_TASK = {"id", "root_id", "cmx_sent_at", "correlation_id", "delivery_tag"}


def _app(tmp_path, monkeypatch, broker: str):
    monkeypatch.setenv("CMX_BROKER_URL", URLS[broker])
    from cmx.workloads.app.factory import create_app
    from cmx.workloads.runtime.spec import RunSpec

    spec = RunSpec(
        run_id="pubtest" + uuid.uuid4().hex[:8],
        experiment="t",
        cell_id="c",
        repeat=1,
        workload="throughput",
        broker=broker,
    )
    app = create_app(spec, tmp_path, "h")
    from kombu import Queue

    with app.connection_for_write() as conn:
        Queue(spec.queue).bind(conn.default_channel).declare()
    return app, spec


def _strip(d: dict) -> dict:
    return {k: ("<per-task>" if k in PER_TASK else _strip(v) if isinstance(v, dict) else v) for k, v in d.items()}


def test_redis_messages_equal_apply_async_but_for_ids_and_stamps(tmp_path, monkeypatch):
    import redis

    from cmx.workloads.drive import publisher

    app, spec = _app(tmp_path, monkeypatch, "redis")
    client = redis.Redis.from_url(URLS["redis"])
    try:
        app.tasks["cmx.throughput.noop"].apply_async(("x" * 64,))
        publisher.publish_backlog(app, "cmx.throughput.noop", ("x" * 64,), 3, "h")
        raw = [client.rpop(spec.queue) for _ in range(4)]  # oldest first
        assert client.llen(spec.queue) == 0
    finally:
        with app.connection_for_write() as conn:
            conn.default_channel.queue_delete(spec.queue)
        # kombu keeps the exchange's (named as the queue) bindings in keys of its own
        client.delete(*(k for k in client.scan_iter(f"_kombu.binding*.{spec.queue}")))
    celery_msg, *fast = [json.loads(r) for r in raw]
    for msg in fast:
        assert list(msg) == list(celery_msg)  # same keys, same order
        assert list(msg["headers"]) == list(celery_msg["headers"])
        assert _strip(msg) == _strip(celery_msg)
        assert msg["body"] == celery_msg["body"]  # args and kwargs, byte for byte
        assert msg["headers"]["id"] == msg["headers"]["root_id"] == msg["properties"]["correlation_id"]
    ids = [m["headers"]["id"] for m in fast]
    assert len(set(ids)) == 3 and celery_msg["headers"]["id"] not in ids
    assert len({m["properties"]["delivery_tag"] for m in fast}) == 3
    assert all(abs(m["headers"]["cmx_sent_at"] - time.time()) < 60 for m in fast)


def test_rabbitmq_messages_equal_apply_async_but_for_ids_and_stamps(tmp_path, monkeypatch):
    from cmx.workloads.drive import publisher

    app, spec = _app(tmp_path, monkeypatch, "rabbitmq")
    got = []
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        try:
            app.tasks["cmx.throughput.noop"].apply_async(("x" * 64,))
            publisher.publish_backlog(app, "cmx.throughput.noop", ("x" * 64,), 3, "h")
            deadline = time.monotonic() + 10
            while len(got) < 4 and time.monotonic() < deadline:
                m = channel.basic_get(spec.queue, no_ack=True)
                if m is not None:
                    got.append(m)
        finally:
            channel.queue_delete(spec.queue)
    assert len(got) == 4
    celery_msg, *fast = got
    for m in fast:
        assert m.body == celery_msg.body
        assert list(m.headers) == list(celery_msg.headers)
        assert _strip(m.headers) == _strip(celery_msg.headers)
        props = {k: v for k, v in m.properties.items() if k != "application_headers"}
        want = {k: v for k, v in celery_msg.properties.items() if k != "application_headers"}
        assert _strip(props) == _strip(want)
        assert m.headers["id"] == m.headers["root_id"] == m.properties["correlation_id"]
    assert len({m.headers["id"] for m in fast}) == 3


@pytest.mark.parametrize("broker", ["redis", "rabbitmq"])
def test_workers_run_every_fast_message_with_its_id_and_stamp(tmp_path, broker):
    db = sweep(
        tmp_path,
        f"fastpub-{broker}",
        f"""
        workload: {{name: throughput, params: {{tasks: 400, mode: backlog}}}}
        fixed: {{broker: {broker}, pool: threads, concurrency: 2}}
        matrix: {{params.publisher: [fast, celery]}}
        limits: {{run_timeout: 2m}}
    """,
    )
    m = metrics_by(db, '"params.publisher"')
    for publisher in ("fast", "celery"):
        assert m[publisher]["tasks_published"] == 400
        assert m[publisher]["tasks_completed"] == 400
        assert m[publisher]["tasks_lost"] == 0
        assert m[publisher]["tasks_duplicated"] == 0
    # Every execution carries the publish stamp its message had (the header reached the worker).
    rows = query(
        db,
        """SELECT "params.publisher", count(*), count(t.sent_at), count(DISTINCT t.task_id)
                        FROM tasks t JOIN runs USING (run_id) WHERE t.state = 'SUCCESS' GROUP BY ALL ORDER BY ALL""",
    )
    assert rows == [("celery", 400, 400, 400), ("fast", 400, 400, 400)]
