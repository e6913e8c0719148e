"""The fast publisher against the raw ceiling, measured in the same run (target: ≥ 50 % of raw).

    python benchmarks/publisher.py [--tasks 20000] [--repeats 3] [--brokers redis,rabbitmq]

Per broker, each round publishes ``--tasks`` messages of ``cmx.throughput.noop`` (64-byte
payload) once by each method, in a shuffled order, into an emptied queue:

- ``fast``: ``publish_backlog`` of workloads/drive/publisher.py, as the driver runs it (per-task
  ids, stamps and ``pub`` rows recorded by a real Recorder; publisher construction included);
- ``raw``: the raw client sending the *same* protocol-2 envelopes, built beforehand (not timed):
  redis-py pipelined ``LPUSH`` (one command per message, 500 per pipeline, each pipeline's
  replies awaited); pika ``basic_publish`` of the same body and properties on a
  BlockingConnection without confirms, then one synchronous round trip (the broker has read
  every frame before it answers); pika encodes no float, so ``cmx_sent_at`` is an 8-byte int there;
- ``celery``: a plain ``apply_async`` loop on one producer (a fifth of the tasks: it is slow),
  for context: it is ``params.publisher: celery``.

Printed: median rate of each method over the rounds, min-max, and fast / raw with the target.
"""

from __future__ import annotations

import argparse
import atexit
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TARGET = 0.5
URLS = {"redis": "redis://127.0.0.1:6379/13", "rabbitmq": "amqp://guest:guest@127.0.0.1:5672//"}
TASK = "cmx.throughput.noop"
PAYLOAD = ("x" * 64,)
PIPELINE = 500


def make_app(broker: str, queue: str):
    from celery import Celery

    from cmx.workloads.runtime import instrument
    from cmx.workloads.runtime.recorder import Recorder

    warnings.filterwarnings("ignore", message="Task name .* is already registered")  # one app per broker
    app = Celery("pubbench", broker=URLS[broker], set_as_current=False)
    app.conf.update(task_default_queue=queue, broker_connection_retry_on_startup=True)

    @app.task(name=TASK)
    def noop(payload):
        return None

    rows = tempfile.mkdtemp(prefix="cmx-pubbench-")  # the recorder's files, removed at exit
    atexit.register(shutil.rmtree, rows, True)
    instrument.install(app, Recorder(Path(rows), "bench"))
    return app


class Redis:
    def __init__(self, app, n: int):
        from cmx.workloads.drive.publisher import publisher_for
        from cmx.workloads.servers.base import SENT_TOKEN

        pub = publisher_for(app, TASK, PAYLOAD, None, stream=False)
        self.key, self.client = pub.key, pub.client
        stamp = repr(time.time()).encode()
        self.messages = [
            (
                pub.template % {b"id": str(uuid.uuid4()).encode(), b"tag": str(uuid.uuid4()).encode(), b"intended": b""}
            ).replace(SENT_TOKEN.encode(), stamp)
            for _ in range(n)
        ]
        self._pub = pub

    def purge(self) -> None:
        self.client.delete(self.key)

    def depth(self) -> int:
        return self.client.llen(self.key)

    def raw(self) -> None:
        msgs, client = self.messages, self.client
        for i in range(0, len(msgs), PIPELINE):
            pipe = client.pipeline(transaction=False)
            for m in msgs[i : i + PIPELINE]:
                pipe.lpush(self.key, m)
            pipe.execute()

    def close(self) -> None:
        self.purge()
        self._pub.close()


class Amqp:
    def __init__(self, app, n: int):
        import pika

        from cmx.workloads.drive.publisher import capture

        conn = app.connection_for_write()
        channel = conn.channel()
        (c,) = capture(app, TASK, PAYLOAD, None, False, channel, "basic_publish")
        message = c.args[0]
        self.exchange = c.kwargs.get("exchange", "")
        self.routing_key = c.kwargs.get("routing_key")
        self.queue = app.conf.task_default_queue
        props = dict(message.properties)
        headers = dict(props.pop("application_headers"))
        headers["cmx_sent_at"] = int(time.time() * 1e6)  # pika encodes no float: a 64-bit int (same 8 bytes)
        self.body = message.body if isinstance(message.body, bytes) else message.body.encode()
        self.props = []
        for _ in range(n):
            task_id = str(uuid.uuid4())
            h = {**headers, "id": task_id, "root_id": task_id}
            self.props.append(
                pika.BasicProperties(
                    content_type=props.get("content_type"),
                    content_encoding=props.get("content_encoding"),
                    delivery_mode=props.get("delivery_mode"),
                    priority=props.get("priority"),
                    correlation_id=task_id,
                    reply_to=props.get("reply_to"),
                    headers=h,
                )
            )
        channel.close()
        conn.release()
        self.kombu = app.connection_for_write()
        from cmx.workloads.servers.rabbitmq import pika_parameters

        self.pika = pika.BlockingConnection(pika_parameters(URLS["rabbitmq"]))
        self.channel = self.pika.channel()

    def purge(self) -> None:
        self.channel.queue_purge(self.queue)

    def depth(self) -> int:
        return self.channel.queue_declare(self.queue, passive=True).method.message_count

    def raw(self) -> None:
        publish, exchange, key, body = self.channel.basic_publish, self.exchange, self.routing_key, self.body
        for p in self.props:
            publish(exchange, key, body, p)
        self.channel.queue_declare(self.queue, passive=True)  # answered after every frame before it

    def close(self) -> None:
        try:
            self.channel.queue_delete(self.queue)
        finally:
            self.pika.close()
            self.kombu.release()


def bench_broker(broker: str, n: int, repeats: int, seed: int) -> dict[str, list[float]]:
    from cmx.workloads.drive.publisher import publish_backlog

    queue = f"cmx.pubbench.{uuid.uuid4().hex[:8]}"
    app = make_app(broker, queue)
    side = (Redis if broker == "redis" else Amqp)(app, n)
    n_celery = max(1, n // 5)

    def celery() -> None:
        task = app.tasks[TASK]
        with app.producer_or_acquire() as producer:
            for _ in range(n_celery):
                task.apply_async(PAYLOAD, producer=producer)

    methods = {
        "fast": (lambda: publish_backlog(app, TASK, PAYLOAD, n, "bench"), n),
        "raw": (side.raw, n),
        "celery": (celery, n_celery),
    }
    rates: dict[str, list[float]] = {m: [] for m in methods}
    rng = random.Random(seed)
    try:
        for _ in range(repeats):
            order = list(methods)
            rng.shuffle(order)
            for m in order:
                fn, count = methods[m]
                side.purge()
                t0 = time.perf_counter()
                fn()
                took = time.perf_counter() - t0
                deadline = time.monotonic() + 30  # RabbitMQ enqueues a moment after it answers
                while (depth := side.depth()) < count and time.monotonic() < deadline:
                    time.sleep(0.05)
                if depth != count:
                    sys.exit(f"{broker} {m}: {depth} messages in the queue after publishing {count}")
                rates[m].append(count / took)
    finally:
        side.close()
    return rates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--brokers", default="redis,rabbitmq")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    met = True
    print(
        f"publish rate, {args.tasks} messages (celery: {max(1, args.tasks // 5)}), median of {args.repeats} "
        f"interleaved rounds (tasks/s):"
    )
    for broker in args.brokers.split(","):
        rates = bench_broker(broker, args.tasks, args.repeats, args.seed)
        med = {m: statistics.median(v) for m, v in rates.items()}
        for m, v in rates.items():
            print(f"  {broker:<9} {m:<7} {med[m]:9.0f}   ({min(v):.0f}-{max(v):.0f})")
        ratio = med["fast"] / med["raw"]
        met &= ratio >= TARGET
        print(
            f"  {broker:<9} fast / raw = {100 * ratio:.0f} %  (target ≥ {100 * TARGET:.0f} %: "
            f"{'met' if ratio >= TARGET else 'MISSED'});  fast / celery = {med['fast'] / med['celery']:.1f}×"
        )
    sys.exit(0 if met else 1)


if __name__ == "__main__":
    main()
