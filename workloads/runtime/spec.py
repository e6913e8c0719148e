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

from pydantic import ConfigDict, Field, create_model, field_validator

from cmx.workloads.vocab import kinds
from cmx.workloads.vocab.dimensions import ON_HOSTS, Dimension, owned_settings

# Celery settings that a dimension or the harness owns, with what to use instead. One table for
# both sides: the engine refuses them as ``celery.*`` dimensions (engine/model/celery_settings.py) and
# the app factory (workloads/app/factory.py) refuses a spec that carries one, so a ``celery.*`` value can
# never overwrite a dimension (the worker would run one value while ``runs`` records another).
# It lives here, not in the engine, because it ships to the hosts with the app factory.
# broker_transport_options is the user's (visibility_timeout...): the harness adds only the name its
# connections carry (client_name on Redis, client_properties.connection_name on AMQP: see
# workloads/app/factory.py name_clients), merged into the user's mapping, so the probes count the run's own
# clients. Those keys alone are refused (OWNED_KEYS), not the whole mapping: a user's name would
# be overwritten silently.
_CLIENT_NAME = (
    "set by the harness: every connection of a run carries the run's name, by which "
    "the sampler counts the run's own connections"
)
_FROM_INVENTORY = "set by the harness from the {} dimension and the inventory"
OWNED_SETTINGS: dict[str, str] = {
    **owned_settings(),  # worker_pool, worker_concurrency...: the dimensions' own (workloads/vocab/dimensions.py)
    # Where the broker and backend are, and their credentials: never in an experiment file.
    **{
        name: _FROM_INVENTORY.format("broker")
        for name in (
            "broker_url",
            "broker_read_url",
            "broker_write_url",
            "broker_transport",
            "broker_host",
            "broker_port",
            "broker_user",
            "broker_password",
            "broker_vhost",
        )
    },
    **{
        name: _FROM_INVENTORY.format("backend")
        for name in (
            "result_backend",
            "database_url",
            "redis_host",
            "redis_port",
            "redis_db",
            "redis_username",
            "redis_password",
        )
    },
    "task_ignore_result": "set by the harness from the backend dimension (backend none ignores results)",
    # Every run has its own queues, so runs and sweeps sharing a broker never see each other's tasks.
    "task_default_queue": "the harness gives every run its own queue",
    "task_queues": "the harness gives every run its own queues",
    "task_routes": "the harness routes every task of a run to the run's own queue",
    # The driver starts and watches the workers by remote control; the harness captures the logs.
    "worker_enable_remote_control": "the harness controls the workers by remote control",
    "broker_connection_retry_on_startup": "set by the harness",
    "worker_hijack_root_logger": "set by the harness (it captures the worker's log)",
    "worker_redirect_stdouts": "set by the harness (it captures the worker's log)",
}
#: Keys inside a mapping setting that the harness sets; the rest of the mapping is the user's.
OWNED_KEYS: dict[str, tuple[tuple[str, ...], ...]] = {
    "broker_transport_options": (
        ("client_name",),
        ("client_properties", "connection_name"),
        # A Sentinel set's master and password: from the inventory's URL.
        ("master_name",),
        ("sentinel_kwargs", "password"),
    ),
    "database_engine_options": (("connect_args", "application_name"),),
    # The run's result keys carry the run's prefix, by which the run's end removes them
    # (workloads/host/leftovers.py).
    "result_backend_transport_options": (("global_keyprefix",),),
}
_RUN_KEYS = "set by the harness: the run's result keys carry the run's prefix, by which its end removes them"


def owned_setting_problem(setting: str) -> str | None:
    """Why ``celery.<setting>`` may not be given (None when it may)."""
    reason = OWNED_SETTINGS.get(setting)
    return f"celery.{setting}: {reason}" if reason else None


def owned_key_problem(setting: str, value: Any) -> str | None:
    """Why ``value`` of ``celery.<setting>`` may not be given: it holds a key the harness sets."""
    for path in OWNED_KEYS.get(setting, ()):
        inner = value
        for key in path:
            if not isinstance(inner, dict) or key not in inner:
                break
            inner = inner[key]
        else:
            why = (
                _RUN_KEYS
                if setting == "result_backend_transport_options"
                else _FROM_INVENTORY.format("broker")
                if path[0] in ("master_name", "sentinel_kwargs")
                else _CLIENT_NAME
            )
            return f"celery.{setting}.{'.'.join(path)}: {why}"
    return None


#: Seconds beyond its timeout and warm-up that what a run left on its broker outlives it unused,
#: should its every process be killed (its end removes it): longer than any pause within a run.
QUEUE_EXPIRY_MARGIN_S = 300.0

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def _field(d: Dimension) -> tuple[Any, Any]:
    return (Literal[d.choices] if d.type == "choice" else d.python_type), d.default


#: One field per dimension the hosts need (``broker``, ``pool``, ``concurrency``...), typed from
#: the dimension registry: adding a dimension there adds it here.
_DimensionFields = create_model("_DimensionFields", __config__=_FROZEN, **{d.name: _field(d) for d in ON_HOSTS})


class RunSpec(_DimensionFields):
    """The run's spec; its dimension fields (``spec.pool``...) come from ``_DimensionFields``."""

    model_config = _FROZEN

    run_id: str
    experiment: str
    cell_id: str
    repeat: int
    workload: str
    params: dict[str, Any] = Field(default_factory=dict)
    celery: dict[str, Any] = Field(default_factory=dict)

    #: Worker switches turned on (``worker.gossip``, ``worker.mingle``, ``worker.heartbeat``,
    #: ``worker.events``); all are off unless a cell says otherwise.
    worker_flags: dict[str, bool] = Field(default_factory=dict)
    #: ``package.NAME`` values of the cell: {package: version spec} the worker and the driver
    #: must import (each checks what it runs against them); empty: the base venv's versions.
    packages: dict[str, str] = Field(default_factory=dict)
    #: The host environment (``envs/<name>`` of the work dir) of the cell's version set, in which
    #: the worker and the driver run; None: the base venv.
    python_env: str | None = None
    #: Celery node names of the workers of this run (``cmx@<inventory name>``), one per host.
    worker_nodes: list[str] = Field(default_factory=list)
    #: The hosts that publish the run's tasks (the ``drivers`` dimension: the first N of group
    #: ``drivers``), the first leading: it starts the workers consuming once every driver is ready.
    driver_hosts: list[str] = Field(default_factory=list)
    warmup_s: float = 0.0
    run_timeout_s: float = 600.0
    #: Seconds the driver waits for every worker to answer a ping before giving up.
    worker_start_timeout_s: float = 60.0
    #: URL of the workload's service for this run (``Workload.service_module``), if it has one.
    service_url: str | None = None
    #: Seconds what the run left on its broker outlives it unused, for what no process is left to
    #: remove (killed hosts): RabbitMQ's ``x-expires`` on its queues, a TTL on its Redis keys
    #: (workloads/host/leftovers.py); None: never.
    queue_expires_s: float | None = None
    #: A fault run (``fault`` not none) ends once this long passed without a task finishing
    #: (``limits.settle``); a killed or stopped worker's replacement starts ``fault_restart_s``
    #: after it exited (``limits.fault_restart``).
    settle_s: float = 10.0
    fault_restart_s: float = 1.0
    #: The workload's own queues beside the run's (``Workload.queues``: replay's recorded ones),
    #: as suffixes: each is consumed from the worker's start as ``<queue>.<suffix>`` (nothing is
    #: published to one before the clock starts) and removed with the run's queues.
    extra_queues: list[str] = Field(default_factory=list)

    @property
    def faults(self) -> tuple:
        """The run's faults (workloads/faults/ ``Fault``), in time order; () for none."""
        from cmx.workloads.faults import parse

        return parse(self.fault)

    @field_validator("celery")
    @classmethod
    def _no_owned_settings(cls, value: dict[str, Any]) -> dict[str, Any]:
        problems = [p for k in sorted(value) if (p := owned_setting_problem(k) or owned_key_problem(k, value[k]))]
        if problems:
            raise ValueError("; ".join(problems))
        return value

    # Queues and node names are per run: two sweeps sharing a broker (or a test beside a user's
    # sweep) never consume, purge or ping each other's.
    @property
    def queue(self) -> str:
        """The run's task queue."""
        return f"cmx.{self.run_id}"

    @property
    def workload_queues(self) -> tuple[str, ...]:
        """The workload's own queues of this run (:attr:`extra_queues` under the run's name)."""
        return tuple(f"{self.queue}.{suffix}" for suffix in self.extra_queues)

    @property
    def hold_queue(self) -> str:
        """Workers start consuming only this queue, which nothing is published to; the driver
        then adds :attr:`queue` by remote control. Worker start-up is thus never inside a
        measurement, and ``backlog`` mode can publish everything before any worker consumes."""
        return f"cmx.{self.run_id}.hold"

    @property
    def raw_queue(self) -> str:
        """The raw baseline's queue (workloads/catalog/throughput_raw.py)."""
        return f"cmx.{self.run_id}.raw"

    @property
    def drivers_queues(self) -> tuple[str, str]:
        """Where the drivers of a run of several meet (workloads/drive/drivers.py): each says
        it is ready on the first; the leading driver answers on the second when the clock started."""
        return f"cmx.{self.run_id}.drivers.ready", f"cmx.{self.run_id}.drivers.go"

    @property
    def key_prefix(self) -> str:
        """What every queue, exchange and result key of the run starts with (so its end finds them)."""
        return f"cmx.{self.run_id}"

    def queue_arguments(self) -> dict[str, Any]:
        """The run's queues' arguments: its broker kind's (quorum queues, say) and ``x-expires``
        where the server expires queues itself. Every declarer of the run's queues reads this: a
        redeclaration with other arguments fails."""
        from cmx.workloads.servers import registry as servers  # not at import: every process reads a spec

        kind = kinds.BROKERS[self.broker]
        args = {**kind.queue_arguments, **kinds.queue_type_arguments(self.broker, self.queue_type, self.delivery_limit)}
        if self.queue_expires_s and servers.get(kind.service).expires_queues:
            args["x-expires"] = int(self.queue_expires_s * 1000)
        return args

    @classmethod
    def load(cls, run_dir: Path) -> "RunSpec":
        return cls.model_validate(json.loads((Path(run_dir) / "spec.json").read_text()))

    def dump(self) -> str:
        return self.model_dump_json(indent=2)


def node_name(run_id: str, host: str) -> str:
    """The Celery node name of the run's worker on ``host`` (its inventory name, never the kernel's)."""
    return f"cmx-{run_id}@{host}"


def worker_client_name(run_id: str) -> str:
    """The Redis client name of the run's workers' broker connections (one naming rule for the
    connection probes and the driver's wake-up: workloads/vocab/clientname.py)."""
    from cmx.workloads.vocab.clientname import client_name

    return client_name(run_id, "worker", "broker")


def python_for(spec: "RunSpec", run_dir: Path) -> str:
    """The Python the run's worker and driver run in: the cell's version set's environment, or
    this process's own (the base venv). ``run_dir`` is ``<work dir>/runs/<run_id>``."""
    import sys

    if not spec.python_env:
        return sys.executable
    return str(Path(run_dir).absolute().parent.parent / "envs" / spec.python_env / "bin" / "python")


def run_dir_from_env() -> Path:
    return Path(os.environ["CMX_RUN_DIR"])


def host_from_env() -> str:
    return os.environ["CMX_HOST"]
