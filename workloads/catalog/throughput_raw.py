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

from cmx.workloads.vocab import kinds
from cmx.workloads.servers import registry as servers
from cmx.workloads.vocab.clientname import client_name
from cmx.workloads.drive.pacing import Pacer
from cmx.workloads.runtime.instrument import recorder
from cmx.workloads.catalog.throughput_params import ThroughputParams
from cmx.workloads.vocab import metrics as M
from cmx.workloads.vocab.clients import BROKER, DRIVER

if TYPE_CHECKING:  # pragma: no cover
    from cmx.workloads.drive.context import DriveContext

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


def schedule_for(params: ThroughputParams) -> Pacer:
    """When to send message ``i``: now (backlog) or at the stream's rate, with the intended time."""
    return Pacer(params.rate if params.mode == "stream" else None)


def batch_size(params: ThroughputParams) -> int:
    """Messages per acknowledged round trip: ``raw_batch`` for a backlog, 1 for a stream."""
    return 1 if params.mode == "stream" else params.raw_batch


def stamp_batch(
    pubs: list, batch: list[tuple[str, float | str]], began: float, acked: float, host: str, pid: int
) -> None:
    """``pub`` rows of one acknowledged batch: message k of n at began + (acked - began)(k+1)/n, so
    the last is the acknowledgement itself and the rate spans the first batch's round trip too."""
    n = len(batch)
    for k, (task_id, intended) in enumerate(batch):
        pubs.append((task_id, TASK_NAME, host, pid, intended, began + (acked - began) * (k + 1) / n))


def publish_batches(
    ctx,
    params,
    schedule: Pacer,
    pubs: list,
    send: Callable[[bytes], object],
    flush: Callable[[], object] = lambda: None,
) -> None:
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


def consume(broker, host: str, tally: Tally, rows: list) -> None:
    """One consumer thread: the server's raw client hands over each message; it runs the task
    (nothing) and keeps its ``exec`` row; the client acknowledges it after (where it acks)."""
    pid = os.getpid()

    def handle(body: bytes, redelivered: bool) -> None:
        started = time.time()
        task_id, sent_at = decode(body)
        noop(body)
        rows.append((task_id, TASK_NAME, host, pid, sent_at, started, time.time(), "SUCCESS", int(redelivered)))
        tally.add()

    broker.consume(handle, tally.done, POLL_S)


def publish(ctx, params, schedule: Pacer, pubs: list, broker) -> None:
    """Publish through the raw client, acknowledged a batch at a time (or one call per message)."""
    send, flush = broker.sender(batch_size(params) > 1)
    publish_batches(ctx, params, schedule, pubs, send, *([flush] if flush else []))


# -------------------------------------------------------------------------------------- drive
def drive_raw(ctx: "DriveContext", params: ThroughputParams) -> None:
    """Publish ``tasks`` raw messages and consume them with ``concurrency`` threads, here."""
    url, queue, consumers = os.environ["CMX_BROKER_URL"], raw_queue(ctx), ctx.spec.concurrency
    ctx.notes.append(
        f"via raw: {consumers} consumer thread(s) ran in the driver process on {ctx.host}, "
        "not on the worker hosts; the Celery workers stayed idle"
    )
    ctx.notes.append(f"via raw: published {batch_size(params)} message(s) per acknowledged round trip")
    # Started like every run (same machine load), but never told to consume.
    ctx.wait_for_workers()
    name = client_name(ctx.spec.run_id, DRIVER, BROKER)
    kind = kinds.BROKERS[ctx.spec.broker]
    # The run's queue arguments (x-expires too); durable only where the kind needs it (quorum).
    # A server without a raw client (or unknown) is an error, never another server's client.
    broker = servers.get(kind.service).raw_client(
        url,
        queue,
        name,
        queue_arguments=ctx.spec.queue_arguments(),
        durable="x-queue-type" in ctx.spec.queue_arguments(),
        prefetch=ctx.spec.prefetch_multiplier,
    )
    pubs: list[tuple] = []
    rows: list[list[tuple]] = [[] for _ in range(consumers)]  # one list per thread: no lock per message
    tally = Tally(params.tasks)
    threads = [
        threading.Thread(target=consume, args=(broker, ctx.host, tally, rows[i]), daemon=True, name=f"raw-consumer-{i}")
        for i in range(consumers)
    ]
    try:
        broker.reset()
        schedule = schedule_for(params)
        if schedule.stream:  # consumers run while the stream is published
            for t in threads:
                t.start()
        publish(ctx, params, schedule, pubs, broker)
        if not schedule.stream:  # backlog: everything is queued before anyone consumes
            for t in threads:
                t.start()
        while not tally.done.wait(0.2):
            ctx.check_deadline(f"consuming {params.tasks} raw messages ({tally.count} so far)")
            if not any(t.is_alive() for t in threads):
                raise RuntimeError(f"every raw consumer died after {tally.count} of {params.tasks} messages")
        schedule.note_behind(ctx, params.tasks)
        ctx.metric(M.PUBLISH_BEHIND, schedule.behind, "tasks")
        ctx.metric(M.PUBLISH_BATCH, batch_size(params), "messages")
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
    ctx.metric(M.RAW_DRIVER_MAXRSS_BYTES, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "bytes")
