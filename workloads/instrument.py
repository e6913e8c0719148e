"""Celery signal handlers that stamp every task where it happens, plus the ``cmx_progress`` command.

Stamps are taken on the host that did the work (publisher, consumer, executor) with ``time.time()``
and buffered by a :class:`~cmx.workloads.recorder.Recorder`; the publish time also travels in the
message header ``cmx_sent_at`` so the executing side knows it without asking anyone.
"""
from __future__ import annotations

import contextlib
import json
import time

from celery import Celery, signals
from celery.worker import state as worker_state
from celery.worker.control import control_command

from cmx.workloads.recorder import Recorder

SENT_HEADER = "cmx_sent_at"
INTENDED_HEADER = "cmx_intended_at"

_recorder: Recorder | None = None
_started: dict[str, float] = {}
_capturing = False  # workloads/drive/publisher.py is building a template message: stamp it, record nothing
_stamping = True  # per-task stamps on (install(stamping=False) is for measuring their cost)
_time = time.time


def stamping() -> bool:
    return _stamping


def install(app: Celery, recorder: Recorder, stamping: bool = True) -> None:
    """Connect the handlers (once per process) so every publish and execution is recorded.
    ``stamping=False`` leaves the per-task handlers out (only to measure what they cost:
    benchmarks/overhead.py --instrument); the run then has no per-task rows."""
    global _recorder, _stamping
    if _recorder is not None:
        _recorder = recorder
        return
    _recorder, _stamping = recorder, stamping
    if stamping:
        signals.before_task_publish.connect(_on_publish, weak=False)
        signals.task_received.connect(_on_received, weak=False)
        signals.task_prerun.connect(_on_prerun, weak=False)
        signals.task_postrun.connect(_on_postrun, weak=False)
    signals.worker_process_shutdown.connect(_flush, weak=False)
    signals.worker_shutdown.connect(_flush, weak=False)
    signals.worker_ready.connect(_on_ready, weak=False)


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
    now = _time()
    headers[SENT_HEADER] = now
    if _capturing:
        return
    rec = _recorder
    rec.add("pub", (headers["id"], headers.get("task", sender), rec.host, rec.pid, headers.get(INTENDED_HEADER, ""), now))


# The three handlers below run for every task a worker takes (Celery's own dispatch of each
# signal costs more than they do): a clock read, a tuple, one list append; no lock, no system
# call, no formatting (benchmarks/stamping.py measures what they cost).

def _on_received(sender=None, request=None, **_):
    rec = _recorder
    rec.add("recv", (request.id, rec.host, rec.pid, _time()))


def _on_prerun(task_id=None, **_):
    _started[task_id] = _time()


def _on_postrun(task_id=None, task=None, state=None, **_):
    finished = _time()
    req = task.request
    delivery = req.delivery_info
    rec = _recorder
    rec.add("exec", (task_id, task.name, rec.host, rec.pid, getattr(req, SENT_HEADER, None) or "",
                     _started.pop(task_id, finished), finished, state or "",
                     1 if delivery and delivery.get("redelivered") else 0))


def _on_ready(sender=None, **_):
    # The heartbeat the worker's broker connection really negotiated (the server may lower what
    # was asked; Redis has none): ingest turns it into the metric heartbeat_negotiated_s.
    heartbeat = getattr(getattr(getattr(sender, "connection", None), "connection", None), "heartbeat", None)
    info = {"ready_at": time.time(), "heartbeat_negotiated_s": heartbeat}
    (_recorder.run_dir / "worker.json").write_text(json.dumps(info))
    # hostctl start-worker waits for this file: a worker that dies on start fails fast, clearly.
    (_recorder.run_dir / "worker.ready").write_text(str(info["ready_at"]))


def _flush(**_):
    if _recorder is not None:
        _recorder.flush()


@control_command()
def cmx_progress(state):
    """How many tasks this worker accepted, has running, and has finished (counted by Celery)."""
    accepted = sum(worker_state.total_count.values())
    active = len(worker_state.active_requests)
    return {"accepted": accepted, "active": active, "completed": accepted - active}
