"""Celery's count of accepted tasks, made exact under the threads pool (issue 42, issue 43).

``celery.worker.state.task_accepted`` adds each accepted task to ``total_count`` (what
``celery inspect stats`` calls ``total``, and what ``cmx_progress`` counts a worker's finished tasks
from) with ``Counter.update``: a read, then a write, in Python. The threads pool calls it from its
executor threads, several at once, and an increment is lost whenever the interpreter switches
threads between the two: 4 threads accepting 200,000 tasks counted 0.9–1.8 % fewer on this
machine at load 10.5 (benchmarks/measured/accept-count-2026-12-07.txt; tests/unit/test_accept_count.py
shows it). A worker that ran every task then said it ran fewer, and the
driver waited for completions that were never going to be counted until ``run_timeout`` (a classic
queue run of rabbitmq-queue-types: 19,979 of 20,000 "ran", 600 s). :func:`guard` serialises the
call with a lock (a few hundred nanoseconds a task; prefork, gevent and eventlet call it from one
thread anyway).
"""

from __future__ import annotations

import threading

_guarded = False


def guard() -> None:
    """Make every later ``task_accepted`` of this process's worker hold one lock (once per process).
    Celery's Request looks the function up in its module at each call, so replacing it there is
    enough; ``celery.worker.state``'s own stays as it is."""
    global _guarded
    if _guarded:
        return
    from celery.worker import request

    real, lock = request.task_accepted, threading.Lock()

    def task_accepted(req, *args, **kwargs):
        with lock:
            return real(req, *args, **kwargs)

    request.task_accepted = task_accepted
    _guarded = True
