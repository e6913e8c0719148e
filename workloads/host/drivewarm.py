"""``python -m cmx.workloads.host.drivewarm MODULE``: a driver module, imported ahead of its start.

The agent of the driver host starts this while the run's workers start (the driver's imports take
most of a second: Celery, kombu, every workload), then writes ``go`` on its stdin once every host
has begun, and ``MODULE.main([])`` runs exactly as ``python -m MODULE`` would have then. What the
module imports only once it runs (the run's broker transport and result backend: redis-py alone
is a quarter of a second) its ``warm()`` imports now, where it has one. If its stdin ends first
(the run was stopped, the agent is gone), it exits without doing anything.

A worker starting on the same host is the run's critical path (its start is nearly all imports, as
this is), so the warm-up yields the CPU to it: it runs at a lower priority until ``go`` and gets its
own back then, before the driver does anything the run measures. Only where the process may raise
its priority again (CAP_SYS_NICE, as root); elsewhere nothing changes.
"""

from __future__ import annotations

import importlib
import os
import sys

#: How much lower the warm-up runs (nice steps) where it can get its priority back.
YIELD_NICE = 10
CAP_SYS_NICE = 23


def may_raise_priority() -> bool:
    """Whether this process may lower its nice value again (CAP_SYS_NICE in its effective set)."""
    try:
        with open("/proc/self/status") as f:
            caps = next(line.split()[1] for line in f if line.startswith("CapEff:"))
        return bool(int(caps, 16) >> CAP_SYS_NICE & 1)
    except (OSError, StopIteration, ValueError, IndexError):
        return False


def main(argv: list[str]) -> int:
    own = os.getpriority(os.PRIO_PROCESS, 0)
    lowered = may_raise_priority()
    if lowered:
        os.setpriority(os.PRIO_PROCESS, 0, min(own + YIELD_NICE, 19))
    module = importlib.import_module(argv[0])  # the slow part, done while the workers start
    try:
        getattr(module, "warm", lambda: None)()
    except Exception:  # main, once told to go, meets the same problem and says so in driver.json
        pass
    if sys.stdin.readline().strip() != "go":
        return 0
    if lowered:  # every thread (Linux's nice is a thread's): the driver's start from their own again
        import threading

        for thread in threading.enumerate():
            os.setpriority(os.PRIO_PROCESS, thread.native_id, own)
    return module.main([])


if __name__ == "__main__":
    from cmx.workloads.runtime.quickexit import exit_now

    exit_now(main(sys.argv[1:]))  # as the driver's own: workloads/runtime/quickexit.py
