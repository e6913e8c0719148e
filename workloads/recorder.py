"""Per-process, in-memory buffers of measurement rows, written to CSV files in the run dir.

No network call per task: rows are appended to a list and written to ``<kind>-<pid>.csv`` by a
background flusher every half second, when the buffer is large, when the process shuts down,
and at exit. The flusher matters: a worker whose warm shutdown hangs is killed after a grace
period, and rows still in memory then would be lost (seen with the threads pool on RabbitMQ).
After a fork (prefork children) the child starts with empty buffers and a flusher of its own;
the parent keeps and writes its own rows.
"""
from __future__ import annotations

import atexit
import csv
import os
import threading
import time
from pathlib import Path

HEADERS: dict[str, tuple[str, ...]] = {
    # A publish seen by whoever published (driver, or a task publishing subtasks).
    "pub": ("task_id", "name", "host", "pid", "intended_at", "sent_at"),
    # A message reaching a worker's consumer (prefetched), in the worker's main process.
    "recv": ("task_id", "host", "pid", "received_at"),
    # One execution of a task, in the process that ran it.
    "exec": ("task_id", "name", "host", "pid", "sent_at", "started_at", "finished_at", "state", "redelivered"),
}

FLUSH_ROWS = 20_000
FLUSH_INTERVAL_S = 0.5


class Recorder:
    def __init__(self, run_dir: Path, host: str):
        self.run_dir = Path(run_dir)
        self.host = host
        self._pid = -1
        self._rows: dict[str, list[tuple]] = {k: [] for k in HEADERS}
        self._lock = threading.Lock()
        atexit.register(self.flush)

    def _adopt_process(self) -> None:
        """First row in this process (or after a fork): own buffers and a flusher of its own."""
        self._pid = os.getpid()
        self._rows = {k: [] for k in HEADERS}
        self._lock = threading.Lock()
        threading.Thread(target=self._flush_forever, name="cmx-recorder", daemon=True).start()

    def _flush_forever(self) -> None:
        pid = os.getpid()
        while os.getpid() == pid == self._pid:
            time.sleep(FLUSH_INTERVAL_S)
            self.flush()

    def add(self, kind: str, row: tuple) -> None:
        if os.getpid() != self._pid:  # forked: the parent's rows are the parent's to write
            self._adopt_process()
        with self._lock:
            rows = self._rows[kind]
            rows.append(row)
        if len(rows) >= FLUSH_ROWS:
            self.flush(kind)

    def flush(self, kind: str | None = None) -> None:
        """Append buffered rows to this process's CSV files (header written once per file)."""
        if os.getpid() != self._pid:
            return
        with self._lock:
            for k in [kind] if kind else list(HEADERS):
                rows, self._rows[k] = self._rows[k], []
                if not rows:
                    continue
                path = self.run_dir / f"{k}-{self._pid}.csv"
                new = not path.exists()
                with path.open("a", newline="") as f:
                    w = csv.writer(f)
                    if new:
                        w.writerow(HEADERS[k])
                    w.writerows(rows)
