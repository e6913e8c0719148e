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

A prefork worker's pool drains beside a thread of Celery's that fires the loop's timers and then
sleeps 0.5 s (``prefork-timer-shutdown`` in ``TaskPool.on_stop``); once the pool has joined,
Celery joins that thread, which is mostly asleep: half a second on average, for nothing. In the
worker of a run that thread sleeps at most :data:`TIMER_SLEEP_S` at a time (the timers fire
more often while the pool drains; nothing else changes).

Last, once Celery is done (``worker_shutdown``) the worker leaves without the interpreter's
teardown (workloads/quickexit.py), with the exit code Celery gives it.

The worker still shuts down as Celery does (its pool, its recorder's last flush, its exit code);
only the waits for nothing are gone. A loop without a hub (gevent, eventlet: ``synloop``) is
woken by the second step alone (and not by it in gevent, whose signal handlers run in its loop's
callback, where a blocking call raises ``BlockingSwitchOutError``). A green worker still stops
4.0 s after its TERM, measured with gevent and eventlet on Redis and RabbitMQ: ``synloop`` reads the
flag when its ``drain_events(timeout=2.0)`` times out, and the control greenlet (``gPidbox``) drains
in turns of 1 s; after a drive that finished, the host's short grace kills it, its rows on disk.
"""
from __future__ import annotations

import mmap
import os
import socket
import threading
import time
import types

from celery import Celery, signals

from cmx.workloads import instrument, quickexit
from cmx.workloads.spec import RunSpec
from cmx.workloads.vocab.pools import PREFORK

#: Seconds the prefork pool's timer thread sleeps at a time while the pool drains (Celery: 0.5).
TIMER_SLEEP_S = 0.02
#: The name Celery gives that thread (celery/concurrency/prefork.py ``TaskPool.on_stop``).
TIMER_THREAD = "prefork-timer-shutdown"

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

    def on_shutdown(sender=None, **_) -> None:
        # Celery's click command exits with the worker's exitcode (None: 0) once start() returns.
        if getattr(sender, "app", app) is not app:  # another app's worker in this process: not ours
            return
        quickexit.at_exit(lambda: int(getattr(sender, "exitcode", None) or 0))

    signals.worker_ready.connect(on_ready, weak=False)
    signals.worker_shutting_down.connect(on_shutting_down, weak=False)
    signals.worker_process_shutdown.connect(_pool_process_exit, weak=False)
    signals.worker_shutdown.connect(on_shutdown, weak=False)
    if spec.pool == PREFORK:
        _short_timer_sleeps()


def _short_timer_sleeps() -> None:
    """Make the prefork pool's shutdown timer thread sleep :data:`TIMER_SLEEP_S` at most at a time
    (the module's ``time``, as that thread sees it; every other caller sleeps as asked)."""
    from celery.concurrency import prefork

    real = prefork.time
    if isinstance(real, types.SimpleNamespace):  # done already
        return

    def sleep(seconds: float) -> None:
        if threading.current_thread().name == TIMER_THREAD:
            seconds = min(seconds, TIMER_SLEEP_S)
        time.sleep(seconds)

    names = {k: getattr(real, k) for k in dir(real) if not k.startswith("__")}
    prefork.time = types.SimpleNamespace(**{**names, "sleep": sleep})


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
