"""Stamps every task where it happens, plus the ``cmx_progress`` command.

Stamps are taken on the host that did the work (publisher, consumer, executor) with ``time.time()``
and buffered by a :class:`~cmx.workloads.runtime.recorder.Recorder`; the publish time also travels in the
message header ``cmx_sent_at`` so the executing side knows it without asking anyone.

Two ways to the same rows, the same moments:

- **cmx's own Task class** (:class:`StampedTask`, the task class of every app cmx creates: the
  built-in workloads and the user's ``shared_task`` modules). Its Request stamps the receipt when
  the consumer builds it; its ``__call__`` (Celery's tracer calls a custom one in place of ``run``)
  stamps the start; its ``after_return`` (called after the result is stored, where
  ``task_postrun`` fires) stamps the finish and the state. A task that raises Retry, Ignore or
  Reject gets no ``after_return``: it is stamped finished as it raises (before Celery stores the
  retry state). This path skips Celery's signal dispatch, which cost more than the stamps (issue
  #11: benchmarks/stamping_parts.py).
- **Celery's signals** ``task_received``, ``task_prerun``, ``task_postrun``, for an app whose task
  classes are not cmx's (the user's own app, or a ``shared_task(base=...)``).

The publish is stamped by ``before_task_publish`` either way.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time

from celery import Celery, Task, signals
from celery.app import builtins
from celery.exceptions import Ignore, Reject, Retry
from celery.states import IGNORED, REJECTED, RETRY
from celery.worker import state as worker_state
from celery.worker.request import Request
from celery.worker.control import control_command

from cmx.workloads.runtime import acceptcount
from cmx.workloads.runtime.fingerprint import versions as package_versions
from cmx.workloads.runtime.recorder import Recorder
from cmx.workloads.vocab import metrics as M

SENT_HEADER = "cmx_sent_at"
INTENDED_HEADER = "cmx_intended_at"
#: The harness's own task: the driver sends one per worker to the hold queue to end the wait for a
#: message that delays ``add_consumer`` (workloads/drive/workerwatch.py ``start_consuming``).
#: Never stamped, never counted (cmx_progress); its class is Celery's, not :class:`StampedTask`.
WAKE_TASK = "cmx.wake"

_recorder: Recorder | None = None
_started: dict[str, float] = {}
_capturing = False  # workloads/drive/publisher.py is building a template message: stamp it, record nothing
_stamping = True  # per-task stamps on (install(stamping=False) is for measuring their cost)
_by_class = False  # StampedTask stamps (True), or the signal handlers do (install decides)
_time = time.time
#: Fault cells (``fault`` not none): the run dir where each process marks the task it runs
#: (``busy.<pid>``, read by kill_child: workloads/faults/kill_child.py) and whose stamps of an
#: execution are written as it ends, so a process killed by a fault loses none of a task it finished.
_fault_dir: str | None = None


def fault_cell(run_dir) -> None:
    """Mark running tasks and write each execution's row at once (the run injects faults)."""
    global _fault_dir
    _fault_dir = str(run_dir)


#: Fault cells: each time the worker's consumer noticed its broker connection broken (Celery logs
#: "consumer: Connection to broker lost. Trying to re-establish the connection...", consumer.py:
#: ``on_connection_error_after_connected``), a row of this file (host, pid, this host's time) in the
#: run dir; ingest stores them (table broker_lost) and detect_s is the first after the fault.
BROKER_LOST_CSV = "broker_lost.csv"


class _BrokerLost(logging.Handler):
    def __init__(self, path: str, host: str):
        super().__init__(logging.WARNING)
        self.path, self.host = path, host

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if "Connection to broker lost" not in record.getMessage():
                return
            new = not os.path.exists(self.path)
            with open(self.path, "a") as f:
                f.write(("host,pid,ts\n" if new else "") + f"{self.host},{os.getpid()},{record.created!r}\n")
        except Exception:  # a handler must never break the worker's logging
            self.handleError(record)


def watch_broker_lost(run_dir, host: str) -> None:
    """Record when this worker noticed its broker connection broken (:data:`BROKER_LOST_CSV`)."""
    logging.getLogger("celery.worker.consumer.consumer").addHandler(
        _BrokerLost(os.path.join(str(run_dir), BROKER_LOST_CSV), host)
    )


def busy_file(run_dir, pid: int) -> str:
    return f"{run_dir}/busy.{pid}"


def _mark_busy(task_id: str) -> None:
    with open(busy_file(_fault_dir, os.getpid()), "w") as f:
        f.write(task_id)


def _mark_idle() -> None:
    _recorder.flush("exec")
    try:
        os.unlink(busy_file(_fault_dir, os.getpid()))
    except OSError:
        pass


def stamping() -> bool:
    return _stamping


def install(app: Celery, recorder: Recorder, stamping: bool = True) -> None:
    """Connect the handlers (once per process) so every publish and execution is recorded; call
    once the app's tasks are registered. ``stamping=False`` leaves the per-task stamps out (only to
    measure what they cost: benchmarks/overhead.py --instrument); the run then has no per-task rows."""
    global _recorder, _stamping, _by_class
    if _recorder is not None:
        _recorder = recorder
        return
    _recorder, _stamping = recorder, stamping
    acceptcount.guard()  # cmx_progress counts from Celery's total_count: exact under the threads pool too
    # Evaluated with stamping off too (it finalizes the app): on and off differ by the stamps alone.
    by_class = stamped_by_class(app)
    if stamping:
        signals.before_task_publish.connect(_on_publish, weak=False)
        _by_class = by_class
        if not _by_class:
            signals.task_received.connect(_on_received, weak=False)
            signals.task_prerun.connect(_on_prerun, weak=False)
            signals.task_postrun.connect(_on_postrun, weak=False)
    signals.worker_process_shutdown.connect(_flush, weak=False)
    signals.worker_shutdown.connect(_flush, weak=False)
    signals.worker_ready.connect(_on_ready, weak=False)


def stamped_by_class(app: Celery) -> bool:
    """Whether every task of the app (Celery's built-in ones too) is a :class:`StampedTask`, so the
    classes stamp and the signals need not."""
    return all(isinstance(task, StampedTask) for name, task in app.tasks.items() if name != WAKE_TASK)


def own_tasks(app: Celery) -> list[str]:
    """The names of the run's own tasks (the workload's, the user's), sorted: neither Celery's
    built-in ones (``celery.chord_unlock``..., defined in ``celery.app.builtins``) nor the
    harness's :data:`WAKE_TASK`."""
    return sorted(
        name for name, task in app.tasks.items() if name != WAKE_TASK and task.__module__ != builtins.__name__
    )


def register_wake(app: Celery) -> None:
    """The :data:`WAKE_TASK` on the app (before :func:`install`): it does nothing, stores nothing."""
    app.task(name=WAKE_TASK, base=Task, ignore_result=True, shared=False)(_wake)


def _wake() -> None:
    return None


def recorder() -> Recorder:
    assert _recorder is not None, "instrument.install() was not called"
    return _recorder


@contextlib.contextmanager
def capturing():
    """Publishes inside are templates (never sent): stamped as usual, so the template has the
    header where a real publish has it, but not recorded as published."""
    global _capturing
    _capturing = True
    try:
        yield
    finally:
        _capturing = False


def _on_publish(sender=None, headers=None, **_):
    if headers.get("task") == WAKE_TASK:
        return
    now = _time()
    headers[SENT_HEADER] = now
    if _capturing:
        return
    rec = _recorder
    rec.add(
        "pub", (headers["id"], headers.get("task", sender), rec.host, rec.pid, headers.get(INTENDED_HEADER, ""), now)
    )


# What runs for every task a worker takes: a clock read, a tuple, one list append; no lock, no
# system call, no formatting (benchmarks/stamping_parts.py measures what it costs).


def _received(task_id: str) -> None:
    rec = _recorder
    rec.add("recv", (task_id, rec.host, rec.pid, _time()))


def _sent_and_redelivered(req) -> tuple:
    """From the request of an execution: when its message was sent, whether it was redelivered."""
    delivery = req.delivery_info
    return getattr(req, SENT_HEADER, None) or "", 1 if delivery and delivery.get("redelivered") else 0


def _executed(task_id: str, name: str, sent, redelivered: int, started: float, finished: float, state) -> None:
    rec = _recorder
    rec.add("exec", (task_id, name, rec.host, rec.pid, sent, started, finished, state or "", redelivered))


class StampedRequest(Request):
    """The worker's Request for a :class:`StampedTask`: stamps the receipt as the consumer builds
    it (where ``task_received`` would fire: a request revoked then has a receipt and no execution,
    which ingest ignores)."""

    __slots__ = ()

    def __init__(self, message, **kwargs):
        super().__init__(message, **kwargs)
        if _by_class:
            _received(self.id)


_RAISED_STATE = {Retry: RETRY, Ignore: IGNORED, Reject: REJECTED}

#: (task id, thread or greenlet) -> (sent, redelivered, started) of the executions this process
#: has in flight, from ``__call__`` to ``after_return`` (which gets the task id, and runs in the
#: same thread: no request lookup a second time). Two deliveries of one task running at once
#: (a duplicate) run in two threads: two keys.
_running: dict[tuple[str, int], tuple] = {}


class StampedTask(Task):
    """The task class of every app cmx creates: stamps start and finish without signals."""

    Request = StampedRequest

    def __call__(self, *args, **kwargs):
        req = self.request_stack.top
        if req is None or req.called_directly or (key := (req.id, _thread_id())) in _running:
            return super().__call__(*args, **kwargs)  # called as a function, not by Celery's tracer
        if not _by_class:  # stamping off, or the signals stamp
            return self.run(*args, **kwargs)
        _running[key] = (*_sent_and_redelivered(req), _time())
        if _fault_dir:
            _mark_busy(req.id)
        try:
            return self.run(*args, **kwargs)
        except (Retry, Ignore, Reject) as exc:  # states Celery gives no after_return
            self._finished(req.id, next(s for cls, s in _RAISED_STATE.items() if isinstance(exc, cls)))
            raise
        except Exception:
            raise  # FAILURE: after_return stamps it, once Celery has stored it
        except BaseException:  # the tracer's postrun would say no state
            self._finished(req.id, None)
            raise

    def after_return(self, status, retval, task_id, args, kwargs, einfo):
        """Celery calls it after storing the result (SUCCESS, FAILURE), where task_postrun fires."""
        if _by_class:
            self._finished(task_id, status)

    def _finished(self, task_id: str, state) -> None:
        finished = _time()
        ran = _running.pop((task_id, _thread_id()), None)
        if ran is None:  # failed before __call__ (before_start, say): finished as it started
            ran = (*_sent_and_redelivered(self.request), finished)
        _executed(task_id, self.name, ran[0], ran[1], ran[2], finished, state)
        if _fault_dir:
            _mark_idle()


def _thread_id() -> int:
    return threading.get_ident()  # looked up per call: gevent and eventlet patch it to the greenlet's


def _on_received(sender=None, request=None, **_):
    if request.name != WAKE_TASK:
        _received(request.id)


def _on_prerun(task_id=None, task=None, **_):
    _started[task_id] = _time()
    if _fault_dir and getattr(task, "name", None) != WAKE_TASK:
        _mark_busy(task_id)


def _on_postrun(task_id=None, task=None, state=None, **_):
    finished = _time()
    if task.name == WAKE_TASK:
        _started.pop(task_id, None)
        return
    _executed(
        task_id, task.name, *_sent_and_redelivered(task.request), _started.pop(task_id, finished), finished, state
    )
    if _fault_dir:
        _mark_idle()


def _on_ready(sender=None, **_):
    # The heartbeat the worker's broker connection really negotiated (the server may lower what
    # was asked; Redis has none): ingest turns it into the metric heartbeat_negotiated_s.
    heartbeat = getattr(getattr(getattr(sender, "connection", None), "connection", None), "heartbeat", None)
    # packages: the versions this worker process runs with (table packages, role worker).
    info = {"ready_at": time.time(), M.HEARTBEAT_NEGOTIATED_S: heartbeat, "packages": package_versions()}
    (_recorder.run_dir / "worker.json").write_text(json.dumps(info))
    if _fault_dir:
        watch_broker_lost(_fault_dir, _recorder.host)
    # hostctl start-worker waits for this file: a worker that dies on start fails fast, clearly.
    (_recorder.run_dir / "worker.ready").write_text(str(info["ready_at"]))


def _flush(**_):
    if _recorder is not None:
        _recorder.flush()


@control_command()
def cmx_progress(state):
    """How many tasks this worker accepted, has running, has finished, and holds (received and not
    finished: prefetched, waiting for an ETA or the pool, or running) (counted by Celery; the
    harness's :data:`WAKE_TASK` left out)."""
    accepted = sum(n for name, n in worker_state.total_count.items() if name != WAKE_TASK)
    active = sum(1 for req in list(worker_state.active_requests) if req.name != WAKE_TASK)
    held = {
        req
        for group in (
            worker_state.reserved_requests,
            getattr(worker_state, "scheduled_requests", ()),
            worker_state.active_requests,
        )
        for req in list(group)
        if req.name != WAKE_TASK
    }
    # pid: a fault's replacement worker (same node) counts from 0 again (workloads/drive/settle.py).
    return {
        "accepted": accepted,
        "active": active,
        "completed": accepted - active,
        "held": len(held),
        "pid": os.getpid(),
    }


@control_command(args=[("name", str)], signature="<name>")
def cmx_mark(state, name):
    """Mark the run's ``clock`` or ``drain`` on this worker's host: its sampler reads PSS of every
    process it watches now (workloads/runtime/runmarks.py). ``drain`` answers once that is done
    (within 2 s), so the reading is in before the run's processes are stopped."""
    from cmx.workloads.runtime.runmarks import mark

    if _recorder is None:
        return {"sampled": False}
    return {"sampled": mark(_recorder.run_dir, name, wait_s=2.0 if name == "drain" else 0.0)}
