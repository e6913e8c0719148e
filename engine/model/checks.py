"""The dimension sections of an experiment file, checked on the raw document: ``fixed``,
``matrix``, ``zip``, ``exclude``, ``include`` and ``workload.params``.

These checks are the only ones these sections get (the pydantic model checks the rest of the
file: engine/model/load.py), so they are tolerant of wrong shapes and find every problem in one
pass, each as an :class:`Issue` that the loader turns into ``FILE:LINE:COL: message``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from cmx.engine import limits
from cmx.engine.errors import suggest
from cmx.engine.model.dimensions import name_problem, normalise_value
from cmx.workloads.catalog.base import WorkloadParams
from cmx.workloads.catalog import registry
from cmx.workloads.vocab.dimensions import BY_NAME

#: The sections checked here: the model takes them as they are once these checks pass.
SECTIONS = ("fixed", "matrix", "zip", "exclude", "include")


@dataclass(frozen=True)
class Issue:
    """A problem before it has a position: ``path`` into the document, and whether the key
    (rather than the value) at ``path`` is what is wrong."""

    path: tuple
    message: str
    at_key: bool = False


class Checker:
    """The checks of the dimension sections. After :meth:`run`, ``malformed`` says whether a
    section has the wrong shape (then it cannot be expanded into cells)."""

    def __init__(self, data: dict):
        self.data = data
        self.issues: list[Issue] = []
        self.params: type[WorkloadParams] | None = None
        self.workload: str | None = None
        #: dimension -> where it is set ("fixed", "matrix", "zip #2")
        self.set_in: dict[str, str] = {}
        #: A section is not the shape expansion needs (a mapping where a list goes...).
        self.malformed = False

    def add(self, path: tuple, message: str, at_key: bool = False, shape: bool = False) -> None:
        self.issues.append(Issue(path, message, at_key))
        self.malformed |= shape

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
        problem = name_problem(name, self.params)
        if problem:
            self.add(path, problem, at_key=True, shape=not isinstance(name, str))
        return problem is None

    def claim(self, path: tuple, name: str, where: str) -> None:
        """A dimension may be set in only one of fixed, matrix and the zip groups."""
        if name in self.set_in:
            self.add(path, f"'{name}' is set in both {self.set_in[name]} and {where}: keep one", at_key=True)
        else:
            self.set_in[name] = where

    def check_values_list(self, path: tuple, name: str, values: Any, section: str) -> list[str | None]:
        """Check a dimension's list of values; their canonical JSON (None where invalid)."""
        if not isinstance(values, list):
            example = values if isinstance(values, str) else json.dumps(values, default=str)
            self.add(
                path, f"dimension '{name}' in {section} must be a list of values, e.g. {name}: [{example}]", shape=True
            )
            return []
        if not values:
            self.add(path, f"dimension '{name}' has no values: give at least one or remove it")
            return []
        seen: dict[str, int] = {}
        canons = [self.check_value(path + (index,), name, value) for index, value in enumerate(values)]
        for index, canon in enumerate(canons):
            if canon is None:
                continue
            # In a zip group a value may recur (the tuples differ); in the matrix it would repeat cells.
            if canon in seen and section == "matrix":
                self.add(
                    path + (index,), f"dimension '{name}' lists {canon} twice (items {seen[canon] + 1} and {index + 1})"
                )
            else:
                seen[canon] = index
        return canons

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
                self.add(
                    ("workload", "name"),
                    f"unknown workload '{name}' "
                    f"(known: {', '.join(registry.names())})" + suggest(name, registry.names()),
                )
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
                self.add(
                    path,
                    f"unknown param '{key}' for workload '{self.workload}' "
                    f"(known: {', '.join(sorted(known))})" + suggest(str(key), known),
                    at_key=True,
                )
            else:
                self.check_value(path, f"params.{key}", value)

    def check_required_params(self) -> None:
        if self.params is None:
            return
        given = self.data["workload"].get("params")
        given = given if isinstance(given, dict) else {}
        for field, info in self.params.model_fields.items():
            if info.is_required() and field not in given and f"params.{field}" not in self.set_in:
                self.add(
                    ("workload",),
                    f"workload '{self.workload}' needs param '{field}': set it "
                    f"in workload.params or as dimension params.{field}",
                )

    def check_fixed(self) -> None:
        fixed = self.data.get("fixed", {})
        if not isinstance(fixed, dict):
            self.add(("fixed",), "fixed must be a mapping of dimension: value", shape=True)
            return
        for name, value in fixed.items():
            if self.check_name(("fixed", name), name):
                self.claim(("fixed", name), name, "fixed")
                if isinstance(value, list) and name in BY_NAME:
                    self.add(("fixed", name), f"fixed takes one value for '{name}'; to vary it, move it to matrix")
                else:
                    self.check_value(("fixed", name), name, value)

    def check_matrix(self) -> None:
        matrix = self.data.get("matrix", {})
        if not isinstance(matrix, dict):
            self.add(("matrix",), "matrix must be a mapping of dimension: [values]", shape=True)
            return
        for name, values in matrix.items():
            if self.check_name(("matrix", name), name):
                self.claim(("matrix", name), name, "matrix")
                self.check_values_list(("matrix", name), name, values, "matrix")

    def check_zip(self) -> None:
        groups = self.data.get("zip", [])
        if not isinstance(groups, list):
            self.add(("zip",), "zip must be a list of groups, e.g. - {a: [1, 2], b: [3, 4]}", shape=True)
            return
        for number, group in enumerate(groups, 1):
            path = ("zip", number - 1)
            if not isinstance(group, dict) or not group:
                self.add(
                    path,
                    f"zip #{number} must be a non-empty mapping of dimension: [values]",
                    shape=not isinstance(group, dict),
                )
                continue
            canons = {}
            for name, values in group.items():
                if self.check_name(path + (name,), name):
                    self.claim(path + (name,), name, f"zip #{number}")
                    canons[name] = self.check_values_list(path + (name,), name, values, f"zip #{number}")
            lengths = {name: len(v) for name, v in group.items() if isinstance(v, list)}
            if len(set(lengths.values())) > 1:
                listed = ", ".join(f"{name} has {n}" for name, n in lengths.items())
                self.add(path, f"zip #{number} lists must have the same length: {listed}")
            elif lengths and len(lengths) == len(group) == len(canons):
                self.check_zip_tuples(path, number, list(canons.values()))

    def check_zip_tuples(self, path: tuple, number: int, canons: list[list[str | None]]) -> None:
        """A zip item that repeats an earlier one would run the same cells twice. ``canons``: each
        dimension's values in canonical form, as check_values_list found them."""
        seen: dict[tuple, int] = {}
        for index, item in enumerate(zip(*canons)):
            if None in item:
                return  # an invalid value: reported by check_values_list
            if item in seen:
                self.add(
                    path,
                    f"zip #{number} repeats item {seen[item] + 1} at item {index + 1} "
                    f"(same value for every dimension): it would run the same cells twice",
                )
            else:
                seen[item] = index

    def check_rules(self, section: str) -> None:
        rules = self.data.get(section, [])
        if not isinstance(rules, list):
            self.add((section,), f"{section} must be a list of mappings of dimension: value", shape=True)
            return
        for number, rule in enumerate(rules, 1):
            path = (section, number - 1)
            if not isinstance(rule, dict) or not rule:
                what = "drop every cell" if section == "exclude" else "add nothing new"
                self.add(
                    path,
                    f"{section} #{number} must be a non-empty mapping of dimension: value (an empty one would {what})",
                    shape=not isinstance(rule, dict),
                )
                continue
            for name, value in rule.items():
                if not self.check_name(path + (name,), name):
                    continue
                if section == "exclude":
                    if (
                        name not in BY_NAME
                        and name not in self.set_in
                        and name.removeprefix("params.") not in self.workload_params()
                    ):
                        self.add(
                            path + (name,),
                            f"exclude #{number} names '{name}', which no cell "
                            f"sets, so it can never match: set it in fixed/matrix/zip or drop it",
                            at_key=True,
                        )
                        continue
                    # A list in an exclude rule means "any of these values".
                    items = value if isinstance(value, list) else [value]
                    for index, item in enumerate(items):
                        self.check_value(path + (name,) + ((index,) if isinstance(value, list) else ()), name, item)
                else:
                    self.check_value(path + (name,), name, value)
