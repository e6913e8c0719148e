"""Celery's known traps: one table that ``cmx validate`` and the report both read (issue #16).

Each pitfall has a rule over a cell's values (the normalised dimension values of engine/model/cells.py)
and the shipped experiment under ``experiments/pitfalls/`` that shows its effect. A matching cell
is a warning, never an error: measuring a trap on purpose is legitimate (the pitfall experiments
themselves match their own rules).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cmx.workloads.vocab.dimensions import BY_NAME
from cmx.workloads.vocab.kinds import BROKERS
from cmx.workloads.vocab import pools
from cmx.workloads.servers import registry as servers

#: Kombu's default visibility_timeout for Redis (and SQS): one hour.
DEFAULT_VISIBILITY_TIMEOUT_S = 3600.0
#: Workload params that are how long a task runs (seconds); "long" is LONG_TASK_S or more.
TASK_DURATION_PARAMS = ("params.long_s", "params.sleep_s", "params.sleep_max_s", "params.work_s")
LONG_TASK_S = 1.0
#: How long Celery's loop for gevent/eventlet (celery.worker.loops.synloop) waits for a frame. py-amqp
#: restarts that wait on every heartbeat frame, which RabbitMQ sends every heartbeat/2 seconds, so
#: at a heartbeat of twice this or less the wait never ends (celery/kombu#1871).
GREEN_LOOP_WAIT_S = 2.0
#: Workload params that schedule a task ahead (seconds): countdowns and ETAs.
SCHEDULE_PARAMS = ("params.countdown_s", "params.eta_s")
#: A chord header this large or more walks into the trap: the callback waits until the result
#: backend has counted every header result (on Redis a round trip per header task, then a read of
#: them all), so the time to the callback grows with the header: ~2 ms a header task on a 2-core
#: machine, 0.17 s at 100 and 1.97 s at 1,000 against 0.02 s at 10
#: (experiments/pitfalls/chord-size.yaml's header).
LARGE_CHORD_HEADER = 100


@dataclass(frozen=True)
class Pitfall:
    name: str
    title: str
    experiment: str  # the shipped experiment that shows it
    rule: Callable[[Mapping[str, Any]], str | None]  # why this cell matches, or None
    #: Its cells' workers sit idle while their tasks wait in the broker (metric worker_starved_share):
    #: a run's summary that finds a starved cell names the pitfall it walks into.
    starves: bool = False


def _as_number(v: Any, default: float = 0.0) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _number(values: Mapping[str, Any], name: str, default: float = 0.0) -> float:
    return _as_number(values.get(name), default)


def _broker_server(values: Mapping[str, Any]) -> servers.Server | None:
    """The server the cell's broker kind talks to (workloads/servers/), None when unknown."""
    kind = BROKERS.get(str(values.get("broker", BY_NAME["broker"].default)))
    return servers.get(kind.service) if kind else None


def _visibility(values: Mapping[str, Any]) -> str | None:
    server = _broker_server(values)
    if not (server and server.visibility_timeout):  # kombu's Redis transport (a Sentinel set's master too)
        return None
    ahead = max((_number(values, p) for p in SCHEDULE_PARAMS), default=0.0)
    options = values.get("celery.broker_transport_options") or {}
    timeout = _number(
        options if isinstance(options, Mapping) else {}, "visibility_timeout", DEFAULT_VISIBILITY_TIMEOUT_S
    )
    if ahead > timeout:
        return f"Redis broker with tasks scheduled {ahead:g}s ahead, beyond visibility_timeout {timeout:g}s"
    return None


def _heartbeat(values: Mapping[str, Any]) -> str | None:
    # Only AMQP brokers have connection heartbeats; Redis ignores broker_heartbeat.
    beat = _number(values, "heartbeat", BY_NAME["heartbeat"].default)
    server = _broker_server(values)
    if values.get("pool") in pools.GREEN and server and server.heartbeats and beat > 0:
        why = f"{values['pool']} pool with broker heartbeat {beat:g}s on {server.product}"
        if beat <= 2 * GREEN_LOOP_WAIT_S:
            why += (
                f"; at {2 * GREEN_LOOP_WAIT_S:g}s or less the broker's heartbeat frames keep the worker's "
                "loop waiting for ever, so it never starts consuming"
            )
        return why
    return None


def _prefetch(values: Mapping[str, Any]) -> str | None:
    longest = max((_number(values, p) for p in TASK_DURATION_PARAMS), default=0.0)
    prefetch = _number(values, "prefetch_multiplier", BY_NAME["prefetch_multiplier"].default)
    if prefetch > 1 and values.get("celery.task_acks_late") is not True and longest >= LONG_TASK_S:
        return f"prefetch_multiplier {prefetch:g} without celery.task_acks_late, tasks of {longest:g}s"
    return None


def _green_at_limit(values: Mapping[str, Any]) -> str | None:
    """A green worker whose every wait for the broker starts at its prefetch limit (the messages it
    holds unacknowledged): at concurrency 1, prefetch 1 the task it just received (it starts during
    the wait); with ``task_acks_late`` every task running, whenever all its slots are busy."""
    pool = values.get("pool", BY_NAME["pool"].default)
    server = _broker_server(values)
    if not (pool in pools.GREEN and server and server.green_waits_at_limit) or values.get("params.tasks") == 1:
        return None  # (a run's only task: nothing waits behind it)
    concurrency = _number(values, "concurrency", BY_NAME["concurrency"].default)
    prefetch = _number(values, "prefetch_multiplier", BY_NAME["prefetch_multiplier"].default)
    wait = f"reads the queue again only when its {GREEN_LOOP_WAIT_S:g} s wait for the broker ends"
    if concurrency * prefetch == 1:
        return (
            f"{pool} pool at concurrency 1, prefetch_multiplier 1 on {server.product}: the worker holds its one "
            f"task and {wait}: one task per {GREEN_LOOP_WAIT_S:g} s however short"
        )
    if values.get("celery.task_acks_late") is True:
        return (
            f"{pool} pool with celery.task_acks_late on {server.product}: a worker whose {concurrency:g} slot(s) "
            f"are all busy holds its limit of unacknowledged tasks and {wait}, however soon one finishes"
        )
    return None


def _max_tasks_per_child(values: Mapping[str, Any]) -> str | None:
    if (
        values.get("pool", BY_NAME["pool"].default) in pools.PER_CHILD_LIMITS
        and values.get("celery.worker_max_tasks_per_child") == 1
    ):
        return "celery.worker_max_tasks_per_child 1 on prefork (a new child process per task)"
    return None


def _chord_headers(values: Mapping[str, Any]) -> list[float]:
    """The chord header sizes a cell's params give: chord_size's ``header``, io_chord's ``chords``
    (a list of sizes; chord_size's ``chords`` is how many chords, a number, and not a size)."""
    chords = values.get("params.chords")
    listed = chords if isinstance(chords, (list, tuple)) else []
    return [_number(values, "params.header")] + [_as_number(x) for x in listed]


def _chord_size(values: Mapping[str, Any]) -> str | None:
    backend = values.get("backend", BY_NAME["backend"].default)
    largest = max(_chord_headers(values))
    if backend != "none" and largest >= LARGE_CHORD_HEADER:  # no chord runs without a backend
        return (
            f"a chord of {largest:g} header tasks on the {backend} result backend: its callback waits "
            "until the backend has counted every header result"
        )
    return None


PITFALLS: tuple[Pitfall, ...] = (
    Pitfall("prefetch-hol", "Prefetch head-of-line blocking", "experiments/pitfalls/prefetch-hol.yaml", _prefetch),
    Pitfall(
        "max-tasks-per-child",
        "worker_max_tasks_per_child forks per N tasks",
        "experiments/pitfalls/max-tasks-per-child.yaml",
        _max_tasks_per_child,
    ),
    Pitfall(
        "visibility-timeout",
        "Redis visibility timeout vs ETA/countdown",
        "experiments/pitfalls/visibility-timeout.yaml",
        _visibility,
    ),
    Pitfall(
        "gevent-heartbeat",
        "Broker heartbeats under gevent/eventlet with blocking work",
        "experiments/pitfalls/gevent-heartbeat.yaml",
        _heartbeat,
    ),
    Pitfall(
        "chord-size", "Large chord headers on a result backend", "experiments/pitfalls/chord-size.yaml", _chord_size
    ),
    Pitfall(
        "green-one-slot",
        "A gevent/eventlet worker on Redis at its prefetch limit",
        "experiments/pitfalls/green-one-slot.yaml",
        _green_at_limit,
        starves=True,
    ),
)


def matches(values: Mapping[str, Any]) -> list[tuple[Pitfall, str]]:
    """The pitfalls one cell walks into, each with why."""
    return [(p, why) for p in PITFALLS if (why := p.rule(values)) is not None]


def warnings(cells: Iterable[Any]) -> list[str]:
    """One line per pitfall some cells match: how many, why (first match), which experiment shows it.
    ``cells`` are cmx.engine.model.cells.Cell (or anything with ``cell_id`` and ``values``)."""
    cells = list(cells)
    hits: dict[str, list[tuple[str, str]]] = {}
    for cell in cells:
        for pitfall, why in matches(cell.values):
            hits.setdefault(pitfall.name, []).append((cell.cell_id, why))
    out = []
    for pitfall in PITFALLS:
        if pitfall.name in hits:
            found = hits[pitfall.name]
            ids = ", ".join(c for c, _ in found[:3]) + (", ..." if len(found) > 3 else "")
            out.append(
                f"{len(found)} of {len(cells)} cells walk into '{pitfall.title}' ({found[0][1]}; "
                f"cells {ids}): {pitfall.experiment} shows the effect"
            )
    return out
