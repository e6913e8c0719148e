"""Code shipped to every host: the Celery app factory, instrumentation, sampler, driver and workloads.

Importing this package has no side effects (no monkey-patching, no broker connection): the
controller imports it to validate workload params; hosts run its entry points
(``python -m cmx.workloads.host.agent``, ``python -m cmx.workloads.host.hostcli ...``).

A user's own workload class imports ``Workload`` and ``WorkloadParams`` from
``cmx.workloads.catalog.base``; ``cmx.workloads.base``, where earlier releases documented them, is
still that module (:data:`MOVED`, imported only when asked for), so a user's file keeps working.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

#: Old import names of modules that users' files import, and where each lives now.
MOVED = {"cmx.workloads.base": "cmx.workloads.catalog.base"}


class _Moved(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old name in :data:`MOVED` as the module it names now (the same module object)."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in MOVED else None

    def create_module(self, spec):
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module):
        pass  # already executed under its own name


if not any(isinstance(f, _Moved) for f in sys.meta_path):
    sys.meta_path.append(_Moved())
