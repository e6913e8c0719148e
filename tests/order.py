"""The order the parallel suite runs its tests in: the longest first, spread over the workers.

pytest-xdist's ``worksteal`` (Makefile: ``make test``) gives each of its N workers an equal count
of consecutive tests to start with, and a worker that runs out takes half of the longest queue's
end. In collection order one worker's share could hold the four longest modules and the
suite would wait on its tail. Here each worker's share is filled longest-first (LPT) from the
tests' measured seconds (``DURATIONS``), a module's tests kept together (its module fixtures run
once), and each share runs its longest module first: what is left to steal at the end is short.

A test marked ``alone`` (tests/alone.py) holds every worker while it runs, so it counts N times its
own seconds and goes last in its share.

``DURATIONS`` is measured: ``python -m tests.order JUNIT_XML`` rewrites it from a whole suite's
JUnit report (``make test`` writes one to /tmp/cmx-suite/junit.xml). A test it does not list counts
:data:`UNKNOWN_S`; a stale figure changes the order only, never a result.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

DURATIONS = Path(__file__).with_name("durations.json")

#: A test the table does not know (a unit test, or one added since the table was written).
UNKNOWN_S = 0.5
#: Tests shorter than this are left out of the table (they count UNKNOWN_S).
LISTED_FROM_S = 2.0


def _costs() -> dict[str, float]:
    try:
        return json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}


def shares(n: int, workers: int) -> list[int]:
    """How many tests worksteal first sends each worker, in order (xdist's check_schedule)."""
    sizes, left = [], n
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    return sizes


def arrange(items: list, workers: int, cost_of, alone) -> list:
    """``items`` reordered so that worksteal's first shares (:func:`shares`) are balanced by cost
    (``cost_of(item)`` seconds; ``alone(item)``: counts ``workers`` times and goes last)."""
    modules: dict[str, list] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def weight(item) -> float:
        return cost_of(item) * (workers if alone(item) else 1)

    units = sorted(modules.values(), key=lambda its: -sum(weight(i) for i in its))
    room = shares(len(items), workers)
    load = [0.0] * workers
    bins: list[list[list]] = [[] for _ in range(workers)]
    for unit in units:
        rest = list(unit)
        while rest:
            w = min((w for w in range(workers) if room[w]), key=lambda w: (load[w], w))
            part, rest = rest[: room[w]], rest[room[w] :]
            room[w] -= len(part)
            load[w] += sum(weight(i) for i in part)
            bins[w].append(part)
    out = []
    for parts in bins:
        parts.sort(key=lambda p: (any(alone(i) for i in p), -sum(weight(i) for i in p)))
        out.extend(i for p in parts for i in p)
    return out


#: The controller's ``--dist``, handed to each worker (tests/conftest.py, pytest_configure_node).
DIST = "cmx_dist"


def reorder(config, items: list) -> None:
    """pytest_collection_modifyitems: in an xdist worker under worksteal, :func:`arrange` in place
    (every worker computes the same order, as xdist requires)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or workerinput.get(DIST) != "worksteal":  # a worker's own --dist reads "no"
        return
    costs = _costs()
    items[:] = arrange(
        items,
        int(workerinput["workercount"]),
        lambda item: costs.get(item.nodeid, UNKNOWN_S),
        lambda item: item.get_closest_marker("alone") is not None,
    )


def table_from_junit(path: Path) -> dict[str, float]:
    """nodeid -> seconds (setup, call and teardown) of every test of at least LISTED_FROM_S."""
    import xml.etree.ElementTree as ET

    out = {}
    for case in ET.parse(path).iter("testcase"):
        seconds = float(case.get("time") or 0)
        if seconds >= LISTED_FROM_S:
            module = case.get("classname", "").replace(".", "/") + ".py"
            out[f"{module}::{case.get('name')}"] = round(seconds)
    return dict(sorted(out.items()))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.order JUNIT_XML  (rewrites tests/durations.json)")
    table = table_from_junit(Path(sys.argv[1]))
    DURATIONS.write_text(json.dumps(table, indent=0) + "\n")
    print(f"{DURATIONS}: {len(table)} tests of {LISTED_FROM_S:g} s or more, {sum(table.values()):.0f} s in all")
