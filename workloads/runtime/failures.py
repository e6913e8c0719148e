"""The first traceback of a task that raised, kept with the run (``task-failure-PID.txt`` in the run dir).

A task that raises is counted by its state (``tasks_failed``); this keeps *why*, once per process,
so a run of the user's own tasks that fails says what went wrong without a per-task cost.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from celery import signals

PREFIX = "task-failure-"
_run_dir: Path | None = None
_written: set[int] = set()


def install(run_dir: Path) -> None:
    global _run_dir
    first = _run_dir is None
    _run_dir = Path(run_dir)
    if first:
        signals.task_failure.connect(_on_failure, weak=False)


def _on_failure(sender=None, task_id=None, exception=None, args=None, kwargs=None, einfo=None, **_):
    pid = os.getpid()
    if pid in _written or _run_dir is None:
        return
    _written.add(pid)
    head = {
        "task": getattr(sender, "name", str(sender)),
        "task_id": task_id,
        "at": time.time(),
        "exception": f"{type(exception).__name__}: {exception}".splitlines()[0][:300],
        "args": repr(args)[:300],
        "kwargs": repr(kwargs)[:300],
    }
    text = json.dumps(head) + "\n" + (str(einfo.traceback) if einfo is not None else "")
    try:
        (_run_dir / f"{PREFIX}{pid}.txt").write_text(text)
    except OSError:  # losing the traceback must not change what the task did
        pass


def first_failure(art_dir: Path) -> tuple[dict, Path] | None:
    """The earliest failure kept under a run's fetched artifacts (any host), or None."""
    found = []
    for path in Path(art_dir).glob(f"*/{PREFIX}*.txt"):
        try:
            head = json.loads(path.read_text(errors="replace").split("\n", 1)[0])
        except (OSError, ValueError):
            continue
        found.append((head.get("at", 0.0), head, path))
    if not found:
        return None
    _, head, path = min(found, key=lambda f: f[0])
    return head, path


def failure_error(art_dir: Path, failed: float) -> str:
    """The error of a run whose tasks raised: how many, and the first one's exception (its full
    traceback stays in the run's artifacts)."""
    first = first_failure(art_dir)
    if first is None:
        return f"{failed:g} task(s) did not succeed (no traceback was kept)"
    head, path = first
    return f"{failed:g} task(s) raised; first: {head['task']}: {head['exception']} (traceback: {path})"
