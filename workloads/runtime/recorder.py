"""Per-process, in-memory buffers of measurement rows, written to files in the run dir.

No network call per task, and no lock, system call or formatting on the per-task path: a row is
one tuple appended to a list (``list.append`` is atomic, so the threads of a threads-pool worker
share the lists without a lock). A background flusher takes what the lists hold every
:data:`FLUSH_INTERVAL_S` and appends it to ``<kind>-<pid>.rows`` as one ``marshal`` frame per
kind; the process also flushes when it shuts down and at exit. The flusher takes a *prefix* of
each list (copy the first n rows, then delete exactly those n), so rows appended meanwhile stay
for the next flush: no row is lost or written twice.

Why frames and not CSV during the run: the flusher runs in the measured process, under its GIL,
and formatting floats for CSV cost ~3 µs per task row against ~0.2 µs for a frame (issue #11's
stamping budget is ~13 µs per task). :func:`write_csv` turns the frames into the CSV layout ingest
reads (``<kind>-<pid>.csv``, header :data:`HEADERS`), on the host once the run's processes have
stopped (workloads/host/hostrun.py ``finish_report``, before packing).

What a hard kill loses: a process killed with SIGKILL (or a warm shutdown that outlasts its grace
period and is then killed) loses the rows recorded since its last flush, at most the last
:data:`FLUSH_INTERVAL_S` of its stamps; a process that exits normally or on SIGTERM loses none.
The flusher exists for that case (seen with the threads pool on RabbitMQ).

After a fork (prefork children) the child starts with empty buffers and, at its first row, a
flusher of its own (an at-fork hook clears them in place: handlers that hold a list's ``append``
keep working); the parent keeps and writes its own rows.
"""

from __future__ import annotations

import atexit
import csv
import marshal
import os
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

HEADERS: dict[str, tuple[str, ...]] = {
    # A publish seen by whoever published (driver, or a task publishing subtasks).
    "pub": ("task_id", "name", "host", "pid", "intended_at", "sent_at"),
    # A message reaching a worker's consumer (prefetched), in the worker's main process.
    "recv": ("task_id", "host", "pid", "received_at"),
    # One execution of a task, in the process that ran it.
    "exec": ("task_id", "name", "host", "pid", "sent_at", "started_at", "finished_at", "state", "redelivered"),
}

FLUSH_INTERVAL_S = 0.5  # also the most a SIGKILLed process can lose
FRAMES = ".rows"  # <kind>-<pid>.rows: the run's marshal frames, until write_csv

_live: weakref.WeakSet[Recorder] = weakref.WeakSet()


class Recorder:
    def __init__(self, run_dir: Path, host: str):
        self.run_dir = Path(run_dir)
        self.host = host
        self.pid = os.getpid()
        #: kind -> rows not yet written. The lists live as long as the recorder (cleared in place,
        #: never replaced), so ``rows[kind].append`` may be bound once and called per task.
        self.rows: dict[str, list[tuple]] = {k: [] for k in HEADERS}
        self._flush_lock = threading.Lock()
        self._flusher: threading.Thread | None = None
        _live.add(self)
        atexit.register(self.flush)

    def add(self, kind: str, row: tuple) -> None:
        self.rows[kind].append(row)
        if self._flusher is None:
            self._start_flusher()

    def extend(self, kind: str, rows: list[tuple]) -> None:
        self.rows[kind].extend(rows)
        if self._flusher is None:
            self._start_flusher()

    def _start_flusher(self) -> None:
        """Started at the first row, not at creation: a prefork parent forks its children before
        it records anything, so it forks with no thread of ours running."""
        with self._flush_lock:
            if self._flusher is None:
                self._flusher = threading.Thread(
                    target=self._flush_forever, args=(self.pid,), name="cmx-recorder", daemon=True
                )
                self._flusher.start()

    def _flush_forever(self, pid: int) -> None:
        while self.pid == pid:  # a forked child has a flusher of its own
            time.sleep(FLUSH_INTERVAL_S)
            self.flush()

    def _after_fork_in_child(self) -> None:
        self.pid = os.getpid()
        for rows in self.rows.values():
            del rows[:]  # the parent's rows are the parent's to write
        self._flush_lock = threading.Lock()  # a lock the parent's flusher held is held forever here
        self._flusher = None

    def flush(self, kind: str | None = None) -> None:
        """Append buffered rows to this process's frame files (one frame per kind and flush)."""
        if os.getpid() != self.pid:  # forked without the hook having run: not our rows
            return
        with self._flush_lock:
            for k in [kind] if kind else list(HEADERS):
                rows = self.rows[k]
                n = len(rows)
                if not n:
                    continue
                chunk = rows[:n]
                del rows[:n]  # rows appended since len() are past n: kept for the next flush
                with (self.run_dir / f"{k}-{self.pid}{FRAMES}").open("ab") as f:
                    marshal.dump(chunk, f)


def read_frames(path: Path) -> Iterator[list[tuple]]:
    """The frames of a frame file, in order (a frame: the rows of one flush). A last frame cut
    short (its process was killed while writing it) ends the file: those rows are the ones a hard
    kill loses."""
    with path.open("rb") as f:
        while True:
            try:
                yield marshal.load(f)
            except (EOFError, ValueError, TypeError):
                return


def write_csv(run_dir: Path) -> int:
    """Turn every ``<kind>-<pid>.rows`` in ``run_dir`` into ``<kind>-<pid>.csv`` (appended to one
    that exists, header written once) and remove the frames; call once the writers have stopped.
    Returns the number of rows written."""
    written = 0
    for frames in sorted(Path(run_dir).glob(f"*{FRAMES}")):
        kind = frames.name.split("-", 1)[0]
        if kind not in HEADERS:
            continue
        with frames.with_suffix(".csv").open("a", newline="") as f:
            w = csv.writer(f)
            if f.tell() == 0:  # a new file ("a" opens at its end)
                w.writerow(HEADERS[kind])
            for rows in read_frames(frames):
                w.writerows(rows)
                written += len(rows)
        frames.unlink()
    return written


def _after_fork_in_child() -> None:
    for rec in list(_live):
        rec._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
