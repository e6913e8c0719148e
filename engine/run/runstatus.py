"""The run's status, decided from typed outcomes only (never from the words of a message).

``ok``, ``failed``, ``timeout`` (the run passed ``limits.run_timeout``: the driver's own deadline,
or the drive step's own bound, engine/run/runsteps.py) and ``interrupted`` (Ctrl-C or SIGTERM of ``cmx run``) are
stored; ``running`` and ``abandoned`` are what ``cmx status`` says of a run without an end,
depending on whether the sweep that started it is still alive.
"""

from __future__ import annotations

import enum

from cmx.engine.hosts.outcome import Outcome


class RunStatus(str, enum.Enum):
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


#: What ``cmx status`` shows for a run that has no end recorded.
RUNNING, ABANDONED = "running", "abandoned"


#: The step that runs the driver (runsteps.DRIVE_TASK; its bound is the run's outer bound).
DRIVE_TASK = "Run the driver"


def decide(
    *,
    interrupted: bool,
    started: Outcome,
    stopped: Outcome,
    driver: dict,
    ingest_error: str | None,
    run_timeout_s: float,
) -> tuple[RunStatus, str | None]:
    """The status and error of a run, from the typed outcome of each of its steps."""
    if interrupted:
        return RunStatus.INTERRUPTED, "interrupted (Ctrl-C or SIGTERM); its processes were stopped on every host"
    drive_timed_out = any(f.timed_out and f.task.startswith(DRIVE_TASK) for f in started.failures)
    if driver.get("status") == "timeout" or started.status == "timeout" or drive_timed_out:
        return RunStatus.TIMEOUT, driver.get("error") or f"run_timeout of {run_timeout_s:g}s passed"
    if not started.ok:
        return RunStatus.FAILED, started.summary()
    if driver.get("status") != "ok":
        return RunStatus.FAILED, driver.get("error") or "the driver wrote no result (see driver.log)"
    if ingest_error:
        return RunStatus.FAILED, ingest_error
    if not stopped.ok:
        return RunStatus.FAILED, "stopping or collecting failed: " + stopped.summary()
    return RunStatus.OK, None


def controller_identity() -> tuple[str, int, float]:
    """This process as a sweep's controller: (host name, pid, the pid's start time)."""
    import os
    import socket

    import psutil

    return socket.gethostname(), os.getpid(), psutil.Process().create_time()


def controller_alive(hostname: str | None, pid: int | None, pid_started: float | None) -> bool:
    """Whether the sweep's controller still runs. Only a controller of this machine can be seen:
    one elsewhere (a database copied here) counts as gone. The start time tells a reused pid apart."""
    import socket

    import psutil

    if hostname != socket.gethostname() or pid is None:
        return False
    try:
        return abs(psutil.Process(pid).create_time() - (pid_started or 0)) < 1.0
    except psutil.Error:
        return False


def open_status(alive: bool) -> str:
    """What ``cmx status`` calls a run without an end."""
    return RUNNING if alive else ABANDONED
