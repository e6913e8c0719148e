"""A worker told to stop (TERM: its warm shutdown) stops now, not at its next wake-up.

Celery's TERM handler only sets a flag (``celery.apps.worker``), which the worker reads between
two waits of its event loop. An idle worker's wait ends when a message or a timer comes: up to
10 s on RabbitMQ (the hub's poll until its next timer: 5 to 9 s measured), and on Redis the
closing channel still reads the reply of the BRPOP it has in flight (up to ``brpop_timeout``,
1 s). Every run's stop paid that, and the host's grace then killed the worker. So, in the worker:

- ``worker_ready``: a socket pair whose read end the worker's event loop (kombu's hub) watches;
- ``worker_shutting_down`` (sent by the TERM handler, in the loop's own thread, while its poll is
  interrupted): one byte on it, so the poll returns and the loop reads the flag at once; then the
  blocking reads the run's workers have on the broker end (workloads/drive/workerwatch.py
  ``wake_blocked``: Redis's ``CLIENT UNBLOCK``, as if the BRPOP timed out), so closing the
  channel does not wait for them.

A prefork pool's process, told by its parent to stop, sends its parent word of its death and then
sleeps 1 s before it exits (``billiard.pool.Worker._do_exit``); the parent waits for it. When the
worker was told to stop (a flag the parent sets in ``worker_shutting_down``, in memory its pool
processes share), a pool process exits as soon as its recorder's rows are written
(``worker_process_shutdown``, where Celery calls it before that sleep), with the exit code billiard
would give it. A pool process that ends for any other reason (recycled, crashed) ends as billiard
has it.

The worker still shuts down as Celery does (its pool, its recorder's last flush, its exit code);
only the waits for nothing are gone. A loop without a hub (gevent, eventlet: ``synloop``) is
woken by the second step alone.
"""
from __future__ import annotations

import mmap
import os
import socket

from celery import Celery, signals

from cmx.workloads import instrument
from cmx.workloads.spec import RunSpec

_wake: list[socket.socket] = []  # the write end, once the hub watches the read end
#: One byte shared with the pool processes forked later: 1 once the worker was told to stop.
_stopping = mmap.mmap(-1, 1)


def install(app: Celery, spec: RunSpec) -> None:
    """Connect the two handlers (in the worker process only: ``worker_app``)."""

    def on_ready(**_) -> None:
        from kombu.asynchronous import get_event_loop

        hub = get_event_loop()
        if hub is None or _wake:
            return
        reader, writer = socket.socketpair()
        reader.setblocking(False)
        writer.setblocking(False)
        hub.add_reader(reader.fileno(), _drain, reader)
        _wake.append(writer)

    def on_shutting_down(**_) -> None:
        _stopping[0] = 1
        for writer in _wake:
            try:
                writer.send(b"\0")
            except OSError:  # full (woken already) or closed
                pass
        from cmx.workloads.drive.workerwatch import wake_blocked

        wake_blocked(app, spec)

    signals.worker_ready.connect(on_ready, weak=False)
    signals.worker_shutting_down.connect(on_shutting_down, weak=False)
    signals.worker_process_shutdown.connect(_pool_process_exit, weak=False)


def _pool_process_exit(exitcode=None, **_) -> None:
    """In a prefork pool process that ends: when its worker was told to stop, write its rows and
    exit now (skipping billiard's word to a parent that is stopping and its 1 s sleep)."""
    if not _stopping[0]:
        return
    instrument.recorder().flush()
    os._exit(exitcode if exitcode is not None else 0)


def _drain(reader: socket.socket) -> None:
    try:
        reader.recv(64)
    except OSError:
        pass
