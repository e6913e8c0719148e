"""What a workload is: a params schema, the Celery tasks it registers, and the driver that runs it."""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from cmx.workloads.drive import DriveTimeout
from cmx.workloads.vocab import metrics as M

__all__ = ["DriveTimeout", "Workload", "WorkloadParams"]  # DriveTimeout: where workloads import it from

if TYPE_CHECKING:  # pragma: no cover
    from celery import Celery

    from cmx.workloads.drive.context import DriveContext


class WorkloadParams(BaseModel):
    """Base of every workload's params: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Workload(abc.ABC):
    """A registered benchmark. Subclasses set ``name`` and ``Params`` and implement both hooks.

    ``register_tasks`` runs in every process that loads the Celery app (workers and driver);
    ``drive`` runs once per run, in the driver process on the ``drivers`` host.
    """

    name: ClassVar[str]
    Params: ClassVar[type[WorkloadParams]]
    #: Whether the workload needs a result backend (chords, groups waited on).
    needs_backend: ClassVar[bool] = False
    #: A module run as ``python -m MODULE --port PORT`` on the first ``services`` host for each run
    #: (an HTTP service the tasks call, say); its URL reaches tasks and driver as ``spec.service_url``.
    service_module: ClassVar[str | None] = None
    #: Whether tasks and driver need the database of the ``services`` host (``database_url``),
    #: given to them as the environment variable ``CMX_DATABASE_URL``.
    needs_database: ClassVar[bool] = False
    #: The metrics the end-of-sweep summary shows for this workload (median over repeats).
    headline_metrics: ClassVar[tuple[str, ...]] = (M.MAKESPAN_S, M.CONSUME_RATE, M.PEAK_PSS_BYTES, M.PEAK_RSS_BYTES)
    #: What ``cmx recommend`` and the report's "Which configuration?" rank cells on by default: a
    #: metric, in the direction the metric registry calls better (an experiment's ``objective:`` wins).
    objective: ClassVar[str] = M.CONSUME_RATE
    #: ``cmx run --smoke``: caps on the params (a number is lowered to at most this), so each
    #: cell runs once at a tiny size.
    smoke_params: ClassVar[dict[str, Any]] = {}
    #: Whether the ``drivers`` dimension can split the publishing over several hosts (each sends
    #: its share of the tasks, or of the rate); :meth:`split_problem` says why not for given params.
    splits: ClassVar[bool] = False
    #: Packages the workload's own code needs on the hosts beyond the harness's
    #: (engine/hosts/host-requirements.txt), pinned at the controller's versions.
    host_requirements: ClassVar[tuple[str, ...]] = ()

    def split_problem(self, params: WorkloadParams) -> str | None:
        """Why this workload with these params cannot be published by several drivers, or None."""
        if not self.splits:
            return (
                f"workload '{self.name}' has one driver that cannot be split (it waits on its own "
                "results or paces one request at a time): use drivers: 1"
            )
        return None

    def queues(self, params: WorkloadParams, folder) -> tuple[str, ...]:
        """The workload's own queues beside the run's, as suffixes (``RunSpec.extra_queues``),
        found on the controller; ``folder``: the experiment's."""
        return ()

    def headline(self, params: WorkloadParams) -> tuple[str, ...]:
        """The summary's metrics for a cell with these params (a workload whose measures depend
        on its mode narrows them here)."""
        return self.headline_metrics

    def setup(self, params: WorkloadParams) -> "Celery | None":
        """Called first in every process that builds the run's app (workers and driver), with the
        run's params. Returns the user's own Celery app to run instead of cmx's, or None."""
        return None

    @abc.abstractmethod
    def register_tasks(self, app: "Celery") -> None:
        """Define the workload's tasks on ``app``."""

    @abc.abstractmethod
    def drive(self, ctx: "DriveContext", params: WorkloadParams) -> None:
        """Publish the workload's tasks and wait for them (raising DriveTimeout past the deadline)."""
