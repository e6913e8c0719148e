"""The built-in dimensions: one entry each, and everything that knows dimensions reads this table.

Like Celery's own settings table (``celery/app/defaults.py``): a dimension is declared once, with
its type, choices, default and how its value reaches the worker; from that entry the experiment
checks validate it (engine/model/dimensions.py), the JSON Schema types it (engine/model/schema.py),
expansion gives every cell its default (engine/model/cells.py), the results database orders its
``runs`` column (engine/results/db.py), the run spec carries it to the hosts (workloads/runtime/spec.py),
and the worker gets it on its command line (:func:`worker_argv`, read by ``hostctl start-worker``)
or in its configuration (:func:`worker_config`, read by the app factory). Adding a dimension is
one entry in :data:`DIMENSIONS` (and, for one that reaches the worker, what the worker reports it
runs with, in workloads/runtime/effective.py: a run fails loudly when the two differ).

It ships to the hosts with the app factory, so it imports nothing from the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from cmx.workloads import faults

from cmx.workloads.vocab import kinds
from cmx.workloads.vocab.packages import PACKAGES
from cmx.workloads.vocab import pools, queues
from cmx.workloads.vocab.services import REDIS

#: How a cell's value of a dimension reaches the run:
#:  ``argv``    a switch on the worker's command line (:attr:`Dimension.argv`)
#:  ``config``  a Celery setting the app factory sets (:attr:`Dimension.setting`)
#:  ``url``     picks the broker or backend the inventory names (the app reads its URL from the
#:              environment: CMX_BROKER_URL, CMX_BACKEND_URL)
#:  ``hosts``   how many hosts of group ``workers`` run a worker, or of ``drivers`` publish (never
#:              sent to a host as such: the run spec names the hosts)
#:  ``harness`` read by the harness on the hosts (the run spec carries it; the worker's config never)
Reach = Literal["argv", "config", "url", "hosts", "harness"]


@dataclass(frozen=True)
class Dimension:
    """One built-in dimension. ``type``: ``choice`` (one of ``choices``), ``integer`` (at least
    ``minimum``, at most ``maximum``), ``seconds`` (a number >= ``minimum``, 0 = off) or ``fault``
    (``none`` or ``KIND@TIME[+KIND@TIME]``: workloads/faults/)."""

    name: str
    type: Literal["choice", "integer", "seconds", "fault"]
    default: Any
    reaches: Reach
    description: str
    choices: tuple[str, ...] = ()
    minimum: float = 0
    #: The largest value cmx can run (engine/limits.py reads it); None: no bound of its own.
    maximum: float | None = None
    #: The worker switch that takes the value (``reaches == "argv"``).
    argv: str | None = None
    #: The Celery setting the dimension owns: set from it, and refused as a ``celery.*`` dimension.
    setting: str | None = None
    #: Said after "use the NAME dimension" when a file sets :attr:`setting` as ``celery.*``.
    hint: str = ""
    #: A dimension added after cells had ids: at its default it is left out of the cell id, so a
    #: cell of an older database keeps its id (and resumes) where the file does not set it.
    quiet_default: bool = False

    @property
    def python_type(self) -> type:
        return {"choice": str, "integer": int, "seconds": float, "fault": str}[self.type]


DIMENSIONS: tuple[Dimension, ...] = (
    Dimension(
        "broker",
        "choice",
        REDIS,
        "url",
        "the message broker the run uses (from the inventory)",
        choices=tuple(kinds.BROKERS),
    ),
    Dimension(
        "backend",
        "choice",
        "none",
        "url",
        "the result backend (none: results are ignored)",
        choices=tuple(kinds.BACKENDS),
    ),
    Dimension(
        "pool",
        "choice",
        pools.PREFORK,
        "argv",
        "the worker's execution pool",
        choices=pools.POOLS,
        argv="-P",
        setting="worker_pool",
    ),
    Dimension(
        "concurrency",
        "integer",
        1,
        "argv",
        "the pool's size (processes, threads or greenlets)",
        minimum=1,
        maximum=10_000,
        argv="-c",
        setting="worker_concurrency",
    ),
    Dimension(
        "prefetch_multiplier",
        "integer",
        4,
        "config",
        "messages a worker reserves per pool slot",
        minimum=0,
        maximum=10_000,
        setting="worker_prefetch_multiplier",
    ),
    Dimension(
        "heartbeat",
        "seconds",
        120.0,
        "config",
        "the broker heartbeat in seconds (0 = off)",
        setting="broker_heartbeat",
        hint="seconds, 0 = off",
    ),
    Dimension(
        "machines",
        "integer",
        1,
        "hosts",
        "how many hosts of group workers run a worker (the first N)",
        minimum=1,
        maximum=1_000,
    ),
    Dimension(
        "drivers",
        "integer",
        1,
        "hosts",
        "how many hosts of group drivers publish the workload's tasks (the first N; each publishes its share)",
        minimum=1,
        maximum=100,
        quiet_default=True,
    ),
    Dimension(
        "queue_type",
        "choice",
        queues.CLASSIC,
        "config",
        "the type of the run's queues on a RabbitMQ broker (classic or quorum; rabbitmq-quorum is "
        "rabbitmq with quorum)",
        choices=queues.QUEUE_TYPES,
        setting="task_default_queue_type",
        quiet_default=True,
    ),
    Dimension(
        "delivery_limit",
        "integer",
        0,
        "harness",
        "a quorum queue's x-delivery-limit: deliveries of a message before it is dropped (0 = RabbitMQ's own)",
        minimum=0,
        maximum=1_000_000,
        quiet_default=True,
    ),
    Dimension("fault", "fault", faults.NONE, "harness", faults.DESCRIPTION, quiet_default=True),
)

#: The dimensions by name, in :data:`DIMENSIONS` order.
BY_NAME: dict[str, Dimension] = {d.name: d for d in DIMENSIONS}
#: The dimensions the run spec carries to the hosts (all but those that only pick hosts).
ON_HOSTS: tuple[Dimension, ...] = tuple(d for d in DIMENSIONS if d.reaches != "hosts")
#: The dimensions the worker runs with: the driver checks it runs the cell's value.
ON_WORKER: tuple[Dimension, ...] = tuple(d for d in DIMENSIONS if d.reaches in ("argv", "config"))
#: The pools (the ``pool`` dimension's choices; their traits: workloads/vocab/pools.py).
POOLS: tuple[str, ...] = BY_NAME["pool"].choices


#: ``package.NAME: [VERSION_SPEC, ...]``: the version of a Python package the run's worker and
#: driver import, from an environment of its own on each host (one per version set, built from the
#: wheelhouse: engine/hosts/provision.py). NAME is one of the packages every worker and driver
#: reports (workloads/runtime/fingerprint.py): what they report is what the cell is checked against.
PACKAGE_PREFIX = "package."
VERSIONED: tuple[str, ...] = PACKAGES


def package_versions(values: Any) -> dict[str, str]:
    """``{package: version spec}`` of a cell's ``package.*`` values (empty: the controller's versions)."""
    return {k[len(PACKAGE_PREFIX) :]: v for k, v in sorted(values.items()) if k.startswith(PACKAGE_PREFIX)}


def version_matches(spec: str, actual: str | None) -> bool:
    """Whether ``actual`` (a version a process imported) is what ``spec`` asks: a version
    (``5.5.3``, equal as PEP 440 compares) or a specifier set (``>=5.5,<5.6``)."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    if actual is None:
        return False
    try:
        if spec.strip()[:1].isdigit():
            return Version(actual) == Version(spec)
        return SpecifierSet(spec).contains(actual, prereleases=True)
    except (InvalidVersion, ValueError):
        return False


@dataclass(frozen=True)
class WorkerFlag:
    """A worker switch a cell turns on or off as ``worker.NAME: true|false`` (off unless set:
    a quiet, fast start)."""

    name: str
    #: The worker's command-line switches when the flag is on, and when it is off.
    on: tuple[str, ...]
    off: tuple[str, ...]
    description: str
    setting: str | None = None


WORKER_FLAGS: tuple[WorkerFlag, ...] = (
    WorkerFlag("gossip", (), ("--without-gossip",), "worker-to-worker gossip (events between workers)"),
    WorkerFlag("mingle", (), ("--without-mingle",), "synchronise with other workers at start-up"),
    WorkerFlag("heartbeat", (), ("--without-heartbeat",), "worker event heartbeats (not the broker heartbeat)"),
    WorkerFlag("events", ("-E",), (), "send task events", setting="worker_send_task_events"),
)
FLAG_NAMES: tuple[str, ...] = tuple(f.name for f in WORKER_FLAGS)


def owned_settings() -> dict[str, str]:
    """The Celery settings a dimension or worker flag owns, with what to use instead (part of
    workloads/runtime/spec.py OWNED_SETTINGS)."""
    out = {
        d.setting: f"use the {d.name} dimension" + (f" ({d.hint})" if d.hint else "") for d in DIMENSIONS if d.setting
    }
    out |= {f.setting: f"use the worker.{f.name} dimension" for f in WORKER_FLAGS if f.setting}
    return out


def worker_argv(spec: Any) -> list[str]:
    """The worker's command-line switches for a run spec's dimensions and worker flags."""
    argv: list[str] = []
    for d in DIMENSIONS:
        if d.reaches == "argv":
            argv += [d.argv, str(getattr(spec, d.name))]
    for flag in WORKER_FLAGS:
        argv += flag.on if spec.worker_flags.get(flag.name) else flag.off
    return argv


def worker_config(spec: Any) -> dict[str, Any]:
    """The Celery settings the app factory sets from a run spec's dimensions."""
    return {d.setting: getattr(spec, d.name) for d in DIMENSIONS if d.reaches == "config"}
