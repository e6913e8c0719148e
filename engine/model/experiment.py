"""The experiment file: its model, its dimensions, and ``load_experiment`` that validates it.

Everything wrong with a file is reported at once, each problem as ``FILE:LINE:COL: message``,
before any host is touched.
"""
from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Callable, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator

from cmx.engine.model import celery_settings
from cmx.engine import limits
from cmx.engine.errors import InputError, Problem
from cmx.engine.model.yamlpos import Positions, load_yaml
from cmx.workloads.catalog import registry
from cmx.workloads.base import WorkloadParams

# --------------------------------------------------------------------------- durations

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float:
    """Seconds from a number of seconds or a string like ``"10m"``, ``"1.5s"``, ``"250ms"``, ``"1h30m"``."""
    if isinstance(value, bool):
        raise ValueError(f"expected a duration such as 30s, 10m or 1h, got {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        parts = _DURATION_PART.findall(text)
        if parts and "".join(n + u for n, u in parts) == text:
            return sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    raise ValueError(f"expected a duration such as 30s, 10m, 1h or 250ms (or a number of seconds), "
                     f"got {value!r}")


# --------------------------------------------------------------------------- models

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Limits(BaseModel):
    """Per-run limits, in seconds (the file may say ``10m``, ``5s``, ``250ms``)."""

    model_config = _FROZEN

    run_timeout: float = Field(600.0, gt=0, le=limits.MAX_DURATION_S)
    warmup: float = Field(0.0, ge=0, le=limits.MAX_DURATION_S)

    @field_validator("run_timeout", "warmup", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> float:
        return parse_duration(value)


def _pep508(item: str) -> str:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        Requirement(item)
    except InvalidRequirement as exc:
        raise ValueError(f"{item!r} is not a requirement such as pillow==11.0.0 "
                         f"({str(exc).splitlines()[0]})") from None
    return item


class WorkloadSpec(BaseModel):
    """Which registered workload runs, and its params shared by every cell."""

    model_config = _FROZEN

    name: str
    params: dict[str, Any] = {}
    #: What the user's tasks need on the hosts (``pillow==11.0.0``): downloaded into the
    #: wheelhouse on the controller, installed offline by the python_env role.
    requirements: list[Annotated[str, AfterValidator(_pep508)]] = []


class Experiment(BaseModel):
    """One experiment file, validated. ``source`` is the file it came from (set by the loader)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    inventory: str = "inventory/local.yml"
    repeats: int = Field(1, ge=1, le=limits.MAX_REPEATS, strict=True)
    workload: WorkloadSpec
    fixed: dict[str, Any] = {}
    matrix: dict[str, list[Any]] = {}
    zip: list[dict[str, list[Any]]] = []
    exclude: list[dict[str, Any]] = []
    include: list[dict[str, Any]] = []
    limits: Limits = Limits()
    on_error: Literal["continue", "abort"] = "continue"
    source: str = ""


# Keys a file may use at each level (``source`` is the loader's, never the file's).
_ALLOWED_KEYS: dict[tuple, list[str]] = {
    (): [f for f in Experiment.model_fields if f != "source"],
    ("workload",): list(WorkloadSpec.model_fields),
    ("limits",): list(Limits.model_fields),
}

# --------------------------------------------------------------------------- dimensions


def _choice(dimension: str, *options: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or value not in options:
            raise ValueError(f"unknown {dimension} {value!r} (choose from {', '.join(options)})")
        return value
    check.json_schema = {"type": "string", "enum": list(options)}  # read by engine/model/schema.py
    return check


def _int_at_least(dimension: str, low: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        # YAML 1.1 reads yes/no/on/off as booleans, which Python counts as ints: refuse them.
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"{dimension} must be an integer >= {low}, got {value!r}")
        return value
    check.json_schema = {"type": "integer", "minimum": low}
    return check


def _seconds(dimension: str) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"{dimension} must be a number of seconds >= 0 (0 = off), got {value!r}")
        return float(value)
    check.json_schema = {"type": "number", "minimum": 0}
    return check


#: Built-in dimensions: name -> (validator returning the normalised value, default).
#: The Celery settings they own (and the harness's) are in cmx.workloads.spec.OWNED_SETTINGS.
BUILTIN_DIMENSIONS: dict[str, tuple[Callable[[Any], Any], Any]] = {
    "broker": (_choice("broker", "redis", "rabbitmq", "rabbitmq-quorum"), "redis"),
    "backend": (_choice("backend", "none", "redis", "rpc", "postgres"), "none"),
    "pool": (_choice("pool", "prefork", "threads", "gevent", "eventlet", "solo"), "prefork"),
    "concurrency": (_int_at_least("concurrency", 1), 1),
    "prefetch_multiplier": (_int_at_least("prefetch_multiplier", 0), 4),
    "heartbeat": (_seconds("heartbeat"), 120.0),
    "machines": (_int_at_least("machines", 1), 1),
}


def _suggest(word: str, options: list[str] | frozenset[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(word, sorted(options), n=1)
    return f"; did you mean '{prefix}{close[0]}'?" if close else ""


#: Worker command-line switches a matrix can turn on (all are off unless set: a quiet, fast start).
WORKER_FLAGS = ("gossip", "mingle", "heartbeat", "events")


def dimension_name_problem(name: Any, params: type[WorkloadParams] | None) -> str | None:
    """Why ``name`` is not a dimension (None when it is). ``params`` is the workload's model,
    or None when the workload is unknown (then ``params.*`` names cannot be checked)."""
    if not isinstance(name, str):
        return f"dimension names must be strings, got {name!r}"
    if name in BUILTIN_DIMENSIONS:
        return None
    if name.startswith("params."):
        field = name[len("params."):]
        if params is None or field in params.model_fields:
            return None
        known = ", ".join(sorted(params.model_fields))
        return (f"unknown workload param '{name}' (known: {known})"
                + _suggest(field, list(params.model_fields), "params."))
    if name.startswith("worker."):
        flag = name[len("worker."):]
        if flag in WORKER_FLAGS:
            return None
        return (f"unknown worker flag '{name}' (known: {', '.join('worker.' + f for f in WORKER_FLAGS)})"
                + _suggest(flag, list(WORKER_FLAGS), "worker."))
    if name.startswith("celery."):
        return celery_settings.name_problem(name)  # typed from Celery's table; owned ones refused
    return (f"unknown dimension '{name}' (built-ins: {', '.join(BUILTIN_DIMENSIONS)}; "
            f"or params.NAME / celery.SETTING / worker.FLAG)" + _suggest(name, list(BUILTIN_DIMENSIONS)))


@lru_cache(maxsize=None)
def _param_adapter(params: type[WorkloadParams], field: str) -> TypeAdapter:
    info = params.model_fields[field]
    # Annotated with the FieldInfo keeps the field's constraints (ge=1, Literal choices...).
    return TypeAdapter(Annotated[info.annotation, info])


def normalise_value(name: str, value: Any, params: type[WorkloadParams] | None) -> Any:
    """The canonical form of ``value`` for dimension ``name`` (heartbeat 0 -> 0.0,
    params.rate 100 -> 100.0). Raises ValueError with a one-line message when it is invalid.
    Assumes ``name`` is a valid dimension name."""
    if name in BUILTIN_DIMENSIONS:
        return BUILTIN_DIMENSIONS[name][0](value)
    if name.startswith("params.") and params is not None:
        adapter = _param_adapter(params, name[len("params."):])
        try:
            return adapter.dump_python(adapter.validate_python(value), mode="json")
        except ValidationError as exc:
            raise ValueError(f"{name}: {_pydantic_message(exc.errors()[0])}") from None
    if name.startswith("worker.") and not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    if name.startswith("celery."):
        return celery_settings.check_value(name, value)
    return value


def normalise_values(workload: str, values: dict[str, Any]) -> dict[str, Any]:
    """Best-effort canonical form of a cell's values (invalid ones are kept as given), sorted by key."""
    try:
        params = registry.get(workload).Params
    except KeyError:
        params = None
    out: dict[str, Any] = {}
    for name in sorted(values):
        try:
            if dimension_name_problem(name, params) is None:
                out[name] = normalise_value(name, values[name], params)
                continue
        except ValueError:
            pass
        out[name] = values[name]
    return out


# --------------------------------------------------------------------------- checks


@dataclass(frozen=True)
class Issue:
    """A problem before it has a position: ``path`` into the document, and whether the key
    (rather than the value) at ``path`` is what is wrong."""

    path: tuple
    message: str
    at_key: bool = False


def _pydantic_message(error: dict) -> str:
    message = error["msg"]
    return message.removeprefix("Value error, ")


def _dotted(path: tuple) -> str:
    return ".".join(str(p) for p in path)


def _pydantic_issues(exc: ValidationError) -> list[Issue]:
    issues = []
    for error in exc.errors()[:limits.MAX_PROBLEMS]:
        loc = tuple(error["loc"])
        if "[key]" in loc:  # a dict key of the wrong type: point at the key
            loc = loc[:loc.index("[key]")]
            issues.append(Issue(loc, f"{_dotted(loc[:-1])}: keys must be strings, got {loc[-1]!r}",
                                at_key=True))
            continue
        parent, last = loc[:-1], loc[-1] if loc else None
        where = f" in {_dotted(parent)}" if parent else ""
        if error["type"] == "extra_forbidden":
            allowed = _ALLOWED_KEYS.get(parent, [])
            issues.append(Issue(loc, f"unknown key '{last}'{where} (allowed: {', '.join(allowed)})"
                                + _suggest(str(last), allowed), at_key=True))
        elif error["type"] == "missing":
            issues.append(Issue(loc, f"missing required key '{last}'{where}"))
        elif loc == ("name",) and error["type"] == "string_pattern_mismatch":
            issues.append(Issue(loc, "name: use letters, digits, '_', '.' and '-', "
                                     "starting with a letter or digit"))
        else:
            issues.append(Issue(loc, f"{_dotted(loc)}: {_pydantic_message(error)}"))
    return issues


class _Checker:
    """Semantic checks on the raw document, tolerant of wrong shapes (pydantic reports those),
    so that every problem in a file is found in one pass."""

    def __init__(self, data: dict):
        self.data = data
        self.issues: list[Issue] = []
        self.params: type[WorkloadParams] | None = None
        self.workload: str | None = None
        #: dimension -> where it is set ("fixed", "matrix", "zip #2")
        self.set_in: dict[str, str] = {}

    def add(self, path: tuple, message: str, at_key: bool = False) -> None:
        self.issues.append(Issue(path, message, at_key))

    @property
    def full(self) -> bool:
        """Enough problems found to refuse the file: checking on would only cost time."""
        return len(self.issues) >= limits.MAX_PROBLEMS

    def run(self) -> list[Issue]:
        self.check_workload()
        self.check_fixed()
        self.check_matrix()
        self.check_zip()
        self.check_required_params()
        self.check_rules("exclude")
        self.check_rules("include")
        return self.issues

    # -- helpers

    def workload_params(self) -> dict:
        spec = self.data.get("workload")
        params = spec.get("params") if isinstance(spec, dict) else None
        return params if isinstance(params, dict) else {}

    def check_value(self, path: tuple, name: str, value: Any) -> Any:
        """Validate one value of dimension ``name``; returns its canonical JSON, or None if invalid."""
        if self.full:
            return None
        try:
            normal = normalise_value(name, value, self.params)
        except ValueError as exc:
            self.add(path, str(exc))
            return None
        bound = limits.value_problem(name, normal)
        if bound:
            self.add(path, bound)
            return None
        try:
            return json.dumps(normal, sort_keys=True, default=str)
        except TypeError:  # a mapping with keys of mixed types (refused elsewhere): compare as written
            return json.dumps(repr(normal))

    def check_name(self, path: tuple, name: Any) -> bool:
        if self.full:
            return False
        problem = dimension_name_problem(name, self.params)
        if problem:
            self.add(path, problem, at_key=True)
        return problem is None

    def claim(self, path: tuple, name: str, where: str) -> None:
        """A dimension may be set in only one of fixed, matrix and the zip groups."""
        if name in self.set_in:
            self.add(path, f"'{name}' is set in both {self.set_in[name]} and {where}: keep one",
                     at_key=True)
        else:
            self.set_in[name] = where

    def check_values_list(self, path: tuple, name: str, values: Any, section: str) -> None:
        if not isinstance(values, list):
            example = values if isinstance(values, str) else json.dumps(values, default=str)
            self.add(path, f"dimension '{name}' in {section} must be a list of values, "
                           f"e.g. {name}: [{example}]")
            return
        if not values:
            self.add(path, f"dimension '{name}' has no values: give at least one or remove it")
            return
        seen: dict[str, int] = {}
        for index, value in enumerate(values):
            canon = self.check_value(path + (index,), name, value)
            if canon is None:
                continue
            # In a zip group a value may recur (the tuples differ); in the matrix it would repeat cells.
            if canon in seen and section == "matrix":
                self.add(path + (index,), f"dimension '{name}' lists {canon} twice "
                                          f"(items {seen[canon] + 1} and {index + 1})")
            else:
                seen[canon] = index

    # -- sections

    def check_workload(self) -> None:
        spec = self.data.get("workload")
        if not isinstance(spec, dict):
            return
        name = spec.get("name")
        if isinstance(name, str):
            try:
                self.params = registry.get(name).Params
                self.workload = name
            except KeyError as exc:
                if registry.is_user_class(name):  # the user's class: say why it did not load
                    self.add(("workload", "name"), str(exc.args[0]))
                    return
                self.add(("workload", "name"), f"unknown workload '{name}' "
                         f"(known: {', '.join(registry.names())})" + _suggest(name, registry.names()))
        params = spec.get("params", {})
        if not isinstance(params, dict):
            self.add(("workload", "params"), "workload.params must be a mapping of param: value")
            return
        if self.params is None:
            return
        for key, value in params.items():
            path = ("workload", "params", key)
            if not isinstance(key, str) or key not in self.params.model_fields:
                known = list(self.params.model_fields)
                self.add(path, f"unknown param '{key}' for workload '{self.workload}' "
                               f"(known: {', '.join(sorted(known))})" + _suggest(str(key), known),
                         at_key=True)
            else:
                self.check_value(path, f"params.{key}", value)

    def check_required_params(self) -> None:
        if self.params is None:
            return
        given = self.data["workload"].get("params")
        given = given if isinstance(given, dict) else {}
        for field, info in self.params.model_fields.items():
            if info.is_required() and field not in given and f"params.{field}" not in self.set_in:
                self.add(("workload",), f"workload '{self.workload}' needs param '{field}': set it "
                                        f"in workload.params or as dimension params.{field}")

    def check_fixed(self) -> None:
        fixed = self.data.get("fixed", {})
        if not isinstance(fixed, dict):
            self.add(("fixed",), "fixed must be a mapping of dimension: value")
            return
        for name, value in fixed.items():
            if self.check_name(("fixed", name), name):
                self.claim(("fixed", name), name, "fixed")
                if isinstance(value, list) and name in BUILTIN_DIMENSIONS:
                    self.add(("fixed", name), f"fixed takes one value for '{name}'; "
                                              f"to vary it, move it to matrix")
                else:
                    self.check_value(("fixed", name), name, value)

    def check_matrix(self) -> None:
        matrix = self.data.get("matrix", {})
        if not isinstance(matrix, dict):
            self.add(("matrix",), "matrix must be a mapping of dimension: [values]")
            return
        for name, values in matrix.items():
            if self.check_name(("matrix", name), name):
                self.claim(("matrix", name), name, "matrix")
                self.check_values_list(("matrix", name), name, values, "matrix")

    def check_zip(self) -> None:
        groups = self.data.get("zip", [])
        if not isinstance(groups, list):
            self.add(("zip",), "zip must be a list of groups, e.g. - {a: [1, 2], b: [3, 4]}")
            return
        for number, group in enumerate(groups, 1):
            path = ("zip", number - 1)
            if not isinstance(group, dict) or not group:
                self.add(path, f"zip #{number} must be a non-empty mapping of dimension: [values]")
                continue
            for name, values in group.items():
                if self.check_name(path + (name,), name):
                    self.claim(path + (name,), name, f"zip #{number}")
                    self.check_values_list(path + (name,), name, values, f"zip #{number}")
            lengths = {name: len(v) for name, v in group.items() if isinstance(v, list)}
            if len(set(lengths.values())) > 1:
                listed = ", ".join(f"{name} has {n}" for name, n in lengths.items())
                self.add(path, f"zip #{number} lists must have the same length: {listed}")
            elif lengths and len(lengths) == len(group):
                self.check_zip_tuples(path, number, group)

    def check_zip_tuples(self, path: tuple, number: int, group: dict) -> None:
        """A zip item that repeats an earlier one would run the same cells twice."""
        seen: dict[tuple, int] = {}
        for index in range(len(next(iter(group.values())))):
            try:
                item = tuple(json.dumps(normalise_value(name, values[index], self.params), sort_keys=True,
                                        default=str) for name, values in group.items())
            except ValueError:
                return  # reported by check_values_list
            if item in seen:
                self.add(path, f"zip #{number} repeats item {seen[item] + 1} at item {index + 1} "
                               f"(same value for every dimension): it would run the same cells twice")
            else:
                seen[item] = index

    def check_rules(self, section: str) -> None:
        rules = self.data.get(section, [])
        if not isinstance(rules, list):
            self.add((section,), f"{section} must be a list of mappings of dimension: value")
            return
        for number, rule in enumerate(rules, 1):
            path = (section, number - 1)
            if not isinstance(rule, dict) or not rule:
                what = "drop every cell" if section == "exclude" else "add nothing new"
                self.add(path, f"{section} #{number} must be a non-empty mapping of dimension: value "
                               f"(an empty one would {what})")
                continue
            for name, value in rule.items():
                if not self.check_name(path + (name,), name):
                    continue
                if section == "exclude":
                    if name not in BUILTIN_DIMENSIONS and name not in self.set_in \
                            and name.removeprefix("params.") not in self.workload_params():
                        self.add(path + (name,), f"exclude #{number} names '{name}', which no cell "
                                 f"sets, so it can never match: set it in fixed/matrix/zip or drop it",
                                 at_key=True)
                        continue
                    # A list in an exclude rule means "any of these values".
                    items = value if isinstance(value, list) else [value]
                    for index, item in enumerate(items):
                        self.check_value(path + (name,) + ((index,) if isinstance(value, list) else ()),
                                         name, item)
                else:
                    self.check_value(path + (name,), name, value)


def _expansion_view(data: dict) -> Experiment | None:
    """Just the parts of the file that expansion reads, as an Experiment, or None when they are
    malformed. Lets include repeats be found even when, say, ``repeats`` is invalid."""
    spec = data.get("workload")
    view = {k: data[k] for k in ("fixed", "matrix", "zip", "exclude", "include") if k in data}
    view["workload"] = {"name": spec.get("name") if isinstance(spec, dict) else None}
    try:
        return Experiment.model_validate({"name": "view", **view})
    except ValidationError:
        return None


def _include_issues(data: dict) -> list[Issue]:
    """Includes that repeat a cell of the matrix or of an earlier include."""
    from cmx.engine.plan.matrix import expand_parts  # matrix imports this module

    exp = _expansion_view(data)
    if exp is None:
        return []
    product, included = expand_parts(exp)
    first: dict[str, str] = {cell.cell_id: "the matrix" for cell in product}
    issues = []
    for number, cell in enumerate(included, 1):
        if cell.cell_id in first:
            where = first[cell.cell_id]
            already = "already in the matrix" if where == "the matrix" else f"already added by {where}"
            issues.append(Issue(("include", number - 1),
                                f"include #{number} repeats cell {cell.cell_id} {already}: remove it"))
        else:
            first[cell.cell_id] = f"include #{number}"
    return issues


def _param_path(data: dict, field: str) -> tuple:
    """Where the file sets workload param ``field`` (the first place found)."""
    name = f"params.{field}"
    spec = data.get("workload") or {}
    if isinstance(spec.get("params"), dict) and field in spec["params"]:
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


def _cell_issues(exp: Experiment, data: dict) -> list[Issue]:
    """Checks of the expanded cells of an otherwise valid file: something runs, and every cell's
    params pass the workload's own rules (its validators see all params together, so a single
    value can be fine and a combination not: sleep_max_s below sleep_min_s)."""
    from cmx.engine.plan.matrix import expand  # matrix imports this module

    cells = expand(exp)
    if not cells:
        return [Issue(("exclude",) if exp.exclude else (), "the exclude rules drop every cell: nothing "
                      "would run; narrow a rule or remove it")]
    params = registry.get(exp.workload.name).Params
    issues, seen = [], set()
    for cell in cells:
        given = {k[len("params."):]: v for k, v in cell.values.items() if k.startswith("params.")}
        try:
            params.model_validate(given)
        except ValidationError as exc:
            for error in exc.errors():
                field = str(error["loc"][0]) if error["loc"] else ""
                key = (field, _pydantic_message(error))
                if key in seen:  # one line per rule broken, not one per cell breaking it
                    continue
                seen.add(key)
                message = f"workload '{exp.workload.name}': {key[1]}"
                if field in given:
                    message += f" (params.{field}={json.dumps(given[field], default=str)} in cell {cell.cell_id})"
                issues.append(Issue(_param_path(data, field), message))
    return issues


def _user_code_issues(exp: Experiment, data: dict) -> list[Issue]:
    """The user's code the cells use exists, imports and has the task (engine/model/user_code.py)."""
    from cmx.engine.plan.matrix import expand  # matrix imports this module
    from cmx.engine.model.user_code import check_tasks, sources

    cells = expand(exp)
    try:
        sources(exp, cells)
    except ValueError as exc:
        return [Issue(("workload",), str(exc))]
    issues = []
    for field, value, message in check_tasks(exp, cells):
        issues.append(Issue(_value_path(data, field, value), message))
    return issues


def _value_path(data: dict, field: str, value: Any) -> tuple:
    """Where the file sets workload param ``field`` to ``value``: the item of a dimension's list
    when one holds it, else the first place the param is set."""
    name = f"params.{field}"
    lists = [(s, name) for s in ("matrix",) if isinstance(data.get(s), dict)]
    lists += [("zip", i, name) for i, g in enumerate(data.get("zip") or []) if isinstance(g, dict)]
    for path in lists:
        node = data
        for key in path:
            node = node.get(key) if isinstance(node, dict) else (node[key] if isinstance(node, list) else None)
        if isinstance(node, list) and value in node:
            return path + (node.index(value),)
    return _param_path(data, field)


# --------------------------------------------------------------------------- loading


def _to_problem(file: str, positions: Positions, issue: Issue) -> Problem:
    line, col = positions.key(issue.path) if issue.at_key else positions.of(issue.path)
    return Problem(issue.message, file, line, col)


# Sections whose shape and values _Checker reports with better messages than pydantic's.
_CHECKED_SECTIONS = {("fixed",), ("matrix",), ("zip",), ("exclude",), ("include",), ("workload", "params")}


def _covered(loc: tuple) -> bool:
    return any(loc[:len(s)] == s for s in _CHECKED_SECTIONS)


def load_experiment(path: str | Path, max_cells: int = limits.DEFAULT_MAX_CELLS) -> Experiment:
    """Load and validate an experiment file. Raises InputError listing every problem found.
    A matrix of more than ``max_cells`` cells is refused before it is expanded."""
    file = str(path)
    data, positions = load_yaml(path)
    registry.search_in(Path(file).parent)  # the user's workload classes sit next to the file

    issues: list[Issue] = []
    if "source" in data:
        issues.append(Issue(("source",), f"unknown key 'source' (allowed: "
                                         f"{', '.join(_ALLOWED_KEYS[()])})", at_key=True))
        data = {k: v for k, v in data.items() if k != "source"}

    checker_issues = _Checker(data).run()
    issues.extend(checker_issues)

    experiment = None
    try:
        experiment = Experiment.model_validate({**data, "source": file})
    except ValidationError as exc:
        structural = _pydantic_issues(exc)
        kept = [i for i in structural if not _covered(i.path)]
        # Never hide pydantic's findings if the checker had nothing to say about them.
        issues.extend(kept if (kept or checker_issues) else structural)

    cells, where = limits.count_cells(data)
    if cells > max_cells:  # counted, not expanded: 10^11 cells is refused as fast as 10
        issues.append(Issue(where, limits.too_many_cells(cells, max_cells), at_key=True))
    else:
        issues.extend(_include_issues(data))
    if experiment is not None and not issues:
        issues.extend(_cell_issues(experiment, data))
    if experiment is not None and not issues:
        issues.extend(_user_code_issues(experiment, data))

    if issues:
        problems = [_to_problem(file, positions, i) for i in issues]
        problems.sort(key=lambda p: (p.line or 0, p.col or 0))
        if len(problems) >= limits.MAX_PROBLEMS:  # the checks stopped looking: say so
            problems = problems[:limits.MAX_PROBLEMS] + [
                Problem(f"... and maybe more problems: fix these {limits.MAX_PROBLEMS} first", file)]
        raise InputError(problems)
    return experiment
