"""``cmx schema``: the JSON Schema (draft 2020-12) of the experiment file, from the models that validate it.

The top level comes from :class:`cmx.engine.model.experiment.Experiment`; the built-in dimensions
and worker flags from their registry (:mod:`cmx.workloads.vocab.dimensions`); each built-in workload's params
from its pydantic ``Params`` model, applied by an ``if``/``then`` on ``workload.name``. What a
schema cannot say (a param required unless a dimension sets it, includes that repeat a cell, the
user's module importing) stays with ``cmx validate``.
"""

from __future__ import annotations

import copy
import json

from pydantic.json_schema import models_json_schema

from cmx.engine.model.dimensions import json_schema
from cmx.engine.model import thresholds as threshold_rules
from cmx.engine.model.experiment import Experiment
from cmx.workloads.catalog import registry
from cmx.workloads.vocab.dimensions import DIMENSIONS, FLAG_NAMES, VERSIONED

SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"
#: Where the committed copy lives (shipped experiments point editors at it).
COMMITTED = "docs/cmx.schema.json"

_DURATION = {
    "anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": r"^(\d+(\.\d+)?(ms|h|m|s))+$"}]
}
_JSON_SCALAR = [{"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]
# A Celery setting may take a mapping (broker_transport_options) or a list; `cmx validate` types
# each one from Celery's own table (engine/model/celery_settings.py), which a schema cannot express.
_CELERY_VALUE = {
    "anyOf": [
        *_JSON_SCALAR,
        {"type": "object"},
        {"type": "array", "items": {"anyOf": [*_JSON_SCALAR, {"type": "object"}]}},
    ]
}
_PATTERNS = {
    r"^params\.[A-Za-z_][A-Za-z0-9_]*$": {"description": "a param of the workload as a dimension, typed by its params"},
    r"^celery\.[a-z][a-z0-9_]*$": {
        **_CELERY_VALUE,
        "description": (
            "any Celery setting by its lowercase name, typed by Celery's own table when validated (a setting a "
            "built-in dimension or the harness owns is refused)"
        ),
    },
    rf"^worker\.({'|'.join(FLAG_NAMES)})$": {"type": "boolean", "description": "a worker switch (off unless set)"},
    rf"^package\.({'|'.join(VERSIONED)})$": {
        "type": "string",
        "minLength": 1,
        "description": "a version (\"5.5.3\") or specifier set (\">=5.5,<5.6\") of the package the run's "
        "worker and driver import; the package index or wheelhouse must have it",
    },
}


def _values(one: dict) -> dict:
    return {"type": "array", "minItems": 1, "items": one}


def _one_or_list(one: dict) -> dict:
    return {"anyOf": [one, {"type": "array", "items": one}]}


def _section(shape) -> dict:
    """A mapping of dimension -> ``shape(value schema)``."""
    props = {d.name: shape(json_schema(d)) for d in DIMENSIONS}
    patterns = {pattern: shape(value) for pattern, value in _PATTERNS.items()}
    return {"type": "object", "properties": props, "patternProperties": patterns, "additionalProperties": False}


_SHAPES = {"fixed": lambda v: v, "matrix": _values, "zip": _values, "exclude": _one_or_list, "include": lambda v: v}


_SECTION_HELP = {
    "fixed": "dimension values shared by every cell",
    "matrix": "dimensions and their values, crossed (the cartesian product)",
    "zip": "groups of equal-length lists that vary together, crossed with the matrix",
    "exclude": "drop the cells matching all keys of an entry (a list matches any of its values)",
    "include": "extra cells added after exclude (unset keys: fixed, then the defaults)",
}


def _sections() -> dict:
    """fixed, matrix, zip, exclude and include, each defined once in ``$defs``."""
    shapes = {
        "fixed": {"$ref": "#/$defs/cmx_fixed"},
        "matrix": {"$ref": "#/$defs/cmx_matrix"},
        **{
            name: {"type": "array", "items": {"$ref": f"#/$defs/cmx_{name}", "minProperties": 1}}
            for name in ("zip", "exclude", "include")
        },
    }
    return {name: {**shape, "description": _SECTION_HELP[name]} for name, shape in shapes.items()}


def _workload_sections(ref: str, fields: dict[str, dict]) -> dict:
    """The sections again for one workload: its ``params.NAME`` values typed by its fields, and
    no other ``params.*`` name."""
    names = {
        "anyOf": [
            {"enum": [*(d.name for d in DIMENSIONS), *(f"params.{f}" for f in fields)]},
            *({"pattern": p} for p in _PATTERNS if not p.startswith(r"^params")),
        ]
    }
    out = {}
    for section, shape in _SHAPES.items():
        one = {
            "properties": {f"params.{f}": shape({"$ref": f"#/$defs/{ref}/properties/{f}"}) for f in fields},
            "propertyNames": names,
        }
        out[section] = one if section in ("fixed", "matrix") else {"items": one}
    return out


def _open_params(schema: dict, ref: str) -> dict:
    """A workload's params as the file may give them in ``workload.params``: any required field
    may come from a dimension instead, so nothing is required here."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {f: {"$ref": f"#/$defs/{ref}/properties/{f}"} for f in schema["properties"]},
    }


def experiment_schema() -> dict:
    """The JSON Schema of an experiment file."""
    builtins = {name: registry.WORKLOADS[name].Params for name in registry.names()}
    keyed, top = models_json_schema(
        [(Experiment, "validation")] + [(model, "validation") for model in builtins.values()],
        ref_template="#/$defs/{model}",
    )
    defs = top["$defs"]
    root = copy.deepcopy(defs.pop("Experiment"))
    root["properties"].pop("source", None)
    root["properties"]["thresholds"]["additionalProperties"] |= {"pattern": threshold_rules.PATTERN}
    root["properties"]["thresholds"]["description"] = (
        "METRIC: 'OP NUMBER[UNIT]' (OP: >=, <=, >, <, ==), checked per cell on the median of its ok runs "
        "when a sweep ends; a crossed threshold makes `cmx run` exit 3"
    )
    root["properties"].update(_sections())
    defs.update({f"cmx_{section}": _section(shape) for section, shape in _SHAPES.items()})
    spec = defs["WorkloadSpec"]
    spec["properties"]["name"] = {
        "description": "a built-in workload, or your own class: ./file.py:Class or pkg.mod:Class",
        "anyOf": [{"enum": registry.names()}, {"type": "string", "pattern": r"^[^:\s]+:[A-Za-z_][A-Za-z0-9_]*$"}],
    }
    limits = defs["Limits"]["properties"]
    limits["run_timeout"] |= _DURATION
    limits["run_timeout"].pop("type", None)
    limits["run_timeout"].pop("exclusiveMinimum", None)
    for name in ("warmup", "fault_restart"):
        limits[name] |= {"anyOf": [{"type": "number", "minimum": 0}, _DURATION["anyOf"][1]]}
        limits[name].pop("type", None)
        limits[name].pop("minimum", None)
    limits["settle"] |= _DURATION
    limits["settle"].pop("type", None)
    limits["settle"].pop("exclusiveMinimum", None)

    branches = []
    for name, model in builtins.items():
        ref = keyed[(model, "validation")]["$ref"].rsplit("/", 1)[1]
        fields = defs[ref]["properties"]
        branches.append(
            {
                "if": {"properties": {"workload": {"properties": {"name": {"const": name}}}}},
                "then": {
                    "properties": {
                        "workload": {"properties": {"params": _open_params(defs[ref], ref)}},
                        **_workload_sections(ref, fields),
                    }
                },
            }
        )
    root["allOf"] = branches
    root["$defs"] = defs
    return {"$schema": SCHEMA_URI, **root, "title": "celery-matrix experiment"}


def schema_text() -> str:
    """What ``cmx schema`` prints (and ``docs/cmx.schema.json`` holds): stable, sorted JSON."""
    return json.dumps(experiment_schema(), indent=2, sort_keys=True) + "\n"
