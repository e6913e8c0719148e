"""RabbitMQ's fast publisher (its server module's ``fast_publisher``): Celery's own publish frames,
copied per task, written in batches on a confirm-mode channel."""

from __future__ import annotations

import time
import uuid

from cmx.workloads.vocab.clients import INTENDED_HEADER, SENT_HEADER

from .base import TEMPLATE_ID, Capture


class AmqpPublisher:
    """The template's ``basic.publish`` frames, as py-amqp wrote them, copied with each task's values
    patched in place (same lengths: a uuid for the placeholder id, 8-byte doubles for the stamps)
    and written a batch at a time on a channel of kombu's own connection, in confirm mode: a batch
    is written once the one before the last is confirmed. The confirms are the back-pressure:
    RabbitMQ stops reading a publisher that outruns its queue, and py-amqp's 1 s TCP user timeout
    then ends the connection.

    A confirm alone does not say a message reached a queue: RabbitMQ confirms (``basic.ack``) a
    message no queue took and drops it. So every message is published ``mandatory``: one that no
    queue takes comes back as ``basic.return`` (before its confirm), and its id is kept in
    :attr:`returned` for the driver to count as lost before the queue, never silently."""

    CONFIRM_TIMEOUT_S = 60.0

    def __init__(self, app, capture: Capture, stream: bool):
        import struct

        self.conn = app.connection_for_write()
        channel = self.channel = self.conn.channel()
        channel.confirm_select()
        self.written = self.acked = 0
        self.nacked = False
        #: Ids of the messages the broker returned unroutable (``basic.return``): never in a queue.
        self.returned: list[str] = []
        channel.events["basic_ack"].add(self._on_ack)
        channel.events["basic_nack"].add(self._on_nack)
        channel.events["basic_return"].add(self._on_return)
        ((c_args, c_kwargs),) = capture(channel, "basic_publish")
        c_kwargs = {**c_kwargs, "mandatory": True}  # unroutable: returned, not confirmed and dropped
        message = c_args[0]
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
            channel.basic_publish(message, **c_kwargs)
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
        if not c_kwargs.get("exchange") and c_kwargs.get("routing_key"):
            # The default exchange routes by queue name: a queue this node sees is routable from here.
            # Celery declared it on this channel while the template was caught, as it does on a new
            # connection; asked again here so the publisher never relies on that (a queue declared on
            # another node of a cluster is not routable from this one at once: basic.return).
            channel.queue_declare(c_kwargs["routing_key"], passive=True)

    def _on_ack(self, delivery_tag: int, multiple: bool) -> None:
        self.acked = max(self.acked, delivery_tag)

    def _on_nack(self, delivery_tag: int, multiple: bool) -> None:
        self.nacked = True

    def _on_return(self, exc, exchange: str, routing_key: str, message) -> None:
        props = getattr(message, "properties", {}) or {}
        headers = props.get("application_headers") or {}
        self.returned.append(str(headers.get("id") or props.get("correlation_id") or "?"))

    def wait_confirmed(self, upto: int) -> None:
        """Read the broker's confirms until message ``upto`` (1-based) is confirmed."""
        deadline = time.monotonic() + self.CONFIRM_TIMEOUT_S
        while self.acked < upto:
            if self.nacked:
                raise RuntimeError("the broker refused (nacked) published messages")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RuntimeError(
                    f"the broker confirmed {self.acked} of {upto} messages within {self.CONFIRM_TIMEOUT_S:g}s"
                )
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
