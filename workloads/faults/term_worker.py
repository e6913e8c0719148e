"""``term_worker@T[:N]``: SIGTERM the run's worker's main process (Celery's warm shutdown: it
finishes the tasks it runs); once it and its supervisor are gone, after ``limits.fault_restart``,
a replacement worker starts (kill_worker.py's :class:`EndsWorker`)."""

from __future__ import annotations

import signal

from .kill_worker import EndsWorker


class TermWorker(EndsWorker):
    name = "term_worker"
    does = (
        "SIGTERM the worker's main process (warm shutdown); a replacement starts once it "
        "exited, after limits.fault_restart"
    )
    signal = signal.SIGTERM
