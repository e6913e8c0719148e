"""Matrix expansion: an Experiment becomes its list of cells (asv-style: product, exclude, include).

Everything here is a pure function of the experiment, so the same file always gives the same
cells in the same order with the same ids. It sits with the model because validating a file needs
its cells (an include that repeats one, params valid together); the plan stage
(engine/plan) reads the cells, never the reverse.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from cmx.engine.model.dimensions import defaults, normalise_values
from cmx.engine.model.experiment import Experiment
from cmx.workloads.vocab import kinds
from cmx.workloads.vocab.dimensions import DIMENSIONS

#: Dimensions left out of a cell's id at their default (workloads/vocab/dimensions.py ``quiet_default``).
QUIET = tuple(d for d in DIMENSIONS if d.quiet_default)


@dataclass(frozen=True)
class Cell:
    """One combination of dimension values. ``values`` is read-only and sorted by key;
    ``dict(cell.values)`` is JSON-serialisable."""

    cell_id: str
    values: Mapping[str, Any]

    def __hash__(self) -> int:  # MappingProxyType is unhashable; the id stands for the values
        return hash(self.cell_id)


def canonical(value: Any) -> str:
    # JSON, not ==, because True == 1 and 1 == 1.0 in Python but they are different settings.
    # default=str only matters for values validation has already refused (dates, say).
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    except TypeError:  # keys of mixed types, in a value validation refuses: ordered as written
        return json.dumps(repr(value))


def value_text(value: Any) -> str:
    """A dimension's value as the experiment file would write it (YAML flow style): ``null``,
    ``true``, ``{visibility_timeout: 60}``, ``120`` (not the stored ``120.0``); for progress lines and
    tables, never for storage."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(value_text, value)) + "]"
    return str(value)


def cell_id(workload_name: str, values: Mapping[str, Any]) -> str:
    """The cell's stable id: 12 hex chars of sha256 over the workload name and normalised values.

    Independent of key order and of the file the values came from.
    """
    normal = normalise_values(workload_name, dict(values))
    for d in QUIET:  # added later: at its default, the id an older cmx gave the cell
        if d.name in normal and normal[d.name] == _quiet_default(d.name, d.default, normal):
            del normal[d.name]
    text = canonical({"workload": workload_name, "values": normal})
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _quiet_default(name: str, default: Any, values: Mapping[str, Any]) -> Any:
    """The value of a later dimension that an older cmx's cell had: the queue type of a broker
    alias (``rabbitmq-quorum``: quorum) keeps its cells' ids, else the dimension's default."""
    if name == "queue_type":
        return kinds.queue_type_of(values.get("broker") if isinstance(values.get("broker"), str) else "", default)
    return default


def _make_cell(workload_name: str, values: dict[str, Any]) -> Cell:
    normal = normalise_values(workload_name, copy.deepcopy(values))  # sorted by key
    return Cell(cell_id(workload_name, normal), MappingProxyType(normal))


def _base(exp: Experiment) -> dict[str, Any]:
    base = defaults()  # every built-in dimension (workloads/vocab/dimensions.py)
    # workload.params are values of every cell as much as fixed ones are: folding them in keeps
    # resume honest (a changed `tasks` is a new cell) and gives each a column in `runs`.
    base.update({f"params.{name}": value for name, value in exp.workload.params.items()})
    base.update(exp.fixed)
    return base


def _axes(exp: Experiment) -> list[list[dict[str, Any]]]:
    """Each matrix dimension, then each zip group, as a list of partial assignments."""
    axes = [[{name: value} for value in values] for name, values in exp.matrix.items()]
    for group in exp.zip:
        if not group:
            continue  # `zip: [{}]`: refused by validation, which expands the rest meanwhile
        length = min(len(values) for values in group.values())  # validation ensures equal lengths
        axes.append([{name: values[i] for name, values in group.items()} for i in range(length)])
    return axes


def _matches(rule: Mapping[str, Any], values: Mapping[str, Any], workload: str) -> bool:
    """An exclude rule matches when ALL its keys match; a list value matches ANY of its items."""
    for name, wanted in rule.items():
        if name not in values:
            return False
        options = wanted if isinstance(wanted, list) else [wanted]
        have = canonical(values[name])
        candidates = {canonical(normalise_values(workload, {name: o})[name]) for o in options}
        # A list-valued setting (celery.accept_content: [json]) may also be matched as a whole.
        candidates.add(canonical(normalise_values(workload, {name: wanted})[name]))
        if have not in candidates:
            return False
    return True


def expand_parts(exp: Experiment) -> tuple[list[Cell], list[Cell]]:
    """The product cells left after exclude, and the include cells, separately (for validation)."""
    workload = exp.workload.name
    base = _base(exp)
    product = []
    for combo in itertools.product(*_axes(exp)):
        values = dict(base)
        for part in combo:
            values.update(part)
        cell = _make_cell(workload, values)
        if not any(_matches(rule, cell.values, workload) for rule in exp.exclude):
            product.append(cell)
    included = [_make_cell(workload, {**base, **extra}) for extra in exp.include]
    return product, included


def given_values(exp: Experiment) -> list[dict[str, Any]]:
    """The values the file itself gives each cell that runs (fixed, workload params, the matrix's and
    zip's, an include's), before defaults and normalising: what a cell's values replaced (a broker
    alias's own queue type) can be checked against what the file said."""
    workload, base = exp.workload.name, _base(exp)
    given = {f"params.{name}": value for name, value in exp.workload.params.items()} | dict(exp.fixed)
    out = []
    for combo in itertools.product(*_axes(exp)):
        values = dict(given)
        for part in combo:
            values.update(part)
        cell = _make_cell(workload, {**base, **values})
        if not any(_matches(rule, cell.values, workload) for rule in exp.exclude):
            out.append(values)
    return out + [{**given, **extra} for extra in exp.include]


def expand(exp: Experiment) -> list[Cell]:
    """The experiment's cells: defaults + fixed, times the matrix product, times each zip group;
    minus cells matching any exclude rule; plus includes. Product order, then includes in file order."""
    product, included = expand_parts(exp)
    return product + included
