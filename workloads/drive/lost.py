"""Tasks lost before the queue: the driver's wait ends when the rest can never come.

A run waits for its tasks to finish until ``run_timeout``. Two things tell it sooner that some never
will (issue 42: a classic-queue run whose worker ran 19,979 of 20,000 tasks waited its whole 600 s
with the queue empty):

- the broker said so: a message it returned unroutable (``basic.return`` of a ``mandatory``
  publish, workloads/servers/rabbitmq.py) was in no queue, so the wait is for the others only;
- nothing is left anywhere: the run's queue is empty, every worker answers and holds no task of
  the run (received and not finished, ``cmx_progress``'s ``held``), and no task finished for
  :data:`LOST_AFTER_S`. Only with one driver: another driver may not have published yet.

Either ends the run as failed with :class:`~cmx.workloads.drive.TasksLost` naming the count. The
second reads the workers' own counts, so it is only as right as they are: Celery's count of
accepted tasks lost increments under the threads pool (workloads/runtime/acceptcount.py, the
cause of that 600 s run: its tasks had all run). What ran is stored from the tasks' own records
either way (``tasks_lost`` counts the unexecuted ones, whatever the driver concluded).
"""

from __future__ import annotations

#: How long completions must have stopped, with the run's queue empty and no worker holding a task
#: of the run, before the tasks still missing are taken for lost before the queue. Longer than a
#: delivery takes or a control reply is late; far shorter than any ``run_timeout``.
LOST_AFTER_S = 10.0


class Vanished:
    """Watches the progress samples of a run's wait; says why the missing tasks are lost once
    nothing is left of them anywhere for ``after_s``."""

    def __init__(self, workers: int, alone: bool, after_s: float = LOST_AFTER_S):
        self.workers, self.alone, self.after_s = workers, alone, after_s
        self.done: int | None = None
        self.quiet_since: float | None = None

    def check(self, now: float, done: int, held: int, answered: int, depth: int | None) -> str | None:
        """One sample: ``done`` tasks finished, ``held`` in the workers' hands (of ``answered``
        workers), ``depth`` messages ready in the run's queue (None: not known). The reason the
        rest is lost, or None while it may yet come."""
        quiet = self.alone and depth == 0 and held == 0 and answered >= self.workers
        if not quiet or done != self.done:
            self.done, self.quiet_since = done, (now if quiet else None)
            return None
        if self.quiet_since is None:
            self.quiet_since = now
        if now - self.quiet_since < self.after_s:
            return None
        return (
            f"no worker counted them: the run's queue is empty, no worker holds a task of the run, and "
            f"none finished for {self.after_s:g}s"
        )
