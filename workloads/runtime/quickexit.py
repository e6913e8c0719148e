"""Leave a process of the run now that its work is done, without the interpreter's finalization.

Once Python has run its exit functions (every ``atexit`` hook: Celery's, logging's, billiard's, the
recorder's last flush) a process still tears down every module and object it holds, one by one:
for a worker that imported Celery, kombu and a workload that is a few hundred milliseconds of CPU,
and several seconds on a loaded machine (5 s measured at a load of 24 on 2 cores, a thread dump
showing no Python frame), all of it inside the run's stop, which waits until the process is gone.
Nothing the run measures or keeps is made there: every file cmx writes is closed by then (atomic
writes, frames appended under ``with``). So these processes run their exit functions themselves,
flush the standard streams and end with ``os._exit`` and the code they would have ended with.

Standard library only: the worker, the supervisor, the sampler and the driver import it.
"""

from __future__ import annotations

import atexit
import os
import sys


def exit_now(code: int) -> None:
    """Run every exit function still registered, flush stdout and stderr, and end the process
    with ``code`` (never returns)."""
    atexit._run_exitfuncs()  # os._exit below: Python never reaches its own run of them
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:  # closed, or a logging proxy without a buffer
            pass
    os._exit(code)


def at_exit(code) -> None:
    """Register :func:`exit_now` as the last word of this process: registered last, it runs first
    among the exit functions, runs the others itself, and ends the process with ``code()``
    (evaluated then). When another exit function was registered after it (which Python has run by
    then), or in a child forked later, the process leaves as it would have: no function runs twice."""
    pid = os.getpid()

    def hook() -> None:
        if os.getpid() == pid and atexit._ncallbacks() == registered:
            atexit.unregister(hook)
            exit_now(code())

    atexit.register(hook)
    registered = atexit._ncallbacks()
