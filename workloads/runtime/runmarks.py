"""A run's marks: the moments every watched process's PSS is read, whatever the sampler's schedule.

PSS is costly to read, so the sampler reads it only every few ticks (workloads/host/pss.py): a run
shorter than that spacing may get its only PSS reading as the worker's interpreter starts, outside
the work it measures. So the driver marks when the workload's clock starts (``clock``) and when its
work drained (``drain``), on its host and, by the ``cmx_mark`` control command
(workloads/runtime/instrument.py), on every worker's host: a mark is a file in the run dir and a signal to
the host's sampler, which reads PSS of every process it watches at once and writes down when
(``sample_marks.csv``, then the ``sample_marks`` table). A peak PSS is taken only from readings
between a host's two marks (engine/results/sql/metrics.sql); without them it is not sampled (NULL).

Standard library only: the workers, the driver and the sampler all import it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

MARKS = ("clock", "drain")
#: What wakes the sampler for a mark (it also looks for mark files at every tick). Ignored by
#: default, unlike SIGUSR1: a sampler still starting (its pid file is written at spawn) lives on.
SIGNAL = signal.SIGWINCH
MARKS_HEADER = ("host", "name", "ts")


def mark_file(run_dir: Path, name: str) -> Path:
    return Path(run_dir) / f"mark.{name}"


def sampled_file(run_dir: Path, name: str) -> Path:
    """Written by the sampler once it read PSS for the mark."""
    return Path(run_dir) / f"mark.{name}.sampled"


def mark(run_dir: Path, name: str, wait_s: float = 0.0) -> bool:
    """Mark ``name`` on this host (once: a second mark of the same name changes nothing) and wake
    its sampler; wait up to ``wait_s`` for its PSS reading. True once the reading is taken."""
    if name not in MARKS:
        raise ValueError(f"unknown mark {name!r}")
    path = mark_file(run_dir, name)
    if not path.exists():
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        tmp.write_text(f"{time.time()!r}\n")
        os.replace(tmp, path)
    try:
        os.kill(int((Path(run_dir) / "sampler.pid").read_text().strip()), SIGNAL)
    except (OSError, ValueError):  # no sampler (yet, or any more): it looks for the file at its next tick
        pass
    deadline = time.monotonic() + wait_s
    while not sampled_file(run_dir, name).exists():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.005)
    return True


#: Written by the host's stop of the run (workloads/host/hostctl.py ``stop``) before it TERMs the
#: run's processes. A worker that finds it ends its waits at once (workloads/app/workerstop.py); a TERM
#: without it (a fault's ``term_worker``, a user's kill) gets Celery's own warm shutdown, untouched,
#: as that is what the fault measures.
STOP_ASKED = "stop.asked"


def stop_asked(run_dir: Path | str | None) -> bool:
    """Whether the run's stop has begun on this host (:data:`STOP_ASKED` is in ``run_dir``)."""
    return run_dir is not None and (Path(run_dir) / STOP_ASKED).exists()
