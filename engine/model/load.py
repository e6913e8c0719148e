"""``load_experiment``: an experiment file read, checked and built, every problem reported at once
as ``FILE:LINE:COL: message`` before any host is touched.

Each part of the file is validated once: the pydantic model (engine/model/experiment.py) checks
the top level, ``workload`` and ``limits``; the dimension sections (``fixed``, ``matrix``,
``zip``, ``exclude``, ``include``, ``workload.params``) are checked by engine/model/checks.py
alone and handed to the model as they are. The cells are expanded once, and the checks that need
them (an include that repeats a cell, params valid together, the user's code) share them.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cmx.engine import limits
from cmx.engine.errors import InputError, Problem
from cmx.engine.model import faultcheck
from cmx.engine.model.cells import Cell, expand_parts, given_values
from cmx.engine.model.checks import SECTIONS, Checker, Issue
from cmx.engine.errors import suggest
from cmx.engine.model.dimensions import pydantic_message
from cmx.engine.model.experiment import ALLOWED_KEYS, Experiment, WorkloadSpec
from cmx.engine.model.yamlpos import Positions, load_yaml
from cmx.workloads.catalog import registry
from cmx.workloads.servers import registry as servers
from cmx.workloads.vocab import kinds
from cmx.workloads.vocab.queues import CLASSIC


# --------------------------------------------------------------------------- the model's part


def _dotted(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _pydantic_issues(exc: ValidationError) -> list[Issue]:
    issues = []
    for error in exc.errors()[: limits.MAX_PROBLEMS]:
        loc = tuple(error["loc"])
        if loc[:1] == ("repeats",) and loc[1:2] in (("race",), ("fixed",)):  # the union's tag, not a key of the file
            loc = loc[:1] + loc[2:]
        if "[key]" in loc:  # a dict key of the wrong type: point at the key
            loc = loc[: loc.index("[key]")]
            issues.append(Issue(loc, f"{_dotted(loc[:-1])}: keys must be strings, got {loc[-1]!r}", at_key=True))
            continue
        parent, last = loc[:-1], loc[-1] if loc else None
        where = f" in {_dotted(parent)}" if parent else ""
        if error["type"] == "extra_forbidden":
            allowed = ALLOWED_KEYS.get(parent, [])
            issues.append(
                Issue(
                    loc,
                    f"unknown key '{last}'{where} (allowed: {', '.join(allowed)})" + suggest(str(last), allowed),
                    at_key=True,
                )
            )
        elif error["type"] == "missing":
            issues.append(Issue(loc, f"missing required key '{last}'{where}"))
        elif loc == ("name",) and error["type"] == "string_pattern_mismatch":
            issues.append(Issue(loc, "name: use letters, digits, '_', '.' and '-', starting with a letter or digit"))
        else:
            issues.append(Issue(loc, f"{_dotted(loc)}: {pydantic_message(error)}"))
    return issues


def _model_part(data: dict) -> dict:
    """The file without the sections the checker owns: what the pydantic model validates."""
    part = {k: v for k, v in data.items() if k not in SECTIONS}
    if isinstance(part.get("workload"), dict):
        part["workload"] = {k: v for k, v in part["workload"].items() if k != "params"}
    return part


def _with_sections(head: Experiment | None, data: dict) -> Experiment:
    """The experiment with its dimension sections as the file gives them (checked by the
    Checker, so not validated again). Without a valid ``head`` (the rest of the file has
    problems): just what expansion reads, so that includes repeating a cell are still found."""
    spec = data.get("workload") if isinstance(data.get("workload"), dict) else {}
    params = spec.get("params", {})
    params = copy.deepcopy(params) if isinstance(params, dict) else {}  # else reported by the Checker
    sections = {k: copy.deepcopy(data[k]) for k in SECTIONS if k in data}
    if head is None:
        workload = WorkloadSpec.model_construct(name=spec.get("name"), params=params)
        return Experiment.model_construct(name="view", workload=workload, **sections)
    return head.model_copy(update={**sections, "workload": head.workload.model_copy(update={"params": params})})


# --------------------------------------------------------------------------- the cells' part


def _expandable(checker: Checker, data: dict) -> bool:
    """The sections have the shape expansion needs (whatever is wrong with their values)."""
    spec = data.get("workload")
    return not checker.malformed and not checker.full and isinstance(spec, dict) and isinstance(spec.get("name"), str)


def _include_issues(product: list[Cell], included: list[Cell]) -> list[Issue]:
    """Includes that repeat a cell of the matrix or of an earlier include."""
    first: dict[str, str] = {cell.cell_id: "the matrix" for cell in product}
    issues = []
    for number, cell in enumerate(included, 1):
        if cell.cell_id in first:
            where = first[cell.cell_id]
            already = "already in the matrix" if where == "the matrix" else f"already added by {where}"
            issues.append(
                Issue(("include", number - 1), f"include #{number} repeats cell {cell.cell_id} {already}: remove it")
            )
        else:
            first[cell.cell_id] = f"include #{number}"
    return issues


def _param_path(data: dict, field: str, prefix: str = "params.") -> tuple:
    """Where the file sets workload param ``field`` (the first place found); ``prefix=""``: a
    built-in dimension."""
    name = f"{prefix}{field}"
    spec = data.get("workload") or {}
    if prefix and isinstance(spec.get("params"), dict) and field in spec["params"]:
        return ("workload", "params", field)
    for section in ("fixed", "matrix"):
        if isinstance(data.get(section), dict) and name in data[section]:
            return (section, name)
    for index, group in enumerate(data.get("zip") or []):
        if isinstance(group, dict) and name in group:
            return ("zip", index, name)
    for section in ("include", "exclude"):
        for index, rule in enumerate(data.get(section) or []):
            if isinstance(rule, dict) and name in rule:
                return (section, index, name)
    return ("workload",)


def _cell_issues(exp: Experiment, cells: list[Cell], data: dict) -> list[Issue]:
    """Checks of the expanded cells of an otherwise valid file: something runs, and every cell's
    params pass the workload's own rules (its validators see all params together, so a single
    value can be fine and a combination not: sleep_max_s below sleep_min_s)."""
    if not cells:
        return [
            Issue(
                ("exclude",) if exp.exclude else (),
                "the exclude rules drop every cell: nothing would run; narrow a rule or remove it",
            )
        ]
    workload = registry.get(exp.workload.name)
    params = workload.Params
    issues, seen = [], set()
    for cell in cells:
        fault = faultcheck.cell_problem(cell.values)
        if fault and fault not in seen:
            seen.add(fault)
            issues.append(Issue(_fault_path(data, cell.values.get("fault")), fault))
        queues = servers.queue_type_problem(
            cell.values.get("broker"), cell.values.get("queue_type", CLASSIC), cell.values.get("delivery_limit", 0)
        )
        if queues and queues not in seen:
            seen.add(queues)
            name = "delivery_limit" if queues.startswith("delivery_limit") else "queue_type"
            issues.append(Issue(_value_path(data, name, cell.values.get(name), prefix=""), queues))
        given = {k[len("params.") :]: v for k, v in cell.values.items() if k.startswith("params.")}
        try:
            valid = params.model_validate(given)
            why = workload.split_problem(valid) if cell.values.get("drivers", 1) > 1 else None
            if why and why not in seen:  # several drivers for a driver that cannot be split
                seen.add(why)
                issues.append(
                    Issue(
                        _value_path(data, "drivers", cell.values["drivers"], prefix=""),
                        f"drivers: {cell.values['drivers']} (cell {cell.cell_id}): {why}",
                    )
                )
        except ValidationError as exc:
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else ""
                key = (field, pydantic_message(error))
                if key in seen:  # one line per rule broken, not one per cell breaking it
                    continue
                seen.add(key)
                message = f"workload '{exp.workload.name}': {key[1]}"
                if field in given:
                    message += f" (params.{field}={json.dumps(given[field], default=str)} in cell {cell.cell_id})"
                issues.append(Issue(_param_path(data, field), message))
    return issues


def _alias_issues(exp: Experiment, data: dict) -> list[Issue]:
    """A broker alias with a queue type of its own (``rabbitmq-quorum``) in a cell whose ``queue_type``
    the file sets to another: the alias would win silently, so the file is refused."""
    issues, seen = [], set()
    for values in given_values(exp):
        broker, asked = values.get("broker"), values.get("queue_type")
        own = kinds.BROKERS[broker].queue_type if isinstance(broker, str) and broker in kinds.BROKERS else None
        if own and asked is not None and asked != own and (broker, asked) not in seen:
            seen.add((broker, asked))
            issues.append(
                Issue(
                    _value_path(data, "queue_type", asked, prefix=""),
                    f"queue_type {asked}: broker {broker} is {kinds.BROKERS[broker].service} with {own} "
                    f"queues; for {asked} queues use broker {kinds.BROKERS[broker].service}",
                )
            )
    return issues


def _fault_path(data: dict, value: Any) -> tuple:
    """Where the file sets ``fault`` to ``value`` (canonical): the item of a list holding it, else
    the first place ``fault`` is set."""
    from cmx.workloads.faults import canonical

    def same(item: Any) -> bool:
        try:
            return canonical(item) == value
        except ValueError:
            return False

    places = [
        ("fixed",),
        ("matrix",),
        *[("zip", i) for i in range(len(data.get("zip") or []))],
        *[(s, i) for s in ("include",) for i in range(len(data.get(s) or []))],
    ]
    first = None
    for path in places:
        node = data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else (node[key] if isinstance(node, list) else None)
        if not isinstance(node, dict) or "fault" not in node:
            continue
        first = first or path + ("fault",)
        held = node["fault"]
        if isinstance(held, list):
            for index, item in enumerate(held):
                if same(item):
                    return path + ("fault", index)
        elif same(held):
            return path + ("fault",)
    return first or ()


def _user_code_issues(exp: Experiment, cells: list[Cell], data: dict) -> list[Issue]:
    """The user's code the cells use exists, imports and has the task (engine/model/user_code.py)."""
    from cmx.engine.model.user_code import check_replay, check_tasks, sources

    try:
        sources(exp, cells)
    except ValueError as exc:
        return [Issue(("workload",), str(exc))]
    issues = []
    for field, value, message in check_tasks(exp, cells) + check_replay(exp, cells):
        issues.append(Issue(_value_path(data, field, value), message))
    return issues


def _package_issues(cells: list[Cell], data: dict) -> list[Issue]:
    """Every ``package.NAME`` version the cells ask for is one the registry has (engine/model/packages.py)."""
    from cmx.engine.model.packages import resolve
    from cmx.workloads.vocab.dimensions import package_versions

    asked = sorted({item for cell in cells for item in package_versions(cell.values).items()})
    issues = []
    for name, spec in asked:
        try:
            resolve(name, spec)
        except ValueError as exc:
            issues.append(Issue(_dimension_path(data, f"package.{name}", spec), str(exc)))
    return issues


def _dimension_path(data: dict, name: str, value: Any) -> tuple:
    """Where the file sets dimension ``name`` to ``value``: the item of its list in the matrix or
    a zip group, or its key in fixed or an include."""
    places: list[tuple] = [("matrix", name), ("fixed", name)]
    places += [("zip", i, name) for i, g in enumerate(data.get("zip") or []) if isinstance(g, dict)]
    places += [("include", i, name) for i, g in enumerate(data.get("include") or []) if isinstance(g, dict)]
    for path in places:
        node: Any = data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else (node[key] if isinstance(node, list) else None)
        if isinstance(node, list) and value in node:
            return path + (node.index(value),)
        if node == value:
            return path
    return (name,)


def _value_path(data: dict, field: str, value: Any, prefix: str = "params.") -> tuple:
    """Where the file sets workload param ``field`` to ``value``: the item of a dimension's list
    when one holds it, else the first place the param is set."""
    name = f"{prefix}{field}"
    lists = [(s, name) for s in ("matrix",) if isinstance(data.get(s), dict)]
    lists += [("zip", i, name) for i, g in enumerate(data.get("zip") or []) if isinstance(g, dict)]
    for path in lists:
        node = data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else (node[key] if isinstance(node, list) else None)
        if isinstance(node, list) and value in node:
            return path + (node.index(value),)
    return _param_path(data, field, prefix)


# --------------------------------------------------------------------------- loading


def _to_problem(file: str, positions: Positions, issue: Issue) -> Problem:
    line, col = positions.key(issue.path) if issue.at_key else positions.of(issue.path)
    return Problem(issue.message, file, line, col)


def load_experiment(path: str | Path, max_cells: int = limits.DEFAULT_MAX_CELLS) -> Experiment:
    """Load and validate an experiment file. Raises InputError listing every problem found.
    A matrix of more than ``max_cells`` cells is refused before it is expanded."""
    file = str(path)
    data, positions = load_yaml(path)
    registry.search_in(Path(file).parent)  # the user's workload classes sit next to the file

    issues: list[Issue] = []
    if "source" in data:
        issues.append(Issue(("source",), f"unknown key 'source' (allowed: {', '.join(ALLOWED_KEYS[()])})", at_key=True))
        data = {k: v for k, v in data.items() if k != "source"}

    checker = Checker(data)
    issues.extend(checker.run())
    head = None
    try:
        head = Experiment.model_validate({**_model_part(data), "source": file})
    except ValidationError as exc:
        issues.extend(_pydantic_issues(exc))

    experiment, cells = None, []
    count, where = limits.count_cells(data)
    if count > max_cells:  # counted, not expanded: 10^11 cells is refused as fast as 10
        issues.append(Issue(where, limits.too_many_cells(count, max_cells), at_key=True))
    elif _expandable(checker, data):
        view = _with_sections(head, data)
        product, included = expand_parts(view)  # the one expansion every check of cells reads
        issues.extend(_include_issues(product, included))
        experiment, cells = (view if head is not None else None), product + included
    if experiment is not None and not issues:
        issues.extend(_alias_issues(experiment, data))
    if experiment is not None and not issues:
        issues.extend(_cell_issues(experiment, cells, data))
    if experiment is not None and not issues:
        issues.extend(_user_code_issues(experiment, cells, data))
    if experiment is not None and not issues:
        issues.extend(_package_issues(cells, data))

    if issues:
        problems = [_to_problem(file, positions, i) for i in issues]
        problems.sort(key=lambda p: (p.line or 0, p.col or 0))
        if len(problems) >= limits.MAX_PROBLEMS:  # the checks stopped looking: say so
            problems = problems[: limits.MAX_PROBLEMS] + [
                Problem(f"... and maybe more problems: fix these {limits.MAX_PROBLEMS} first", file)
            ]
        raise InputError(problems)
    return experiment
