"""``cmx run --smoke``: every cell once, at a tiny size, with a short timeout (Rally's test mode).

Each workload says how to shrink itself (``Workload.smoke_params``: a number is capped at the
given value, anything else replaced by it), so a smoke sweep catches configuration errors (a
broker the inventory lacks, a task that raises, a pool that will not start) in minutes before a
long sweep. Shrunk cells get ids of their own; by default they go to a database of their own.
"""

from __future__ import annotations

from types import MappingProxyType

from pydantic import ValidationError

from cmx.engine.model.dimensions import normalise_values
from cmx.engine.model.experiment import Experiment, Limits
from cmx.engine.model.cells import Cell, cell_id
from cmx.workloads.catalog import registry

#: Seconds a smoke run may take at most.
SMOKE_TIMEOUT_S = 120.0


def _shrink(value, cap):
    if isinstance(cap, (int, float)) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return type(value)(min(value, cap)) if isinstance(value, int) and isinstance(cap, int) else min(value, cap)
    return cap


def smoke(exp: Experiment, cells: list[Cell]) -> tuple[Experiment, list[Cell]]:
    """The experiment (one repeat, a short timeout) and its cells shrunk to a tiny size."""
    workload = registry.get(exp.workload.name)
    fields = workload.Params.model_fields
    shrunk: dict[str, Cell] = {}
    for cell in cells:
        values = dict(cell.values)
        for field, cap in workload.smoke_params.items():
            key = f"params.{field}"
            default = fields[field].get_default(call_default_factory=True) if field in fields else None
            values[key] = _shrink(values.get(key, default), cap)
        params = {k.removeprefix("params."): v for k, v in values.items() if k.startswith("params.")}
        try:
            workload.Params.model_validate(params)
        except ValidationError:  # the shrunk combination breaks a rule of the workload: keep the cell as it was
            values = dict(cell.values)
        normal = normalise_values(exp.workload.name, values)
        new = Cell(cell_id(exp.workload.name, normal), MappingProxyType(normal))
        shrunk.setdefault(new.cell_id, new)  # two cells that differ only in size are one when tiny
    limits = Limits(run_timeout=min(exp.limits.run_timeout, SMOKE_TIMEOUT_S), warmup=0)
    return exp.model_copy(update={"repeats": 1, "limits": limits}), list(shrunk.values())
