"""A worker its run's stop TERMs (its warm shutdown) stops now, not at its next wake-up.

Only the harness's stop: ``hostctl.stop`` writes ``runmarks.STOP_ASKED`` in the run dir before its
TERM. A TERM without it (the ``term_worker`` fault, a user's kill) gets Celery's own warm shutdown,
every wait of it: how long a TERMed worker takes to leave is part of what that fault measures.

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
teardown (workloads/runtime/quickexit.py), with the exit code Celery gives it.

A loop without a hub (gevent, eventlet: ``synloop``) reads the flag between two
``drain_events(timeout=2.0)`` and drains once more after it saw it, and the worker's stop then
waits for its control greenlet (``gPidbox``), which reads its own stop event between drains of up
to 1 s: a green worker stopped 4.0 s after its TERM, every time, on Redis and RabbitMQ. So, for
green pools, the TERM handler starts a greenlet (nothing may block in the handler: gevent runs it
in its loop's callback) that puts two of the harness's wake tasks on the hold queue, which end
both drains; and ``gPidbox.on_stop`` sends the worker a ``ping`` once it set the stop event,
which ends the control greenlet's drain. Green workers now stop 0.05-0.6 s after their TERM.

The worker still shuts down as Celery does (its pool, its recorder's last flush, its exit code);
only the waits for nothing are gone. Where a wake fails, the worker stops when its wait times
out, as Celery has it, and says so in its log.
"""

from __future__ import annotations

import mmap
import os
import socket
import sys
import threading
import time
import types

from celery import Celery, signals

from cmx.workloads.runtime import instrument, quickexit
from cmx.workloads.runtime.runmarks import stop_asked
from cmx.workloads.runtime.spec import RunSpec
from cmx.workloads.vocab.pools import GEVENT, GREEN, PREFORK

#: Seconds the prefork pool's timer thread sleeps at a time while the pool drains (Celery: 0.5).
TIMER_SLEEP_S = 0.02
#: The name Celery gives that thread (celery/concurrency/prefork.py ``TaskPool.on_stop``).
TIMER_THREAD = "prefork-timer-shutdown"

_wake: list[socket.socket] = []  # the write end, once the hub watches the read end
#: One byte shared with the pool processes forked later: 1 once the worker was told to stop.
_stopping = mmap.mmap(-1, 1)


def install(app: Celery, spec: RunSpec) -> None:
    """Connect the two handlers (in the worker process only: ``app/worker.py``)."""

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

    run_dir = os.environ.get("CMX_RUN_DIR")

    def on_shutting_down(**_) -> None:
        if not stop_asked(run_dir):  # not the harness's stop (a fault's term_worker): Celery's own
            return
        _stopping[0] = 1
        for writer in _wake:
            try:
                writer.send(b"\0")
            except OSError:  # full (woken already) or closed
                pass
        if spec.pool in GREEN:  # no hub to wake; here (the loop's callback) nothing may block
            _spawn_green(spec.pool, _wake_synloop, app, spec)
            return
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
    if spec.pool in GREEN:
        _wake_green_pidbox_at_stop()


def _short_timer_sleeps() -> None:
    """Make the prefork pool's shutdown timer thread sleep :data:`TIMER_SLEEP_S` at most at a time
    (the module's ``time``, as that thread sees it; every other caller sleeps as asked)."""
    from celery.concurrency import prefork

    real = prefork.time
    if isinstance(real, types.SimpleNamespace):  # done already
        return

    def sleep(seconds: float) -> None:
        if _stopping[0] and threading.current_thread().name == TIMER_THREAD:
            seconds = min(seconds, TIMER_SLEEP_S)
        time.sleep(seconds)

    names = {k: getattr(real, k) for k in dir(real) if not k.startswith("__")}
    prefork.time = types.SimpleNamespace(**{**names, "sleep": sleep})


def _wake_green_pidbox_at_stop() -> None:
    """A green worker's control greenlet (Celery's ``gPidbox``) reads its stop event when its
    ``drain_events(timeout=1.0)`` ends, and the worker's stop waits for it (up to 1 s: always 1 s
    on Redis). Its ``on_stop`` now sets that event and then sends this worker a control message
    (a ``ping`` that wants no reply), which ends the wait at once."""
    from celery.worker import pidbox

    real = pidbox.gPidbox.on_stop
    if getattr(real, "cmx_wakes", False):  # done already
        return

    def on_stop(self) -> None:
        shutdown = getattr(self, "_node_shutdown", None)
        if shutdown is not None and _stopping[0]:
            shutdown.set()
            try:
                self.c.app.control.broadcast("ping", destination=[self.hostname], reply=False)
            except Exception as exc:  # it then stops when its wait times out, as Celery has it
                print(
                    f"cmx: could not wake the stopping worker's control loop ({type(exc).__name__}: {exc})",
                    file=sys.stderr,
                )
        real(self)

    on_stop.cmx_wakes = True
    pidbox.gPidbox.on_stop = on_stop


def _pool_process_exit(exitcode=None, **_) -> None:
    """In a prefork pool process that ends: when its worker was told to stop, write its rows and
    exit now (skipping billiard's word to a parent that is stopping and its 1 s sleep)."""
    if not _stopping[0]:
        return
    instrument.recorder().flush()
    os._exit(exitcode if exitcode is not None else 0)


def _spawn_green(pool: str, fn, *args) -> None:
    """``fn(*args)`` in a new greenlet, started without waiting (``threading.Thread.start`` waits for
    the thread: a blocking call, which raises in a signal handler of gevent's or eventlet's loop)."""
    if pool == GEVENT:
        import gevent

        gevent.spawn(fn, *args)
    else:
        import eventlet

        eventlet.spawn_n(fn, *args)


def _wake_synloop(app: Celery, spec: RunSpec) -> None:
    """A green worker's loop (``synloop``) reads the stop flag between two ``drain_events(timeout=2.0)``,
    and drains once more after it saw it (``try: maybe_shutdown() finally: _loop_cycle()``): two
    messages on the hold queue (the harness's wake task, which counts nowhere) end both waits now,
    not 2 s each later."""
    from cmx.workloads.drive.workerwatch import wake

    try:
        wake(app, spec, 2)
    except Exception as exc:  # the worker then stops when its wait times out, as Celery has it
        print(f"cmx: could not wake the stopping worker's loop ({type(exc).__name__}: {exc})", file=sys.stderr)


def _drain(reader: socket.socket) -> None:
    try:
        reader.recv(64)
    except OSError:
        pass
