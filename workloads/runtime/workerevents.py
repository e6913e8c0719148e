"""What a worker's host knows of the worker when the worker itself cannot answer: that it ended
(its supervisor's ``worker.exit``) and that it has taken a task of the run (its first receipt, in
the stamps' frames). A busy solo, gevent or eventlet worker answers no control message, and a
killed one never will; these two facts need neither.

Each fact is a :class:`WorkerEvent` (kind, host, time; for an end also pid and exit code or
signal). The host's agent (workloads/host/agent.py) reads them from the worker's run dir with
:func:`observe` and sends them to the controller, which passes them on to the driver's agent
(engine/run/runsteps.py); that one writes them to the driver's run dir (:data:`EVENTS_FILE`,
:func:`record`), where the driver's start barrier and watchdog read them
(workloads/drive/workerwatch.py). The file comes back with the run's artifacts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from cmx.workloads.runtime.files import write_atomic
from cmx.workloads.runtime.recorder import FRAMES

#: In the driver's run dir: every event the controller passed on, as a JSON list.
EVENTS_FILE = "worker_events.json"
EXITED, CONSUMING = "exited", "consuming"
#: A fault struck (sent by the injecting host's agent before the blow: pid and task it hit), a
#: fault's end (its replacement worker is ready; ``error`` when it could not be injected), and the
#: workload's clock start (the ``clock`` mark in a run dir), from which the controller times faults.
FAULT, FAULT_END, CLOCK = "fault", "fault_end", "clock"


@dataclass(frozen=True)
class WorkerEvent:
    kind: str  # EXITED or CONSUMING
    host: str  # the inventory name of the worker's host
    at: float  # time.time() on that host when it happened (ended; first receipt written)
    pid: int | None = None
    exit_code: int | None = None
    signal: str | None = None  # "SIGKILL"
    signal_number: int | None = None
    #: Faults (kinds FAULT, FAULT_END): which one of the run's faults (its index and text), the task
    #: the killed process ran, and why it could not be injected.
    index: int | None = None
    fault: str | None = None
    task_id: str | None = None
    error: str | None = None
    #: CLOCK: seconds between the mark and its sending (both on the marking host's clock).
    age_s: float | None = None

    @property
    def key(self) -> tuple:
        """One event per worker process and kind (per fault for faults), however often it is seen or passed on."""
        if self.kind in (FAULT, FAULT_END):
            return self.kind, self.host, self.index
        return self.kind, self.host, self.pid if self.kind == EXITED else None

    def text(self) -> str:
        """'worker on w2 exited, signal 9 (SIGKILL)'."""
        return f"worker on {self.host} {how_it_ended(asdict(self))}"

    @classmethod
    def from_json(cls, data: dict) -> "WorkerEvent":
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})


def how_it_ended(info: dict) -> str:
    """'exited, signal 9 (SIGKILL)' / 'exited with code 1', from a worker.exit record."""
    if info.get("signal"):
        return f"exited, signal {info.get('signal_number', '?')} ({info['signal']})"
    return f"exited with code {info.get('exit_code')}"


def observe(run_dir: Path, host: str) -> list[WorkerEvent]:
    """The events the worker's own run dir shows now: its end (``worker.exit``, written by its
    supervisor) and its first receipt of a run task (a ``recv`` frame file, written by its
    recorder's flusher within half a second of the receipt, also while the worker is busy)."""
    run_dir = Path(run_dir)
    events = []
    try:
        info = json.loads((run_dir / "worker.exit").read_text())
        events.append(
            WorkerEvent(
                EXITED,
                host,
                float(info.get("at") or 0.0),
                info.get("pid"),
                info.get("exit_code"),
                info.get("signal"),
                info.get("signal_number"),
            )
        )
    except (OSError, ValueError, AttributeError):
        pass
    try:
        events.append(WorkerEvent(CLOCK, host, float((run_dir / "mark.clock").read_text())))
    except (OSError, ValueError):
        pass
    # Only the worker's main process records receipts (workloads/runtime/recorder.py "recv"); a worker
    # starts on the hold queue alone, so a receipt is a message of the run's queue.
    for frames in run_dir.glob(f"recv-*{FRAMES}"):
        try:
            stat = frames.stat()
        except OSError:
            continue
        if stat.st_size:
            events.append(WorkerEvent(CONSUMING, host, stat.st_mtime))
            break
    return events


def merge(*lists: list[WorkerEvent]) -> list[WorkerEvent]:
    """The events of all lists, each once (first seen kept), in order."""
    seen: dict[tuple, WorkerEvent] = {}
    for events in lists:
        for e in events:
            seen.setdefault(e.key, e)
    return list(seen.values())


def read(run_dir: Path) -> list[WorkerEvent]:
    """The events recorded in ``run_dir`` (none when the file is absent or being replaced)."""
    try:
        return [WorkerEvent.from_json(d) for d in json.loads((Path(run_dir) / EVENTS_FILE).read_text())]
    except (OSError, ValueError, TypeError):
        return []


def record(run_dir: Path, events: list[dict]) -> list[WorkerEvent]:
    """Add ``events`` (as JSON) to those of ``run_dir``, atomically; all of them now."""
    everything = merge(read(run_dir), [WorkerEvent.from_json(e) for e in events])
    write_atomic(Path(run_dir) / EVENTS_FILE, json.dumps([asdict(e) for e in everything], indent=1))
    return everything
