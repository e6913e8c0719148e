"""``python -m cmx.workloads.host.drivewarm MODULE``: a driver module, imported ahead of its start.

The agent of the driver host starts this while the run's workers start (the driver's imports take
most of a second: Celery, kombu, every workload), then writes ``go`` on its stdin once every host
has begun, and ``MODULE.main([])`` runs exactly as ``python -m MODULE`` would have then. What the
module imports only once it runs (the run's broker transport and result backend: redis-py alone
is a quarter of a second) its ``warm()`` imports now, where it has one. If its stdin ends first
(the run was stopped, the agent is gone), it exits without doing anything.
"""
from __future__ import annotations

import importlib
import sys


def main(argv: list[str]) -> int:
    module = importlib.import_module(argv[0])  # the slow part, done while the workers start
    try:
        getattr(module, "warm", lambda: None)()
    except Exception:  # main, once told to go, meets the same problem and says so in driver.json
        pass
    if sys.stdin.readline().strip() != "go":
        return 0
    return module.main([])


if __name__ == "__main__":
    from cmx.workloads.quickexit import exit_now

    exit_now(main(sys.argv[1:]))  # as the driver's own: workloads/quickexit.py
