"""The fast publisher: a task's message built once by Celery itself, then sent in bulk.

``apply_async`` costs ~0.2-0.3 ms of Python per task (routing, signature, serialising, the
transport's bookkeeping), so a driver publishing with it measures its own client, not the broker:
1-2 % of raw pipelined Redis. Here one message goes through the real ``apply_async`` path, and is
caught where kombu hands it to the broker (the Redis channel's ``_put``; the AMQP channel's
``basic_publish``) instead of being sent. That message is the template: each task then gets a
copy with its own id (``id``, ``root_id``, ``correlation_id``; kombu's Redis ``delivery_tag``)
and its stamps (``cmx_sent_at``, ``cmx_intended_at``), and is sent in batches: Redis one multi-value
LPUSH per batch (one round trip), AMQP ``basic.publish`` frames written back to back. What lands
on the broker is what ``apply_async`` would put there, byte for byte but for those values
(tests/integration/test_publisher.py proves it and that a worker runs them).

Stamps: a batch's messages all carry ``cmx_sent_at`` = the time the built batch was handed to
the client library to write (the ``pub`` rows hold the same value): Redis then answers the LPUSH
in one round trip; AMQP frames go to the socket at once. AMQP batches are confirmed by the broker
(publisher confirms; one batch in flight), which ``apply_async`` does not ask for by default: it
is what keeps a publisher faster than its queue from being cut off, and it makes "published"
mean "the broker has it".
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from typing import Callable

from cmx.workloads import instrument
from cmx.workloads.instrument import INTENDED_HEADER, SENT_HEADER, recorder

#: Placeholder task id of the template message: replaced in each copy.
TEMPLATE_ID = "cmx-template-task-id"
SENT_TOKEN = "@@CMX-SENT-AT@@"  # where the batch's send time goes, just before it is written
BATCH = 500  # messages per round trip / burst, at most


_VARIANT = {c: "89ab"[int(c, 16) & 3] for c in "0123456789abcdef"}


def new_ids(k: int) -> list[str]:
    """``k`` random version-4 UUIDs as strings, as ``str(uuid.uuid4())`` makes them, from one
    ``os.urandom`` call: a fifth of the cost of ``uuid4()`` each, which was a third of the
    publisher's time per message."""
    h = os.urandom(16 * k).hex()
    return [f"{h[i:i + 8]}-{h[i + 8:i + 12]}-4{h[i + 13:i + 16]}-{_VARIANT[h[i + 16]]}{h[i + 17:i + 20]}-{h[i + 20:i + 32]}"
            for i in range(0, 32 * k, 32)]


def batch_size(n: int) -> int:
    """At most BATCH, and at least 20 batches per backlog: publish_rate is measured between the
    first and the last send time, so a backlog sent in one batch would have no rate."""
    return max(1, min(BATCH, n // 20))


@dataclass
class Captured:
    """What kombu would have sent, caught at the channel: the arguments of the broker call."""

    args: tuple
    kwargs: dict


def capture(app, task_name: str, args: tuple, kwargs: dict | None, stream: bool, channel, method: str) -> list[Captured]:
    """Publish one ``apply_async`` with ``channel.<method>`` replaced by a recorder of its
    arguments: the message as it would reach the broker, not sent, not counted as published."""
    from kombu import Producer

    caught: list[Captured] = []
    setattr(channel, method, lambda *a, **kw: caught.append(Captured(a, kw)))
    try:
        headers = {INTENDED_HEADER: 0.0} if stream else None
        with instrument.capturing():
            app.tasks[task_name].apply_async(args, kwargs, task_id=TEMPLATE_ID, producer=Producer(channel),
                                             headers=headers)
    finally:
        delattr(channel, method)  # the class's method again
    if len(caught) != 1:
        raise RuntimeError(f"expected apply_async to send one message, it sent {len(caught)}")
    return caught


class RedisPublisher:
    """Pipelined LPUSHes of copies of the template (kombu's Redis message: JSON, base64 body)."""

    def __init__(self, app, task_name: str, args: tuple, kwargs: dict | None, stream: bool):
        from kombu.utils.json import dumps

        self.conn = app.connection_for_write()
        channel = self.conn.default_channel
        (c,) = capture(app, task_name, args, kwargs, stream, channel, "_put")
        queue, message = c.args[0], c.args[1]
        self.key = channel._q_for_pri(queue, channel._get_message_priority(message, reverse=False))
        message["properties"]["delivery_tag"] = "@@TAG@@"
        message["headers"][SENT_HEADER] = "@@SENT@@"
        if stream:
            message["headers"][INTENDED_HEADER] = "@@INTENDED@@"
        text = dumps(message).replace("%", "%%")
        if TEMPLATE_ID not in text:
            raise RuntimeError("the task id is not in the captured message")
        self.template = (text.replace(TEMPLATE_ID, "%(id)s").replace("@@TAG@@", "%(tag)s")
                         .replace('"@@SENT@@"', SENT_TOKEN).replace('"@@INTENDED@@"', "%(intended)s")).encode()
        self.sent_token = SENT_TOKEN.encode()
        self.client = channel.client

    def send(self, ids: list[str], intended: list[float] | None) -> float:
        # One LPUSH of the whole batch: Redis pushes its values one by one, left to right, as
        # that many LPUSHes would (the worker's BRPOP takes them in publish order), in one trip.
        # Bytes (UTF-8, as redis-py would encode them), so redis-py sends them as they are.
        tmpl, tags = self.template, new_ids(len(ids))
        built = [tmpl % {b"id": task_id.encode(), b"tag": tags[i].encode(),
                         b"intended": repr(intended[i]).encode() if intended else b""}
                 for i, task_id in enumerate(ids)]
        sent = time.time()
        stamp, token = repr(sent).encode(), self.sent_token
        self.client.lpush(self.key, *[m.replace(token, stamp) for m in built])
        return sent

    def close(self) -> None:
        self.conn.release()


class AmqpPublisher:
    """The template's ``basic.publish`` frames, as py-amqp wrote them, copied with each task's values
    patched in place (same lengths: a uuid for the placeholder id, 8-byte doubles for the stamps)
    and written a batch at a time on a channel of kombu's own connection, in confirm mode: a batch
    is written once the one before the last is confirmed. The confirms are the back-pressure:
    RabbitMQ stops reading a publisher that outruns its queue, and py-amqp's 1 s TCP user timeout
    then ends the connection."""

    CONFIRM_TIMEOUT_S = 60.0

    def __init__(self, app, task_name: str, args: tuple, kwargs: dict | None, stream: bool):
        import struct

        self.conn = app.connection_for_write()
        channel = self.channel = self.conn.channel()
        channel.confirm_select()
        self.written = self.acked = 0
        self.nacked = False
        channel.events["basic_ack"].add(self._on_ack)
        channel.events["basic_nack"].add(self._on_nack)
        (c,) = capture(app, task_name, args, kwargs, stream, channel, "basic_publish")
        message = c.args[0]
        headers = message.properties["application_headers"]
        # Stand-ins the frames can be searched for: a 36-character id (a uuid's length) and
        # doubles no clock gives.
        self.id_ph, self.sent_ph, self.intended_ph = "cmx-template-task-id-000000000000000", 1.25e-301, 2.5e-301
        assert len(self.id_ph) == len(str(uuid.uuid4()))
        for holder in (headers, message.properties):
            for k, v in list(holder.items()):
                if v == TEMPLATE_ID:
                    holder[k] = self.id_ph
        headers[SENT_HEADER] = self.sent_ph
        if stream:
            headers[INTENDED_HEADER] = self.intended_ph
        transport = self.conn.connection.transport
        written: list[bytes] = []
        real_write = transport._write  # py-amqp's frame writer ends in it (the socket's sendall)
        transport._write = lambda data: written.append(bytes(data))  # a copy: py-amqp reuses its buffer
        try:
            channel.basic_publish(message, **c.kwargs)
        finally:
            transport._write = real_write
        self.frames = b"".join(written)
        self.pack = struct.Struct(">d").pack
        self.id_b = self.id_ph.encode()
        self.sent_b, self.intended_b = self.pack(self.sent_ph), self.pack(self.intended_ph)
        for ph in (self.id_b, self.sent_b) + ((self.intended_b,) if stream else ()):
            if ph not in self.frames:
                raise RuntimeError("a placeholder is not in the captured frames")
        self.transport = transport

    def _on_ack(self, delivery_tag: int, multiple: bool) -> None:
        self.acked = max(self.acked, delivery_tag)

    def _on_nack(self, delivery_tag: int, multiple: bool) -> None:
        self.nacked = True

    def wait_confirmed(self, upto: int) -> None:
        """Read the broker's confirms until message ``upto`` (1-based) is confirmed."""
        deadline = time.monotonic() + self.CONFIRM_TIMEOUT_S
        while self.acked < upto:
            if self.nacked:
                raise RuntimeError("the broker refused (nacked) published messages")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(f"the broker confirmed {self.acked} of {upto} messages within "
                                   f"{self.CONFIRM_TIMEOUT_S:g}s")
            try:
                self.conn.connection.drain_events(timeout=min(remaining, 1.0))
            except TimeoutError:
                pass

    def send(self, ids: list[str], intended: list[float] | None) -> float:
        frames, id_b = self.frames, self.id_b
        out = []
        for i, task_id in enumerate(ids):
            f = frames.replace(id_b, task_id.encode())
            if intended:
                f = f.replace(self.intended_b, self.pack(intended[i]))
            out.append(f)
        sent = time.time()
        before = self.written
        self.transport.write(b"".join(out).replace(self.sent_b, self.pack(sent)))
        self.written += len(ids)
        self.wait_confirmed(before)  # the previous batch: one batch stays in flight
        return sent

    def close(self) -> None:
        try:
            self.wait_confirmed(self.written)
        finally:
            try:
                self.channel.close()
            finally:
                self.conn.release()


def publisher_for(app, task_name: str, args: tuple, kwargs: dict | None = None, stream: bool = False):
    """The fast publisher for the app's broker."""
    transport = app.connection_for_write().transport.driver_type
    if transport == "redis":
        return RedisPublisher(app, task_name, args, kwargs, stream)
    if transport == "amqp":
        return AmqpPublisher(app, task_name, args, kwargs, stream)
    raise RuntimeError(f"no fast publisher for the {transport} transport")


def publish_backlog(app, task_name: str, args: tuple, n: int, host: str,
                    check: Callable[[str], None] = lambda what: None, kwargs: dict | None = None) -> None:
    """Publish ``n`` copies of the task as fast as the broker takes them, recording a ``pub`` row each."""
    pub = publisher_for(app, task_name, args, kwargs, stream=False)
    rec, pid, stamping = recorder(), os.getpid(), instrument.stamping()
    try:
        size = batch_size(n)
        for start in range(0, n, size):
            ids = new_ids(min(size, n - start))
            sent = pub.send(ids, None)
            if stamping:
                rec.extend("pub", [(task_id, task_name, host, pid, "", sent) for task_id in ids])
            check("publishing the backlog")
    finally:
        pub.close()


def publish_stream(app, task_name: str, args: tuple, n: int, rate: float, host: str,
                   check: Callable[[str], None] = lambda what: None, kwargs: dict | None = None) -> int:
    """Publish ``n`` copies at ``rate``/s: each wake-up sends every message due by then, in one
    batch. Returns how many were sent more than one interval after their intended time."""
    pub = publisher_for(app, task_name, args, kwargs, stream=True)
    rec, pid, stamping = recorder(), os.getpid(), instrument.stamping()
    interval, t0, behind, i = 1.0 / rate, time.time() + 0.05, 0, 0
    try:
        while i < n:
            delay = t0 + i * interval - time.time()
            if delay > 0:
                time.sleep(delay)
            now = time.time()
            due = min(n, max(i + 1, int((now - t0) / interval) + 1), i + BATCH)
            intended = [t0 + j * interval for j in range(i, due)]
            behind += sum(1 for t in intended if now - t > interval)
            ids = new_ids(len(intended))
            sent = pub.send(ids, intended)
            if stamping:
                rec.extend("pub", [(task_id, task_name, host, pid, t, sent) for task_id, t in zip(ids, intended)])
            i = due
            check("publishing the stream")
    finally:
        pub.close()
    return behind

