"""``throughput`` with ``via: raw``: the same publish and consume with the broker's own client, no Celery.

What reference/throughput-celery-vs-raw.zh.md compared Celery against: redis-py ``LPUSH`` and
``BRPOP``; pika ``basic_publish`` and ``basic_consume`` with manual acks. Every message is stamped
as Celery's are (``pub`` rows when sent, ``exec`` rows when consumed), so ingest computes
publish_rate, consume_rate, tasks_completed and tasks_lost unchanged.

Publishing is timed to the server's acknowledgement, never to a local buffer: messages go in
batches of ``raw_batch`` (a Redis pipeline answered LPUSH by LPUSH; AMQP publishes followed by a
synchronous round trip on the same channel, which the server answers only after every earlier
frame of the channel), and each message of a batch is stamped at its share of the batch's round
trip, the last one exactly when the answer arrived — the last batch included. ``raw_batch: 1`` is
the study's method: one call per message, each acknowledged (``LPUSH``'s reply; AMQP publisher
confirms). Stream mode always sends one message per call. ``publish_batch`` (metric) says which.

For now the raw consumers run in the driver process, on the driver host, as ``concurrency``
threads: running them on the worker hosts needs a worker kind the engine does not have yet.
"""
from __future__ import annotations

import os
import resource
import threading
import time
import uuid
from typing import TYPE_CHECKING, Callable

from cmx.workloads import kinds
from cmx.workloads.clientname import client_name
from cmx.workloads.drive.pacing import Pacer
from cmx.workloads.instrument import recorder

if TYPE_CHECKING:  # pragma: no cover
    from cmx.workloads.drive.context import DriveContext
    from cmx.workloads.catalog.throughput import ThroughputParams

TASK_NAME = "cmx.throughput.raw"
POLL_S = 0.5  # how long a consumer blocks before it looks at the stop flag again


def raw_queue(ctx: "DriveContext") -> str:
    return ctx.spec.raw_queue


def encode(task_id: str, sent_at: float, payload: str) -> bytes:
    return f"{task_id}|{sent_at!r}|{payload}".encode()


def decode(body: bytes) -> tuple[str, float]:
    task_id, sent_at, _ = body.split(b"|", 2)
    return task_id.decode(), float(sent_at)


def noop(payload: bytes) -> None:
    """The task: nothing, as ``cmx.throughput.noop`` does nothing."""
    return None


class Tally:
    """Consumed-message count shared by the consumer threads; sets ``done`` at the target."""

    def __init__(self, target: int):
        self.target, self.count = target, 0
        self.done = threading.Event()
        self._lock = threading.Lock()

    def add(self) -> None:
        with self._lock:
            self.count += 1
            if self.count >= self.target:
                self.done.set()


def schedule_for(params: "ThroughputParams") -> Pacer:
    """When to send message ``i``: now (backlog) or at the stream's rate, with the intended time."""
    return Pacer(params.rate if params.mode == "stream" else None)


def batch_size(params: "ThroughputParams") -> int:
    """Messages per acknowledged round trip: ``raw_batch`` for a backlog, 1 for a stream."""
    return 1 if params.mode == "stream" else params.raw_batch


def stamp_batch(pubs: list, batch: list[tuple[str, float | str]], began: float, acked: float,
                host: str, pid: int) -> None:
    """``pub`` rows of one acknowledged batch: message k of n at began + (acked - began)(k+1)/n, so
    the last is the acknowledgement itself and the rate spans the first batch's round trip too."""
    n = len(batch)
    for k, (task_id, intended) in enumerate(batch):
        pubs.append((task_id, TASK_NAME, host, pid, intended, began + (acked - began) * (k + 1) / n))


def publish_batches(ctx, params, schedule: Pacer, pubs: list, send: Callable[[bytes], object],
                    flush: Callable[[], object] = lambda: None) -> None:
    """Send ``params.tasks`` raw messages paced by ``schedule``, ``batch_size`` at a time: ``send``
    each, then ``flush`` (which returns once the broker acknowledged the batch; not called for
    batches of one, whose ``send`` is acknowledged itself), then their ``pub`` rows."""
    host, pid, payload = ctx.host, os.getpid(), "x" * params.payload_bytes
    size = batch_size(params)
    batch: list[tuple[str, float | str]] = []
    began = 0.0
    for i in range(params.tasks):
        intended = schedule.wait(i)
        if not batch:
            began = time.time()
        task_id = str(uuid.uuid4())
        send(encode(task_id, began, payload))
        batch.append((task_id, intended))
        if size > 1:
            if len(batch) < size and i < params.tasks - 1:
                continue
            flush()
        stamp_batch(pubs, batch, began, time.time(), host, pid)
        batch = []
        if i % 1000 < size:
            ctx.check_deadline("publishing raw messages")


# --------------------------------------------------------------------------------------- redis
class RedisRaw:
    def __init__(self, url: str, queue: str, name: str):
        import redis

        self.queue = queue
        from cmx.workloads.sentinel import is_sentinel, master_client

        # counted as the run's driver; a Sentinel set's master as its sentinels name it
        self.pool = (master_client(url, client_name=name).connection_pool if is_sentinel(url)
                     else redis.ConnectionPool.from_url(url, client_name=name))
        self.client = redis.Redis(connection_pool=self.pool)

    def reset(self) -> None:
        self.client.delete(self.queue)

    def publish(self, ctx, params, schedule: Pacer, pubs: list) -> None:
        if batch_size(params) == 1:  # each LPUSH returns with Redis's reply: acknowledged
            publish_batches(ctx, params, schedule, pubs, lambda body: self.client.lpush(self.queue, body))
            return
        pipe = self.client.pipeline(transaction=False)
        # execute() returns once Redis has answered every LPUSH of the batch
        publish_batches(ctx, params, schedule, pubs, lambda body: pipe.lpush(self.queue, body), pipe.execute)

    def consume(self, host: str, tally: Tally, rows: list) -> None:
        import redis

        client, pid = redis.Redis(connection_pool=self.pool), os.getpid()
        while not tally.done.is_set():
            got = client.brpop([self.queue], timeout=POLL_S)
            if got is None:
                continue
            started = time.time()
            task_id, sent_at = decode(got[1])
            noop(got[1])
            rows.append((task_id, TASK_NAME, host, pid, sent_at, started, time.time(), "SUCCESS", 0))
            tally.add()

    def close(self) -> None:
        self.client.delete(self.queue)
        self.pool.disconnect()


# ------------------------------------------------------------------------------------ rabbitmq
def pika_parameters(url: str, name: str | None = None):
    """pika's parameters for a kombu-style AMQP URL (kombu reads ``//`` as vhost ``/``; pika does not)."""
    import pika
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(url)
    vhost = unquote(parts.path[1:]) if len(parts.path) > 1 else "/"
    return pika.ConnectionParameters(
        host=parts.hostname or "localhost", port=parts.port or 5672, virtual_host=vhost,
        credentials=pika.PlainCredentials(unquote(parts.username or "guest"), unquote(parts.password or "guest")),
        heartbeat=0, client_properties={"connection_name": name} if name else None)


class RabbitRaw:
    def __init__(self, url: str, queue: str, queue_arguments: dict, prefetch: int, name: str, durable: bool = False):
        import pika

        self.pika, self.queue, self.prefetch = pika, queue, prefetch
        self.params = pika_parameters(url, name)  # counted as the run's driver
        # Durable where the kind needs it (quorum queues must be), not because x-expires is there.
        self.args, self.durable = dict(queue_arguments) or None, durable
        self.conn = pika.BlockingConnection(self.params)
        self.channel = self.conn.channel()

    def reset(self) -> None:
        self.channel.queue_delete(self.queue)
        self.channel.queue_declare(self.queue, durable=self.durable, arguments=self.args)

    def publish(self, ctx, params, schedule: Pacer, pubs: list) -> None:
        if batch_size(params) == 1:
            self.channel.confirm_delivery()  # each basic_publish then returns with the broker's ack
        # A synchronous method on the same channel: the broker answers it only after handling
        # every publish the channel sent before it.
        publish_batches(ctx, params, schedule, pubs, lambda body: self.channel.basic_publish("", self.queue, body),
                        lambda: self.channel.queue_declare(self.queue, passive=True))

    def consume(self, host: str, tally: Tally, rows: list) -> None:
        pid = os.getpid()
        conn = self.pika.BlockingConnection(self.params)  # pika connections are not thread-safe
        try:
            channel = conn.channel()
            channel.basic_qos(prefetch_count=self.prefetch)

            def on_message(ch, method, properties, body):
                started = time.time()
                task_id, sent_at = decode(body)
                noop(body)
                finished = time.time()
                ch.basic_ack(method.delivery_tag)
                rows.append((task_id, TASK_NAME, host, pid, sent_at, started, finished, "SUCCESS",
                             int(bool(method.redelivered))))
                tally.add()

            channel.basic_consume(self.queue, on_message)
            while not tally.done.is_set():
                conn.process_data_events(time_limit=POLL_S)
        finally:
            conn.close()

    def close(self) -> None:
        try:
            self.channel.queue_delete(self.queue)
        finally:
            self.conn.close()


# -------------------------------------------------------------------------------------- drive
def drive_raw(ctx: "DriveContext", params: "ThroughputParams") -> None:
    """Publish ``tasks`` raw messages and consume them with ``concurrency`` threads, here."""
    url, queue, consumers = os.environ["CMX_BROKER_URL"], raw_queue(ctx), ctx.spec.concurrency
    ctx.notes.append(f"via raw: {consumers} consumer thread(s) ran in the driver process on {ctx.host}, "
                     "not on the worker hosts; the Celery workers stayed idle")
    ctx.notes.append(f"via raw: published {batch_size(params)} message(s) per acknowledged round trip")
    # Started like every run (same machine load), but never told to consume.
    ctx.wait_for_workers()
    name = client_name(ctx.spec.run_id, "driver", "broker")
    kind = kinds.BROKERS[ctx.spec.broker]
    if kinds.protocol_of("broker", ctx.spec.broker) == "redis":
        broker = RedisRaw(url, queue, name)
    else:
        # The run's queue arguments (x-expires too); durable only where the kind needs it (quorum).
        broker = RabbitRaw(url, queue, queue_arguments=ctx.spec.queue_arguments(), durable=bool(kind.queue_arguments),
                           prefetch=ctx.spec.prefetch_multiplier, name=name)
    pubs: list[tuple] = []
    rows: list[list[tuple]] = [[] for _ in range(consumers)]  # one list per thread: no lock per message
    tally = Tally(params.tasks)
    threads = [threading.Thread(target=broker.consume, args=(ctx.host, tally, rows[i]), daemon=True,
                                name=f"raw-consumer-{i}") for i in range(consumers)]
    try:
        broker.reset()
        schedule = schedule_for(params)
        if schedule.stream:  # consumers run while the stream is published
            for t in threads:
                t.start()
        broker.publish(ctx, params, schedule, pubs)
        if not schedule.stream:  # backlog: everything is queued before anyone consumes
            for t in threads:
                t.start()
        while not tally.done.wait(0.2):
            ctx.check_deadline(f"consuming {params.tasks} raw messages ({tally.count} so far)")
            if not any(t.is_alive() for t in threads):
                raise RuntimeError(f"every raw consumer died after {tally.count} of {params.tasks} messages")
        schedule.note_behind(ctx, params.tasks)
        ctx.metric("publish_behind", schedule.behind, "tasks")
        ctx.metric("publish_batch", batch_size(params), "messages")
    finally:
        tally.done.set()
        for t in threads:
            if t.is_alive():
                t.join(POLL_S * 4)
        rec = recorder()
        for row in pubs:
            rec.add("pub", row)
        for thread_rows in rows:
            for row in thread_rows:
                rec.add("exec", row)
        broker.close()
    # The raw consumers' memory is the driver's, not the (idle) workers' peak_rss_bytes.
    ctx.metric("raw_driver_maxrss_bytes", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "bytes")
