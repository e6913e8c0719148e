"""cmx.workloads.drive: the driver's room (publishing, pacing, waiting for workers).

:class:`DriveTimeout` lives here, where the drive raises it; workloads import it from
cmx.workloads.base as before."""
from __future__ import annotations


class DriveTimeout(Exception):
    """The run passed ``limits.run_timeout`` (a workload's ``drive`` raises it past ``ctx.deadline``)."""
