"""``kill_worker@T[:N]``: SIGKILL the run's worker's main process; once it and its supervisor are
gone, after ``limits.fault_restart``, a replacement worker of the same node name starts consuming
the run's queue (as systemd restarts a unit). :class:`EndsWorker` is that sequence, which
term_worker.py sends another signal with."""

from __future__ import annotations

import os
import signal

from .base import WORKER, FaultFailed, FaultKind, Injection


class EndsWorker(FaultKind):
    """A kind that ends the worker's main process by :attr:`signal`, then starts its replacement."""

    strikes = WORKER
    ends_worker = True
    signal: int = signal.SIGKILL

    def inject(self, fault, host: Injection) -> None:
        worker = host.worker()
        supervisor = host.supervisor()
        host.strike(pid=worker)
        os.kill(worker, self.signal)
        # A warm shutdown lasts as long as the tasks it waits for: the run's own bound holds it.
        host.wait_gone(worker, host.shutdown_timeout, "worker")
        host.wait_supervisor(supervisor)
        host.sleep(host.restart_s)
        if host.start_worker():
            raise FaultFailed("its replacement worker did not start (see begin.log and worker.log)")


class KillWorker(EndsWorker):
    name = "kill_worker"
    does = "SIGKILL the worker's main process; a replacement starts after limits.fault_restart"
    signal = signal.SIGKILL
