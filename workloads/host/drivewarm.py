"""``python -m cmx.workloads.host.drivewarm MODULE``: a driver module, imported ahead of its start.

The agent of the driver host starts this while the run's workers start (the driver's imports take
most of a second: Celery, kombu, every workload), then writes ``go`` on its stdin once every host
has begun, and ``MODULE.main([])`` runs exactly as ``python -m MODULE`` would have then. If its
stdin ends first (the run was stopped, the agent is gone), it exits without doing anything.
"""
from __future__ import annotations

import importlib
import sys


def main(argv: list[str]) -> int:
    module = importlib.import_module(argv[0])  # the slow part, done while the workers start
    if sys.stdin.readline().strip() != "go":
        return 0
    return module.main([])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
