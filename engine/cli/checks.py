"""Checks of an experiment against the inventory it will run on, before any host is touched."""
from __future__ import annotations

from cmx.engine.errors import InputError, Problem
from cmx.engine.model.experiment import Experiment
from cmx.engine.hosts.inventory import Inventory
from cmx.engine.model.cells import Cell
from cmx.engine.model.yamlpos import load_yaml
from cmx.workloads.catalog import registry


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


def check_against_inventory(exp: Experiment, cells: list[Cell], inv: Inventory) -> None:
    """Every cell can run on this inventory: enough workers, and a URL for every broker/backend."""
    problems: list[Problem] = []
    have = len(inv.hosts_of("workers"))
    wanted = max(c.values["machines"] for c in cells)
    if wanted > have:
        line, col = _where(exp, "machines")
        problems.append(Problem(f"machines: {wanted} asks for more hosts than group 'workers' of {inv.path} has "
                                f"({have}); add hosts or lower machines", exp.source, line, col))
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
    workload = registry.get(exp.workload.name)
    if workload.needs_backend and any(c.values["backend"] == "none" for c in cells):
        line, col = _where(exp, "backend")
        problems.append(Problem(f"workload {workload.name} waits for task results: set backend to redis, rpc or "
                                "postgres (not none)", exp.source, line, col))
    try:
        if workload.service_module:
            inv.service_host()
        if workload.needs_database:
            inv.database_url()
    except InputError as exc:
        problems.extend(exc.problems)
    if problems:
        raise InputError(problems)
