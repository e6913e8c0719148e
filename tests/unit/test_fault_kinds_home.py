"""A fault kind's name is written once, in its module of workloads/faults/ (issue 41 point 2), and
read from the registry there: engine/, workloads/ and analysis/ code elsewhere spells none, neither
in a string (a whole literal, or a word of a longer one: a message, a comparison, an f-string's
text) nor in a name (a variable, function, attribute, argument or import). Docstrings and comments
are prose and do not count; the database keeps the kind's text as the kind module names it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from cmx.workloads.faults import registry

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("engine", "workloads", "analysis")
#: Where the kinds are written: their package.
HOME = "workloads/faults/"
KINDS = tuple(registry.KINDS)
_WORD = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, KINDS)) + r")(?![A-Za-z0-9_])", re.IGNORECASE)


def _docstrings(tree: ast.AST) -> set[int]:
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _names(node: ast.AST) -> list[str]:
    """The identifiers a node writes: a name, an attribute, a definition, an argument, a keyword,
    an import (module and alias)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword):
        return [node.arg] if node.arg else []
    if isinstance(node, ast.alias):
        return [n for n in (node.name, node.asname) if n]
    if isinstance(node, ast.ImportFrom):
        return [node.module] if node.module else []
    return []


def kind_spellings(source: str) -> list[tuple[int, str, str]]:
    """(line, the kind, where: ``string`` or ``name``) of every kind spelled in ``source``'s code."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            found += [(line, m.group(1), "string") for m in _WORD.finditer(node.value)]
        for name in _names(node):
            found += [(line, m.group(1), "name") for m in _WORD.finditer(name)]
    return sorted(found)


def scan(root: Path, folders=FOLDERS, home: str = HOME) -> list[str]:
    """Every kind spelled in the ``.py`` files of ``folders`` under ``root`` outside ``home``."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(home):
                continue
            found += [
                f"{rel}:{line}: the fault kind {kind!r} in a {where} (read it from {home})"
                for line, kind, where in kind_spellings(path.read_text())
            ]
    return found


def test_every_kind_has_its_module_and_its_name_once():
    kinds = list(registry.KINDS.values())
    assert len(kinds) >= 6 and len({k.name for k in kinds}) == len(kinds)
    for kind in kinds:  # the module holding a kind is named after it
        assert type(kind).__module__ == f"cmx.workloads.faults.{kind.name}", kind.name


def test_the_scan_sees_a_kind_in_a_string_or_a_name_and_not_in_prose():
    kind, other = KINDS[0], KINDS[-1]
    source = (
        f'"""{kind} in a docstring is prose."""\n'
        f'# {kind} in a comment too\n'
        f'def f(fault):\n'
        f'    """{other}: prose again."""\n'
        f'    if fault.kind == "{kind}":\n'
        f'        raise ValueError(f"fault {{fault}}: {other} cannot run here")\n'
        f'    {other.upper()} = 1\n'
        f'    return fault.kinds_{kind}x\n'
    )  # a longer word is not the kind
    assert kind_spellings(source) == sorted([(5, kind, "string"), (6, other, "string"), (7, other.upper(), "name")])


def test_the_scan_fails_on_a_kind_planted_outside_its_home(tmp_path):
    """A module of engine/ that compares a fault's kind with a literal, and one of workloads/ that
    names a function after a kind: both are found, the same module inside the home is not."""
    kind = KINDS[1]
    (tmp_path / "engine" / "run").mkdir(parents=True)
    (tmp_path / "engine" / "run" / "planted.py").write_text(f'def ends(fault):\n    return fault.kind == "{kind}"\n')
    (tmp_path / "workloads" / "faults").mkdir(parents=True)
    (tmp_path / "workloads" / "host.py").write_text(f"def {kind}(pid):\n    return pid\n")
    (tmp_path / "workloads" / "faults" / f"{kind}.py").write_text(f'NAME = "{kind}"\n')
    assert scan(tmp_path) == [
        f"engine/run/planted.py:2: the fault kind {kind!r} in a string (read it from {HOME})",
        f"workloads/host.py:1: the fault kind {kind!r} in a name (read it from {HOME})",
    ]


def test_no_fault_kind_is_spelled_outside_its_package():
    found = scan(ROOT)
    assert not found, "\n".join(found)
