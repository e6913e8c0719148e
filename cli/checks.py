"""Checks of an experiment against the inventory it will run on, before any host is touched."""

from __future__ import annotations

from cmx.engine.errors import InputError, Problem
from cmx.engine.model.experiment import Experiment
from cmx.engine.hosts.connection import connections
from cmx.engine.hosts.inventory import Inventory
from cmx.engine.model.cells import Cell
from cmx.engine.model.faultcheck import hosts_problem
from cmx.engine.model import thresholds as threshold_rules
from cmx.engine.model.yamlpos import load_yaml
from cmx.workloads import faults
from cmx.workloads.vocab import kinds
from cmx.workloads.catalog import registry
from cmx.workloads.servers import registry as servers


def _where(exp: Experiment, dim: str) -> tuple[int | None, int | None]:
    try:
        _, pos = load_yaml(exp.source)
    except Exception:
        return None, None
    for path in (("matrix", dim), ("fixed", dim), ("include",)):
        line, col = pos.of(path)
        if line:
            return line, col
    return None, None


def _hosts_view(inv: Inventory, cell: Cell) -> faults.HostsView:
    """What a fault kind's ``check_hosts`` reads of the inventory for ``cell``: whether its broker is
    one the sweep provisions or one marked disposable, and where it lives (its server's ``place_of``);
    its first worker host, and whether that is this machine (asked only by a kind that needs it)."""
    broker = cell.values["broker"]
    service = kinds.BROKERS[broker].service
    provisioned = bool(inv.services_to_provision({broker}, set()))
    host = (inv.hosts_of("brokers") or ("",))[0]
    disposable = inv.hostvars.get(host, {}).get("cmx_disposable") is True
    try:
        servers.get(service).place_of(host, inv.hostvars.get(host, {}), provisioned)
        place_problem = None
    except (ValueError, NotImplementedError) as exc:
        place_problem = str(exc) or "its server cannot be restarted by cmx"
    worker = (inv.workers_for(cell.values["machines"]) or ("",))[0]
    return faults.HostsView(
        service, provisioned, disposable, place_problem, worker, lambda: connections(inv.path, [worker])[worker].local
    )


def check_thresholds(exp: Experiment) -> None:
    """Each threshold names a metric cmx computes, and a unit that fits it (2s on a time, 512MiB on a
    size); a built-in workload's objective names one too; FILE:LINE:COL problems
    (engine/model/thresholds.py has checked the form already)."""
    from cmx.engine.errors import suggest
    from cmx.engine.results import metricdefs

    if not exp.thresholds and not exp.objective:
        return
    try:
        _, pos = load_yaml(exp.source)
    except Exception:
        pos = None
    problems = []
    # A user's own workload may report metrics of its own; a built-in one reports the registry's.
    direction, metric, where = exp.objective_parts()
    if metric and exp.workload.name in registry.names():
        path = ("objective",) if direction is None else ("objective", direction)
        if metric not in metricdefs.METRICS:
            line, col = pos.of(path) if pos else (None, None)
            problems.append(
                Problem(
                    f"objective: unknown metric '{metric}'" + suggest(metric, metricdefs.METRICS), exp.source, line, col
                )
            )
    # the objective's where constraints read as thresholds do
    rules = [(("thresholds", m), "thresholds", m, r) for m, r in exp.parsed_thresholds().items()]
    rules += [(("objective", "where", m), "objective.where", m, threshold_rules.parse(r)) for m, r in where.items()]
    for path, key, metric, rule in rules:
        if metric not in metricdefs.METRICS:
            line, col = pos.key(path) if pos else (None, None)
            problems.append(
                Problem(
                    f"{key}: unknown metric '{metric}'"
                    + suggest(metric, list(metricdefs.METRICS))
                    + " (`cmx sql \"SELECT DISTINCT name FROM metrics\"` lists those stored)",
                    exp.source,
                    line,
                    col,
                )
            )
            continue
        unit = metricdefs.METRICS[metric].unit
        if rule.unit and rule.unit_kind != unit:
            line, col = pos.of(path) if pos else (None, None)
            problems.append(
                Problem(
                    f"{key}.{metric}: unit '{rule.unit}' does not fit {metric}, which is in "
                    f"{unit}; give a bare number"
                    + (" or a size (512MiB)" if unit == "bytes" else " or a duration (2s)" if unit == "s" else ""),
                    exp.source,
                    line,
                    col,
                )
            )
    if problems:
        raise InputError(problems)


def check_against_inventory(exp: Experiment, cells: list[Cell], inv: Inventory) -> None:
    """Every cell can run on this inventory: enough workers, and a URL for every broker/backend."""
    problems: list[Problem] = []
    for dim, group in (("machines", "workers"), ("drivers", "drivers")):  # the dimensions that pick hosts
        have = len(inv.hosts_of(group))
        wanted = max(c.values.get(dim, 1) for c in cells)
        if wanted > have:
            line, col = _where(exp, dim)
            problems.append(
                Problem(
                    f"{dim}: {wanted} asks for more hosts than group '{group}' of {inv.path} has "
                    f"({have}); add hosts or lower {dim}",
                    exp.source,
                    line,
                    col,
                )
            )
    for kind in sorted({c.values["broker"] for c in cells}):
        try:
            inv.broker_url(kind)
        except InputError as exc:
            problems.extend(exc.problems)
    for kind in sorted({c.values["backend"] for c in cells}):
        try:
            inv.backend_url(kind)
        except InputError as exc:
            problems.extend(exc.problems)
    for cell in cells:  # each fault kind's rules beside the inventory (workloads/faults/: check_hosts)
        why = hosts_problem(cell.values, _hosts_view(inv, cell))
        if why and all(p.message != why for p in problems):
            line, col = _where(exp, "fault")
            problems.append(Problem(why, exp.source, line, col))
    workload = registry.get(exp.workload.name)
    # The backend kinds that keep results: a server's, or Celery's own (rpc); the others keep none.
    keeping = [k.name for k in kinds.BACKENDS.values() if k.service or k.celery_url]
    keeps_none = [name for name in kinds.BACKENDS if name not in keeping]
    if workload.needs_backend and any(c.values["backend"] in keeps_none for c in cells):
        line, col = _where(exp, "backend")
        problems.append(
            Problem(
                f"workload {workload.name} waits for task results: set backend to "
                f"{', '.join(keeping[:-1])} or {keeping[-1]} (not {' or '.join(keeps_none)})",
                exp.source,
                line,
                col,
            )
        )
    try:
        if workload.service_module:
            inv.service_host()
        if workload.needs_database:
            inv.database_url()
    except InputError as exc:
        problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
