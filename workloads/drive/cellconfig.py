"""What a run's cell asks of its workers, in the keys a worker's effective configuration answers
(workloads/runtime/effective.py), and where a worker runs something else: each mismatch says both
values. workloads/drive/workerwatch.py asks the workers and fails the run on one."""

from __future__ import annotations

from typing import Any

from cmx.workloads.servers import registry as servers
from cmx.workloads.vocab.dimensions import ON_WORKER, PACKAGE_PREFIX, version_matches
from cmx.workloads.runtime.effective import parse_task_key
from cmx.workloads.runtime.spec import RunSpec


def wanted_config(spec: RunSpec) -> dict[str, Any]:
    """The cell's intent in the keys :func:`cmx.workloads.runtime.effective.effective_config` answers."""
    want: dict[str, Any] = {d.name: getattr(spec, d.name) for d in ON_WORKER}  # pool, concurrency...
    want |= {"celery." + k: v for k, v in spec.celery.items()}
    want |= {PACKAGE_PREFIX + k: v for k, v in spec.packages.items()}  # the versions it imports
    return want


def _same(wanted: Any, actual: Any) -> bool:
    if isinstance(wanted, dict) and isinstance(actual, dict):
        # A mapping the harness adds keys to (broker_transport_options gains the connection's
        # name: workloads/app/factory.py name_clients): every key the cell set must hold its value.
        return all(_same(v, actual.get(k)) for k, v in wanted.items())
    if isinstance(wanted, bool) or isinstance(actual, bool):
        return wanted is actual
    if isinstance(wanted, (int, float)) and isinstance(actual, (int, float)):
        return float(wanted) == float(actual)
    if isinstance(wanted, tuple):
        wanted = list(wanted)
    return wanted == actual


def mismatches(want: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """'cell asks KEY X; worker runs Y' for every key where the worker runs something else, and
    'cell asks celery.SETTING X; task T runs Y' for every task of the run that runs a task-level
    setting of the cell otherwise (its own option, an annotation, a pool that drops it)."""
    bad = [
        f"cell asks {key} {wanted!r}; worker runs {config.get(key)!r}"
        for key, wanted in want.items()
        if not (
            version_matches(wanted, config.get(key))
            if key.startswith(PACKAGE_PREFIX)
            else _same(wanted, config.get(key))
        )
    ]
    for key, actual in sorted(config.items()):
        task_setting = parse_task_key(key)
        if task_setting is not None and (wanted_key := "celery." + task_setting[1]) in want:
            if not _same(want[wanted_key], actual):
                bad.append(f"cell asks {wanted_key} {want[wanted_key]!r}; task {task_setting[0]} runs {actual!r}")
    return bad


def broker_mismatch(spec: RunSpec, config: dict[str, Any]) -> list[str]:
    """The worker consumes from a broker of another kind than the cell's (a Sentinel set's master
    reached by its redis:// URL, say): its transport's scheme is none of the kind's."""
    scheme = config.get("broker_scheme")
    if scheme in servers.schemes("broker", spec.broker):
        return []
    return [f"cell asks broker {spec.broker}; worker consumes from a {scheme}:// broker"]
