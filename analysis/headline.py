"""Which metrics an experiment's user cares about: its headline, the one set that may alarm and gate.

The workload's own headline metrics (``Workload.headline_metrics``, with its ``objective``), the
experiment's ``objective:`` (a metric, or ``{maximize|minimize: METRIC}``) and every metric its
``thresholds:`` name, as the sweep stored its definition. ``cmx trend`` groups every other metric
by :func:`cmx.engine.results.metricdefs.group_of` (other, harness, noise): shown, never gating.
"""
from __future__ import annotations

import json


def _workload_headline(name: str, params: dict) -> tuple[str, ...]:
    """A built-in workload's headline for these params (``Workload.headline``: a backlog has no latency
    anyone feels) and its objective; () for one the catalog does not hold (a user's workload class,
    known only to its file)."""
    from cmx.workloads.catalog import registry
    cls = registry.WORKLOADS.get(name)  # never a user's file: analysis runs no user code
    if cls is None:
        return ()
    workload = cls()
    try:
        names = workload.headline(workload.Params(**params))
    except (TypeError, ValueError):  # params an older cmx stored: the workload's whole headline
        names = workload.headline_metrics
    return (*names, workload.objective)


def of_definition(workload: str, definition: dict | None) -> frozenset[str]:
    """The headline of one sweep: its workload's, its objective's metric and its thresholds' metrics."""
    definition = definition or {}
    params = (definition.get("workload") or {}).get("params") or {}
    names = set(_workload_headline(workload, params if isinstance(params, dict) else {}))
    objective = definition.get("objective")
    if isinstance(objective, str):
        names.add(objective)
    elif isinstance(objective, dict):
        names.update(v for k, v in objective.items() if k in ("maximize", "minimize") and isinstance(v, str))
    names.update(k for k in (definition.get("thresholds") or {}) if isinstance(k, str))
    return frozenset(names)


def of_experiment(con, experiment: str, revision: int) -> frozenset[str]:
    """The headline of an experiment's revision, from its latest sweep's stored definition."""
    row = con.execute("""SELECT workload, definition FROM sweeps WHERE experiment = ? AND coalesce(revision, 1) = ?
                         ORDER BY started_at DESC LIMIT 1""", [experiment, revision]).fetchone()
    if row is None:
        return frozenset()
    workload, definition = row
    return of_definition(workload or "", json.loads(definition) if isinstance(definition, str) else definition)
