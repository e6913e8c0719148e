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
mean "the broker has it". A confirm does not mean a queue has it (RabbitMQ confirms and drops a
message no queue takes), so AMQP messages go ``mandatory``: those no queue took come back, and
their ids reach the driver (``returned``), which counts them lost before the queue
(workloads/drive/lost.py) instead of waiting for them.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

from cmx.workloads.runtime import instrument
from cmx.workloads.servers import registry as servers
from cmx.workloads.runtime.instrument import INTENDED_HEADER, recorder
from cmx.workloads.servers.base import TEMPLATE_ID, new_ids

BATCH = 500  # messages per round trip / burst, at most


def batch_size(n: int) -> int:
    """At most BATCH, and at least 20 batches per backlog: publish_rate is measured between the
    first and the last send time, so a backlog sent in one batch would have no rate."""
    return max(1, min(BATCH, n // 20))


@dataclass
class Captured:
    """What kombu would have sent, caught at the channel: the arguments of the broker call."""

    args: tuple
    kwargs: dict


def capture(
    app, task_name: str, args: tuple, kwargs: dict | None, stream: bool, channel, method: str
) -> list[Captured]:
    """Publish one ``apply_async`` with ``channel.<method>`` replaced by a recorder of its
    arguments: the message as it would reach the broker, not sent, not counted as published."""
    from kombu import Producer

    caught: list[Captured] = []
    setattr(channel, method, lambda *a, **kw: caught.append(Captured(a, kw)))
    try:
        headers = {INTENDED_HEADER: 0.0} if stream else None
        with instrument.capturing():
            app.tasks[task_name].apply_async(
                args, kwargs, task_id=TEMPLATE_ID, producer=Producer(channel), headers=headers
            )
    finally:
        delattr(channel, method)  # the class's method again
    if len(caught) != 1:
        raise RuntimeError(f"expected apply_async to send one message, it sent {len(caught)}")
    return caught


def publisher_for(
    app, task_name: str, args: tuple, kwargs: dict | None = None, stream: bool = False, service: str | None = None
):
    """The fast publisher of the app's broker server (workloads/servers/): ``service`` names it,
    else the server the scheme of the app's broker URL says."""
    if service is None:
        service = servers.of_scheme(urlsplit(app.connection_for_write().as_uri()).scheme).name

    def caught(channel, method: str) -> list:
        return [(c.args, c.kwargs) for c in capture(app, task_name, args, kwargs, stream, channel, method)]

    return servers.get(service).fast_publisher(app, caught, stream)


def returned_by(pub) -> list[str]:
    """Ids of the messages the broker gave back unroutable (in no queue): a publisher's
    ``returned`` (AMQP's ``basic.return``); none where the broker has no such answer (Redis)."""
    return list(getattr(pub, "returned", ()))


def publish_backlog(
    app,
    task_name: str,
    args: tuple,
    n: int,
    host: str,
    check: Callable[[str], None] = lambda what: None,
    kwargs: dict | None = None,
    returned: list[str] | None = None,
) -> None:
    """Publish ``n`` copies of the task as fast as the broker takes them, recording a ``pub`` row each.
    The ids of those the broker returned unroutable (:func:`returned_by`) are added to ``returned``."""
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
        if returned is not None:
            returned.extend(returned_by(pub))


def publish_stream(
    app,
    task_name: str,
    args: tuple,
    n: int,
    rate: float,
    host: str,
    check: Callable[[str], None] = lambda what: None,
    kwargs: dict | None = None,
    returned: list[str] | None = None,
) -> int:
    """Publish ``n`` copies at ``rate``/s: each wake-up sends every message due by then, in one
    batch. Returns how many were sent more than one interval after their intended time; the ids
    of those the broker returned unroutable are added to ``returned``."""
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
        if returned is not None:
            returned.extend(returned_by(pub))
    return behind
