"""``kill_child@T``: SIGKILL one prefork pool child of the run's worker that is running a task (a
child marks the task it runs in ``busy.<pid>`` in fault cells: workloads/runtime/instrument.py); none
within :data:`BUSY_CHILD_WAIT_S`: the fault fails, saying so. Refused at validation for a pool
whose children are not processes."""

from __future__ import annotations

import os
import signal

from cmx.workloads.vocab import pools

from .base import WORKER, CellView, FaultKind, Injection

#: The pools whose children are processes the harness can kill one of.
CHILD_POOLS = (pools.PREFORK,)
#: Seconds it waits for a pool child that runs a task before the run fails saying so.
BUSY_CHILD_WAIT_S = 5.0


class KillChild(FaultKind):
    name = "kill_child"
    strikes = WORKER
    does = "SIGKILL one prefork pool child that is running a task of the run"

    def check(self, fault, cell: CellView) -> str | None:
        pool = cell.values.get("pool")
        if pool not in CHILD_POOLS:
            return (
                f"fault {fault.text()}: {self.name} kills a pool child process, which only the "
                f"{', '.join(CHILD_POOLS)} pool has (this cell's pool is {pool})"
            )
        return None

    def inject(self, fault, host: Injection) -> None:
        pid, task_id = host.busy_child(host.worker(), BUSY_CHILD_WAIT_S)
        host.strike(pid=pid, task_id=task_id)
        os.kill(pid, signal.SIGKILL)
