"""What ran where, read back after ingest: a run whose work did not reach every host it placed a
worker on failed, whatever its driver said.

``machines: 8`` must mean work on eight hosts. A worker host that completed none of the run's
tasks (it consumed nothing: it never added the run's queue, or the others drained it first) makes
the run's figures those of fewer machines than the cell says, so the run fails naming the host
(``host_tasks``, stored by engine/results/ingest_workers.py). Failed tasks fail the run too, saying
which (workloads/runtime/failures.py).
"""

from __future__ import annotations

from pathlib import Path

from cmx.engine.run.runstatus import RunStatus
from cmx.workloads.runtime.failures import failure_error
from cmx.workloads.vocab import metrics as M


def idle_hosts(con, run_id: str) -> tuple[list[str], int]:
    """The run's worker hosts that completed no task, and how many tasks all of them completed."""
    rows = con.execute(
        "SELECT host, tasks_completed FROM host_tasks WHERE run_id = ? ORDER BY host", [run_id]
    ).fetchall()
    return [h for h, n in rows if not n], sum(n or 0 for _, n in rows)


def verdict(
    con, run_id: str, status: RunStatus, error: str | None, metrics: dict, art_dir: Path, faulted: bool = False
) -> tuple[RunStatus, str | None]:
    """The run's status once what ran is known: failed tasks, or a worker host with none done.
    In a fault cell failed tasks are a finding (like lost and duplicated ones), not a failure."""
    if status is not RunStatus.OK:
        return status, error
    if metrics.get(M.TASKS_FAILED) and not faulted:
        return RunStatus.FAILED, failure_error(art_dir, metrics[M.TASKS_FAILED])
    idle, done = idle_hosts(con, run_id)
    if idle and done:
        return RunStatus.FAILED, (
            f"worker host{'s' if len(idle) > 1 else ''} {', '.join(idle)} completed none of "
            f"the run's {done} tasks: the run did not run on the machines its cell says"
        )
    return status, error
