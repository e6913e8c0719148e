"""Upper bounds on what an experiment file may ask for: one table, read by the YAML reader, the
experiment checks and the CLI (``--max-cells``), and listed in docs/reference/experiment-file.md.

Why bounds at all: a file is input, and careless or hostile input (an alias bomb, a 10^11-cell
matrix, ``repeats: 1000000000000``) must be refused in well under a second, at its line and
column, before any host is provisioned, instead of exhausting memory or failing hours later.
The numbers are far above anything the reference studies need; each names what it protects.
"""

from __future__ import annotations

import math
from typing import Any

from cmx.workloads.vocab.dimensions import DIMENSIONS

# --------------------------------------------------------------------------- the YAML text

#: Largest file read (bytes): the biggest shipped experiment is ~2 KB, an inventory a few KB;
#: at this size the slowest file to check (every line a problem) still answers in about a second.
MAX_FILE_BYTES = 256 * 1024
#: Deepest nesting of mappings/lists (an experiment needs 4: zip -> group -> dimension -> values).
MAX_DEPTH = 64
#: Nodes of the document once every alias is expanded: what constructing and walking it costs.
#: An alias bomb ("billion laughs") is a small file that expands past this.
MAX_EXPANDED_NODES = 50_000

#: YAML files of an inventory directory (and its group_vars/, host_vars/) checked before Ansible reads them.
MAX_INVENTORY_FILES = 1000
#: Problems reported for one file: past this the rest are not even looked for (a file of 70,000
#: unknown keys would otherwise spend most of a minute suggesting a spelling for each).
MAX_PROBLEMS = 50

# --------------------------------------------------------------------------- the experiment

#: Cells a matrix may expand to unless ``--max-cells`` raises it (product × zip + include).
DEFAULT_MAX_CELLS = 10_000
#: Repeats of each cell.
MAX_REPEATS = 1000
#: Longest duration anywhere (run_timeout, warmup, settle, fault_restart, heartbeat, *_s params): one day.
MAX_DURATION_S = 86_400.0
#: limits.settle: a fault run ends after this long without a task finishing (its lost tasks counted).
DEFAULT_SETTLE_S = 10.0
#: limits.fault_restart: a killed or stopped worker's replacement starts this long after it exited.
DEFAULT_FAULT_RESTART_S = 1.0

#: Built-in dimensions: the largest value (a worker with more is not a benchmark cmx can run),
#: from the dimension registry (workloads/vocab/dimensions.py); durations are bounded by MAX_DURATION_S.
MAX_DIMENSION = {d.name: d.maximum for d in DIMENSIONS if d.maximum is not None}
_SECONDS = {d.name for d in DIMENSIONS if d.type == "seconds"}
#: Workload params by name, for every workload (built-in or the user's): counts of tasks and
#: the like, and sizes. A param not named here is bounded by its kind (see ``param_problem``).
MAX_PARAM = {
    "tasks": 100_000_000,
    "subtasks": 1_000_000,
    "requests": 10_000_000,
    "queries": 1_000_000,
    "client_threads": 10_000,
    "inner_workers": 10_000,
    "payload_bytes": 64 * 1024 * 1024,  # one task message; brokers cap messages near here
    "size_mb": 64 * 1024,  # memory a unit allocates (64 GiB)
    "rate": 10_000_000.0,  # tasks per second
}
#: Any other integer param.
MAX_INT_PARAM = 10**12


def file_too_big(size: int) -> str:
    return (
        f"the file is {size:,} bytes, over the limit of {MAX_FILE_BYTES:,} "
        f"(an experiment or inventory is a few KB): is this the right file?"
    )


def too_many_cells(count: int, cap: int) -> str:
    return (
        f"the matrix expands to {count:,} cells, over the limit of {cap:,}: "
        f"narrow it, or pass --max-cells {count} if you really mean it"
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _show(value: float) -> str:
    if isinstance(value, int) or float(value).is_integer() and abs(value) < 1e18:
        return f"{int(value):,}"
    return f"{value:,g}"


def _over(name: str, value: float, top: float, unit: str = "") -> str:
    return f"{name} {_show(value)}{unit} is over the limit of {_show(top)}{unit}"


def value_problem(name: str, value: Any) -> str | None:
    """Why the (already type-checked) value of dimension or param ``name`` is out of bounds, or None.
    ``name`` is a dimension (``concurrency``, ``params.tasks``, ``celery.x``) or a top-level duration."""
    if isinstance(value, list):
        for item in value:  # io_chord's chords: [7, 3] and list-valued celery settings
            problem = value_problem(name, item)
            if problem:
                return problem
        return None
    if not _number(value):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{name} must be a finite number, got {value}"
    if name in MAX_DIMENSION and value > MAX_DIMENSION[name]:
        return _over(name, value, MAX_DIMENSION[name])
    if name in _SECONDS and value > MAX_DURATION_S:
        return _over(name, value, MAX_DURATION_S, " s")
    if name.startswith("params."):
        return param_problem(name, value)
    return None


def param_problem(name: str, value: float) -> str | None:
    field = name.removeprefix("params.")
    if field in MAX_PARAM and value > MAX_PARAM[field]:
        return _over(name, value, MAX_PARAM[field])
    if field.endswith("_s") and value > MAX_DURATION_S:
        return _over(name, value, MAX_DURATION_S, " s")
    if isinstance(value, int) and abs(value) > MAX_INT_PARAM:
        return _over(name, value, MAX_INT_PARAM)
    return None


def count_cells(data: dict) -> tuple[int, tuple]:
    """The number of cells the raw document would expand to (before exclude: an upper bound),
    computed from list lengths without expanding anything, and where to point when it is too
    many. Malformed parts count as one (the checks report them)."""
    count, where, biggest = 1, ("matrix",), 0
    matrix = data.get("matrix")
    if isinstance(matrix, dict):
        for dim, values in matrix.items():
            if isinstance(values, list) and values:
                count *= len(values)
                if len(values) > biggest:
                    biggest, where = len(values), ("matrix", dim)
    zips = data.get("zip")
    if isinstance(zips, list):
        for index, group in enumerate(zips):
            if isinstance(group, dict):
                lengths = [len(v) for v in group.values() if isinstance(v, list) and v]
                if lengths:
                    count *= min(lengths)
                    if min(lengths) > biggest:
                        biggest, where = min(lengths), ("zip", index)
    include = data.get("include")
    if isinstance(include, list):
        count += len(include)
    return count, where


# --------------------------------------------------------------------------- package versions

#: Seconds one ``package.NAME`` version may take to be found (``pip download --no-deps`` from
#: the package index into the controller's cache) when no wheel of it is on this machine yet;
#: a found version is kept, so later checks of the same file cost nothing.
PACKAGE_LOOKUP_TIMEOUT_S = 60.0
