"""The layout's rules, read from the source: no import cycle among the project's modules, none
over MAX_LINES lines (issue 15).

Imports are parsed with ``ast`` (nothing is imported): ``cmx.*`` names and relative imports are
resolved to the project's modules; imports under ``if TYPE_CHECKING:`` never run and do not count.
Two graphs are checked: module-level imports alone (a cycle there can break importing) and
module-level plus those inside functions (a cycle there is still a tangle: one room reaching
back into a room that depends on it).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Folder → import name (pyproject.toml's package-dir).
PACKAGES = {"engine": "cmx.engine", "workloads": "cmx.workloads", "analysis": "cmx.analysis", "cli": "cmx.cli"}
MAX_LINES = 400

#: Modules allowed over MAX_LINES while a split is under way (none now). A module leaves it as
#: soon as it fits (test_pending_lists_are_current says so).
PENDING_SPLIT: set[str] = set()
#: Import cycles tolerated while they are being broken (none now), each as module (or package)
#: names: a cycle whose every module is one of them or inside one of them is tolerated.
PENDING_CYCLES: list[set[str]] = []


def _modules() -> dict[str, Path]:
    found = {}
    for folder, name in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([name, *parts])] = path
    return found


MODULES = _modules()


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, in_function: bool = False):
    """(node, in_function) for every import that can run, skipping ``if TYPE_CHECKING:`` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), in_function)
        else:
            inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from _imports(node, inner)


def _with_parents(name: str) -> list[str]:
    """A module and the packages importing it runs (their ``__init__``), that are ours."""
    parts = name.split(".")
    return [m for m in (".".join(parts[:i]) for i in range(2, len(parts) + 1)) if m in MODULES]


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        direct = {alias.name for alias in node.names}
    else:
        base = node.module or ""
        if node.level:
            is_package = MODULES[module].name == "__init__.py"
            anchor = module.split(".")
            anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
            base = ".".join([*anchor, *([base] if base else [])])
        # ``from pkg import mod`` imports the module pkg.mod; ``from pkg import name``, pkg itself
        direct = {f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names}
    found = {t for name in direct for t in _with_parents(name)}
    # The packages holding ``module`` are imported before it runs (Python imports a package before
    # its modules): reaching a sibling module through them is an edge to that module, not back up
    # to the package's __init__, unless the import takes a name from that __init__ itself.
    return {t for t in found if t in direct or not module.startswith(t + ".")}


def import_graph(include_functions: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges = graph.setdefault(module, set())
        for node, in_function in _imports(ast.parse(path.read_text(), str(path))):
            if include_functions or not in_function:
                edges.update(t for t in _targets(module, node) if t != module)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def _within(component: list[str], names: set[str]) -> bool:
    return all(any(m == n or m.startswith(n + ".") for n in names) for m in component)


def _pending(component: list[str]) -> bool:
    return any(_within(component, names) for names in PENDING_CYCLES)


def test_the_parser_sees_the_projects_modules_and_their_imports():
    graph = import_graph(include_functions=True)
    assert "cmx.workloads.host.sampler" in MODULES and "cmx.cli.main" in MODULES
    # One module-level import, one relative-free ``from pkg import mod``, one inside a function:
    assert "cmx.workloads.vocab.clientname" in import_graph(include_functions=False)["cmx.workloads.app.factory"]
    assert "cmx.workloads.catalog.registry" in graph["cmx.workloads.app.factory"]
    assert "cmx.workloads.drive.publisher" in graph["cmx.workloads.catalog.throughput"]
    assert "cmx.workloads.drive.publisher" not in import_graph(False)["cmx.workloads.catalog.throughput"]


def test_the_cycle_finder_finds_a_cycle_and_only_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set(), "c": {"b"}}) == []


@pytest.mark.parametrize("include_functions", [False, True], ids=["module-level", "with-function-level"])
def test_no_import_cycle(include_functions):
    found = [c for c in cycles(import_graph(include_functions)) if not _pending(c)]
    assert not found, "import cycles: " + "; ".join(" ↔ ".join(c) for c in found)


def test_no_module_over_the_size_limit():
    over = {
        str(path.relative_to(ROOT)): n
        for path in MODULES.values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    unexpected = {p: n for p, n in over.items() if p not in PENDING_SPLIT}
    assert not unexpected, f"modules over {MAX_LINES} lines: {unexpected}"


def test_no_two_test_files_share_a_name():
    """pytest imports test files by their basename (no __init__.py under tests/), so two files of one
    name in different folders stop the whole suite at collection, though each folder passes alone."""
    seen: dict[str, list[str]] = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert not {name: paths for name, paths in seen.items() if len(paths) > 1}


def test_pending_lists_are_current():
    """A pending entry that no longer applies is removed, so the lists only ever shrink."""
    fitting = [
        p for p in PENDING_SPLIT if not (ROOT / p).exists() or len((ROOT / p).read_text().splitlines()) <= MAX_LINES
    ]
    assert not fitting, f"remove from PENDING_SPLIT, they fit now: {fitting}"
    components = cycles(import_graph(include_functions=True))
    stale = [names for names in PENDING_CYCLES if not any(_within(c, names) for c in components)]
    assert not stale, f"remove from PENDING_CYCLES, no cycle left there: {stale}"


#: The rooms and what each may import (besides itself): the data's one-way path. The shipped
#: package (cmx.workloads) imports nothing of the controller's; analysis reads results, never
#: the reverse; the CLI is the one room that composes them all.
ROOMS = {
    "cmx.workloads": set(),
    "cmx.engine.errors": set(),
    "cmx.engine.paths": set(),
    "cmx.engine.replay": {"cmx.workloads", "cmx.engine.errors"},  # the replay workload reads profiles too
    "cmx.engine.limits": {"cmx.workloads"},
    "cmx.engine.model": {"cmx.workloads", "cmx.engine.errors", "cmx.engine.limits", "cmx.engine.paths"},
    "cmx.engine.plan": {"cmx.workloads", "cmx.engine.errors", "cmx.engine.limits", "cmx.engine.model"},
    "cmx.engine.hosts": {
        "cmx.workloads",
        "cmx.engine.errors",
        "cmx.engine.limits",
        "cmx.engine.model",
        "cmx.engine.paths",
    },
    "cmx.engine.results": {"cmx.workloads", "cmx.engine.errors", "cmx.engine.limits"},
    "cmx.engine.run": {
        "cmx.workloads",
        "cmx.engine.errors",
        "cmx.engine.limits",
        "cmx.engine.model",
        "cmx.engine.plan",
        "cmx.engine.hosts",
        "cmx.engine.results",
        "cmx.engine.paths",
    },
    "cmx.analysis": {
        "cmx.workloads",
        "cmx.engine.errors",
        "cmx.engine.limits",
        "cmx.engine.model",
        "cmx.engine.results",
        "cmx.engine.paths",
    },
    "cmx.cli": {
        "cmx.workloads",
        "cmx.engine.errors",
        "cmx.engine.limits",
        "cmx.engine.model",
        "cmx.engine.plan",
        "cmx.engine.hosts",
        "cmx.engine.results",
        "cmx.engine.run",
        "cmx.analysis",
        "cmx.engine.paths",
        "cmx.engine.replay",
    },
}


def _room(module: str) -> str | None:
    return max((r for r in ROOMS if module == r or module.startswith(r + ".")), key=len, default=None)


def test_every_module_is_in_a_room_and_imports_only_rooms_upstream():
    wrong = []
    for module, targets in import_graph(include_functions=True).items():
        room = _room(module)
        if room is None and module not in ("cmx.engine", "cmx.analysis"):  # the package markers
            wrong.append(f"{module}: in no room (add it to ROOMS)")
            continue
        for target in sorted(targets):
            there = _room(target)
            if there not in (room, None) and there not in ROOMS.get(room, set()):
                wrong.append(f"{module} imports {target} ({there} is downstream of {room})")
    assert not wrong, "\n".join(wrong)


#: The rooms inside the shipped package, bottom first: a module may import its own room and the
#: rooms before it, never one after (issue 27). Each room is a folder (issue 41): the vocabulary
#: (names, and the registries that are only names and tables) ◀ the servers (one module each) ◀ the
#: runtime every process shares (run spec, stamps, records, files) ◀ the drive (publishing, pacing,
#: waiting for workers) ◀ the catalog (what a workload is, and the workloads) ◀ the app factory and
#: the processes it makes (worker, driver) ◀ the host tools (agent, hostctl, sampler, probes,
#: leftovers).
WORKLOAD_ROOMS: list[tuple[str, set[str]]] = [
    ("vocabulary", {"cmx.workloads.vocab", "cmx.workloads.faults"}),
    ("servers", {"cmx.workloads.servers"}),
    ("runtime", {"cmx.workloads.runtime"}),
    ("drive", {"cmx.workloads.drive"}),
    ("catalog", {"cmx.workloads.catalog"}),
    ("app", {"cmx.workloads.app"}),
    ("host", {"cmx.workloads.host"}),
]


def test_the_shipped_packages_rooms_are_its_folders():
    """No module lies loose in workloads/ (besides the package marker): each is in its room's folder."""
    rooms = {name for _, names in WORKLOAD_ROOMS for name in names}
    assert all((ROOT / "workloads" / n.split(".", 2)[2]).is_dir() for n in rooms), rooms
    loose = sorted(p.name for p in (ROOT / "workloads").glob("*.py") if p.name != "__init__.py")
    assert not loose, f"modules outside a room's folder: {loose}"


def _workload_room(module: str) -> int | None:
    """The index in WORKLOAD_ROOMS of the room holding ``module`` (longest name that matches);
    None for the package marker (cmx/workloads/__init__.py: a docstring)."""
    if module == "cmx.workloads":
        return None
    best = max(
        (
            (len(name), i)
            for i, (_, names) in enumerate(WORKLOAD_ROOMS)
            for name in names
            if module == name or module.startswith(name + ".")
        ),
        default=None,
    )
    return best[1] if best else None


def test_the_shipped_packages_rooms_import_only_rooms_below():
    wrong = []
    for module, targets in import_graph(include_functions=True).items():
        if not module.startswith("cmx.workloads"):
            continue
        here = _workload_room(module)
        if module == "cmx.workloads":
            continue
        if here is None:
            wrong.append(f"{module}: in no room of WORKLOAD_ROOMS")
            continue
        for target in sorted(targets):
            there = _workload_room(target)
            if there is not None and there > here:
                wrong.append(f"{module} ({WORKLOAD_ROOMS[here][0]}) imports {target} ({WORKLOAD_ROOMS[there][0]})")
    assert not wrong, "\n".join(wrong)


def test_the_vocabulary_imports_nothing_of_cmx_but_itself():
    vocab = [m for m in MODULES if _workload_room(m) == 0]
    graph = import_graph(include_functions=True)
    assert "cmx.workloads.vocab.pools" in vocab
    for module in vocab:
        assert all(_workload_room(t) in (0, None) for t in graph[module]), (module, graph[module])


def test_analysis_reads_metric_definitions_never_a_workload_class():
    """Issue 41: analysis knows a workload by what its runs stored (names, units, direction, headline:
    the metric registry and table run_headlines), never by importing its class or a user's file;
    of the shipped package it reads only the vocabulary and the runtime's plain tables."""
    runtime = next(i for i, (name, _) in enumerate(WORKLOAD_ROOMS) if name == "runtime")
    wrong = [
        f"{module} imports {target}"
        for module, targets in import_graph(include_functions=True).items()
        if module.startswith("cmx.analysis")
        for target in sorted(targets)
        if target.startswith("cmx.workloads") and (_workload_room(target) or 0) > runtime
    ]
    assert not wrong, "\n".join(wrong)
    planted = {"cmx.analysis.x": {"cmx.workloads.catalog.registry"}}
    assert [t for ts in planted.values() for t in ts if (_workload_room(t) or 0) > runtime]  # the rule catches one


def test_a_unit_test_that_opens_a_socket_fails():
    """tests/unit/conftest.py refuses a unit test's network connection (a service test belongs in
    tests/integration); Unix sockets and a UDP "connect", which sends nothing, are allowed."""
    import socket

    from conftest import UnitTestOpenedASocket

    with socket.socket() as s, pytest.raises(UnitTestOpenedASocket, match="tests/integration"):
        s.connect(("127.0.0.1", 6379))
    with socket.socket() as s, pytest.raises(UnitTestOpenedASocket):
        s.connect_ex(("127.0.0.1", 5672))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.connect(("127.0.0.1", 9))
    a, b = socket.socketpair()
    a.close(), b.close()
