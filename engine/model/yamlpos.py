"""Load YAML and remember where every node came from, so errors can say ``FILE:LINE:COL``.

A *path* is a tuple of mapping keys and list indexes from the document root, e.g.
``("matrix", "pool", 2)`` is the third value of ``matrix.pool``. Lines and columns are 1-based.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import yaml
from yaml.error import Mark, MarkedYAMLError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cmx.engine.errors import InputError, Problem
from cmx.engine.model.yamlbounds import BoundedLoader, check_nodes, read_text

_MERGE_TAG = "tag:yaml.org,2002:merge"

Position = tuple[int, int]


class Positions:
    """Where each node of a loaded document is.

    ``of(path)`` is the position of the value at ``path``; when nothing is known at ``path``
    (a missing key, or a location pydantic invented) it falls back to the deepest known
    ancestor, so a missing key is reported at the mapping that lacks it.
    ``key(path)`` is the position of the key itself when ``path`` ends in a mapping key.
    """

    def __init__(self, values: dict[tuple, Position], keys: dict[tuple, Position]):
        self._values = values
        self._keys = keys

    def of(self, path: tuple) -> Position:
        """Position of the value at ``path``, or of its deepest known ancestor (root: 1:1)."""
        path = tuple(path)
        while path:
            if path in self._values:
                return self._values[path]
            path = path[:-1]
        return self._values.get((), (1, 1))

    def key(self, path: tuple) -> Position:
        """Position of the mapping key ending ``path``; the value's position when it has no key."""
        path = tuple(path)
        if path in self._keys:
            return self._keys[path]
        return self.of(path)


def _pos(mark: Mark | None) -> Position:
    return (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)


def _problem(file: str, message: str, mark: Mark | None) -> Problem:
    line, col = _pos(mark)
    return Problem(message, file, line, col)


def _key_value(loader: yaml.SafeLoader, node: Node) -> Any:
    """The Python value of a mapping key, or None when it cannot be a dict key."""
    if not isinstance(node, ScalarNode):
        return None  # complex keys are rejected by the constructor with a proper message
    return loader.construct_object(node)


def _duplicate_keys(loader: yaml.SafeLoader, root: Node, file: str) -> list[Problem]:
    """Keys given twice in one mapping: PyYAML silently keeps the last one, we refuse."""
    problems: list[Problem] = []
    seen_nodes: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen_nodes:  # aliases share nodes; recursive anchors would loop
            continue
        seen_nodes.add(id(node))
        if isinstance(node, MappingNode):
            first: dict[Any, Mark] = {}
            for key_node, value_node in node.value:
                stack.append(value_node)
                if key_node.tag == _MERGE_TAG:
                    continue  # keys merged with << may legitimately be overridden
                key = _key_value(loader, key_node)
                if key is None:
                    continue
                if key in first:
                    line, _ = _pos(first[key])
                    problems.append(
                        _problem(
                            file, f"duplicate key {key!r} (first given on line {line}): keep one", key_node.start_mark
                        )
                    )
                else:
                    first[key] = key_node.start_mark
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)
    return problems


def _walk(loader: yaml.SafeLoader, root: Node) -> Positions:
    values: dict[tuple, Position] = {(): _pos(root.start_mark)}
    keys: dict[tuple, Position] = {}
    stack: list[tuple[Node, tuple, frozenset[int]]] = [(root, (), frozenset())]
    while stack:
        node, path, ancestors = stack.pop()
        if id(node) in ancestors:
            continue  # a recursive alias: positions of its first appearance are enough
        inner = ancestors | {id(node)}
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                key = _key_value(loader, key_node)
                try:
                    child = path + (key,)
                    hash(child)
                except TypeError:
                    continue
                keys[child] = _pos(key_node.start_mark)
                values[child] = _pos(value_node.start_mark)
                stack.append((value_node, child, inner))
        elif isinstance(node, SequenceNode):
            for index, item in enumerate(node.value):
                child = path + (index,)
                values[child] = _pos(item.start_mark)
                stack.append((item, child, inner))
    return Positions(values, keys)


@contextmanager
def _composed(path: str | Path, finite: bool = False) -> Iterator[tuple[yaml.SafeLoader, Node | None, str]]:
    """Read and compose the file (no tags resolved yet) within the bounds of cmx.engine.limits,
    refuse duplicate keys, and turn every YAML error raised inside the block into
    ``FILE:LINE:COL: invalid YAML: ...``. ``finite``: refuse .inf and .nan too."""
    file = str(path)
    text = read_text(path)  # size cap, UTF-8 and control characters, with positions
    loader = BoundedLoader(text, file)
    try:
        root = loader.get_single_node()
        if root is not None:
            check_nodes(loader, root, file, finite)  # alias bombs, recursion, unconstructible scalars
        if isinstance(root, MappingNode):
            duplicates = _duplicate_keys(loader, root, file)
            if duplicates:
                raise InputError(duplicates)
        yield loader, root, file
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        message = " ".join(p for p in (exc.context, exc.problem) if p)
        raise InputError(_problem(file, f"invalid YAML: {message}", mark)) from exc
    except yaml.YAMLError as exc:
        raise InputError(Problem(f"invalid YAML: {exc}", file, 1, 1)) from exc
    finally:
        loader.dispose()


def load_yaml(path: str | Path) -> tuple[dict, Positions]:
    """Load a YAML file whose top level is a mapping, with the position of every node.

    Raises InputError (``FILE:LINE:COL: message``) for unreadable files, syntax errors,
    duplicate keys, and a document that is empty or not a mapping.
    """
    with _composed(path, finite=True) as (loader, root, file):
        if root is None:
            raise InputError(Problem("the file is empty: expected a mapping (name: ..., workload: ...)", file, 1, 1))
        if not isinstance(root, MappingNode):
            raise InputError(Problem("the top level must be a mapping (name: ..., workload: ...)", file, 1, 1))
        # Constructing flattens << merges in place, so positions are walked afterwards.
        data = loader.construct_document(root)
        positions = _walk(loader, root)
    return data, positions


def check_yaml_syntax(path: str | Path) -> None:
    """Raise InputError at ``FILE:LINE:COL`` if the file is not well-formed YAML (or has a
    duplicate key). Tags are not resolved, so Ansible's ``!vault`` and friends pass."""
    with _composed(path):
        pass
