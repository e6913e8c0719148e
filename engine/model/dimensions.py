"""Dimension names and values as an experiment file gives them: which names are dimensions, and
the canonical form of a value (or a one-line reason it is refused).

The built-in dimensions come from the registry in :mod:`cmx.workloads.vocab.dimensions` (their type,
choices, bounds and defaults); ``params.*`` are typed by the workload's ``Params`` model,
``celery.*`` by Celery's own table (engine/model/celery_settings.py), ``worker.*`` are booleans,
``package.*`` are version specs (whether the registry has the version: engine/model/packages.py).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from pydantic import TypeAdapter, ValidationError

from cmx.engine.errors import suggest
from cmx.engine.model import celery_settings
from cmx.workloads import faults
from cmx.workloads.catalog.base import WorkloadParams
from cmx.workloads.catalog import registry
from cmx.workloads.vocab import kinds
from cmx.workloads.vocab.dimensions import BY_NAME, DIMENSIONS, FLAG_NAMES, PACKAGE_PREFIX, VERSIONED, Dimension


def defaults() -> dict[str, Any]:
    """Every built-in dimension's default: the values a cell has unless the file sets them."""
    return {d.name: d.default for d in DIMENSIONS}


def check_builtin(d: Dimension, value: Any) -> Any:
    """The canonical value of built-in dimension ``d``; ValueError with a one-line message when
    ``value`` is not one it takes."""
    if d.type == "fault":
        return faults.canonical(value)
    if d.type == "choice":
        if not isinstance(value, str) or value not in d.choices:
            raise ValueError(
                f"unknown {d.name} {value!r} (choose from {', '.join(d.choices)})" + suggest(str(value), d.choices)
            )
        return value
    # YAML 1.1 reads yes/no/on/off as booleans, which Python counts as ints: refuse them.
    if d.type == "integer":
        if isinstance(value, bool) or not isinstance(value, int) or value < d.minimum:
            raise ValueError(f"{d.name} must be an integer >= {d.minimum:g}, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < d.minimum:
        raise ValueError(f"{d.name} must be a number of seconds >= {d.minimum:g} (0 = off), got {value!r}")
    return float(value)


def json_schema(d: Dimension) -> dict:
    """The JSON Schema of one value of built-in dimension ``d`` (engine/model/schema.py)."""
    if d.type == "choice":
        return {"type": "string", "enum": list(d.choices), "description": d.description}
    if d.type == "fault":
        kinds = "|".join(faults.KINDS)
        time = r"\d+(\.\d+)?(ms|s|m|h)?"
        one = rf"({kinds})@{time}(/{time})?(:([1-9]\d*|{faults.ALL}))?"
        return {"type": "string", "pattern": rf"^(none|{one}(\+{one})*)$", "description": d.description}
    kind = "integer" if d.type == "integer" else "number"
    bound = {} if d.maximum is None else {"maximum": d.maximum}
    return {"type": kind, "minimum": d.minimum, **bound, "description": d.description}


def pydantic_message(error: dict) -> str:
    return error["msg"].removeprefix("Value error, ")


def name_problem(name: Any, params: type[WorkloadParams] | None) -> str | None:
    """Why ``name`` is not a dimension (None when it is). ``params`` is the workload's model,
    or None when the workload is unknown (then ``params.*`` names cannot be checked)."""
    if not isinstance(name, str):
        return f"dimension names must be strings, got {name!r}"
    if name in BY_NAME:
        return None
    if name.startswith("params."):
        field = name[len("params.") :]
        if params is None or field in params.model_fields:
            return None
        known = ", ".join(sorted(params.model_fields))
        return f"unknown workload param '{name}' (known: {known})" + suggest(
            field, list(params.model_fields), "params."
        )
    if name.startswith("worker."):
        flag = name[len("worker.") :]
        if flag in FLAG_NAMES:
            return None
        return f"unknown worker flag '{name}' (known: {', '.join('worker.' + f for f in FLAG_NAMES)})" + suggest(
            flag, list(FLAG_NAMES), "worker."
        )
    if name.startswith("celery."):
        return celery_settings.name_problem(name)  # typed from Celery's table; owned ones refused
    if name.startswith(PACKAGE_PREFIX):
        package = name[len(PACKAGE_PREFIX) :]
        if package in VERSIONED:
            return None
        return (
            f"unknown package '{name}' (a version can be chosen of: "
            f"{', '.join(PACKAGE_PREFIX + p for p in VERSIONED)})" + suggest(package, list(VERSIONED), PACKAGE_PREFIX)
        )
    return (
        f"unknown dimension '{name}' (built-ins: {', '.join(BY_NAME)}; "
        f"or params.NAME / celery.SETTING / worker.FLAG / package.NAME)" + suggest(name, list(BY_NAME))
    )


def check_version_spec(name: str, value: Any) -> str:
    """The canonical form of a ``package.*`` value: a version (``5.5.3``) or a PEP 440 specifier
    set (``>=5.5,<5.6``), as a string; ValueError with a one-line message otherwise."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if not isinstance(value, str):
        # YAML reads 5.10 as the number 5.1: a version must be quoted to mean what it says.
        raise ValueError(f"{name} takes a version as a string, e.g. \"5.5.3\" (quote it), got {value!r}")
    text = value.strip()
    try:
        if text[:1].isdigit():
            Version(text)
        else:
            SpecifierSet(text)
            if not text:
                raise InvalidSpecifier(text)
    except (InvalidVersion, InvalidSpecifier):
        raise ValueError(
            f"{name}: {value!r} is neither a version (5.5.3) nor a version specifier (>=5.5,<5.6)"
        ) from None
    return text


@lru_cache(maxsize=None)
def _param_adapter(params: type[WorkloadParams], field: str) -> TypeAdapter:
    info = params.model_fields[field]
    # Annotated with the FieldInfo keeps the field's constraints (ge=1, Literal choices...).
    return TypeAdapter(Annotated[info.annotation, info])


def normalise_value(name: str, value: Any, params: type[WorkloadParams] | None) -> Any:
    """The canonical form of ``value`` for dimension ``name`` (heartbeat 0 -> 0.0,
    params.rate 100 -> 100.0). Raises ValueError with a one-line message when it is invalid.
    Assumes ``name`` is a valid dimension name."""
    if name in BY_NAME:
        return check_builtin(BY_NAME[name], value)
    if name.startswith("params.") and params is not None:
        adapter = _param_adapter(params, name[len("params.") :])
        try:
            return adapter.dump_python(adapter.validate_python(value), mode="json")
        except ValidationError as exc:
            raise ValueError(f"{name}: {pydantic_message(exc.errors()[0])}") from None
    if name.startswith("worker.") and not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {value!r}")
    if name.startswith("celery."):
        return celery_settings.check_value(name, value)
    if name.startswith(PACKAGE_PREFIX):
        return check_version_spec(name, value)
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
            if name_problem(name, params) is None:
                out[name] = normalise_value(name, values[name], params)
                continue
        except ValueError:
            pass
        out[name] = values[name]
    if "queue_type" in out and isinstance(out.get("broker"), str):  # an alias (rabbitmq-quorum): its own type
        out["queue_type"] = kinds.queue_type_of(out["broker"], out["queue_type"])
    return out
