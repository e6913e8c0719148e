"""The run spec: everything a host needs to play its part in one run, written as ``spec.json``.

The engine writes it; workers, the driver and the sampler read it. Secrets are not in it: broker
and backend URLs reach host processes through the environment (``CMX_BROKER_URL``,
``CMX_BACKEND_URL``), set by Ansible tasks that are not logged.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field



class RunSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    run_id: str
    experiment: str
    cell_id: str
    repeat: int
    workload: str
    params: dict[str, Any] = Field(default_factory=dict)
    broker: Literal["redis", "rabbitmq", "rabbitmq-quorum"] = "redis"
    backend: Literal["none", "redis", "rpc", "postgres"] = "none"
    pool: Literal["prefork", "threads", "gevent", "eventlet", "solo"] = "prefork"
    concurrency: int = 1
    prefetch_multiplier: int = 4
    heartbeat: float = 120.0
    celery: dict[str, Any] = Field(default_factory=dict)
    #: Worker switches turned on (``worker.gossip``, ``worker.mingle``, ``worker.heartbeat``,
    #: ``worker.events``); all are off unless a cell says otherwise.
    worker_flags: dict[str, bool] = Field(default_factory=dict)
    #: Celery node names of the workers of this run (``cmx@<inventory name>``), one per host.
    worker_nodes: list[str] = Field(default_factory=list)
    warmup_s: float = 0.0
    run_timeout_s: float = 600.0
    #: Seconds the driver waits for every worker to answer a ping before giving up.
    worker_start_timeout_s: float = 60.0
    #: URL of the workload's service for this run (``Workload.service_module``), if it has one.
    service_url: str | None = None

    # Queues and node names are per run: two sweeps sharing a broker (or a test beside a user's
    # sweep) never consume, purge or ping each other's.
    @property
    def queue(self) -> str:
        """The run's task queue."""
        return f"cmx.{self.run_id}"

    @property
    def hold_queue(self) -> str:
        """Workers start consuming only this queue, which nothing is published to; the driver
        then adds :attr:`queue` by remote control. Worker start-up is thus never inside a
        measurement, and ``backlog`` mode can publish everything before any worker consumes."""
        return f"cmx.{self.run_id}.hold"

    @classmethod
    def load(cls, run_dir: Path) -> "RunSpec":
        return cls.model_validate(json.loads((Path(run_dir) / "spec.json").read_text()))

    def dump(self) -> str:
        return self.model_dump_json(indent=2)


def node_name(run_id: str, host: str) -> str:
    """The Celery node name of the run's worker on ``host`` (its inventory name, never the kernel's)."""
    return f"cmx-{run_id}@{host}"


def worker_client_name(run_id: str) -> str:
    """The Redis client name of the run's workers' broker connections."""
    return f"cmx-{run_id}-worker"


def run_dir_from_env() -> Path:
    return Path(os.environ["CMX_RUN_DIR"])


def host_from_env() -> str:
    return os.environ["CMX_HOST"]
