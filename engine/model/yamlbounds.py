"""Bounded YAML reading: what a hostile or careless file cannot make cmx do.

PyYAML reads a whole file, recurses once per nesting level (a deep file is a RecursionError),
expands aliases without limit when the document is walked (a "billion laughs" file of a few
hundred bytes becomes 10^9 nodes), and lets Python raise plain ValueErrors for scalars such as
``2001-13-45`` or a 5,000-digit integer. Here each of those becomes a ``FILE:LINE:COL`` problem,
found in time proportional to the file's size (itself capped), before anything is constructed.
The caps live in ``cmx.engine.limits``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from cmx.engine import limits
from cmx.engine.errors import InputError, Problem

# What YAML 1.1 (and PyYAML's reader) accepts; anything else is refused with where it is.
_NOT_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
#: Longest integer literal: Python refuses to convert over 4,300 digits (with a ValueError).
_MAX_INT_CHARS = 100


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def read_text(path: str | Path) -> str:
    """The file's text, refused before reading it whole when it is over the size cap, and with
    the line and column of an undecodable byte or a control character."""
    file = str(path)
    try:
        with open(path, "rb") as f:
            data = f.read(limits.MAX_FILE_BYTES + 1)  # also bounds a FIFO or /dev/zero
    except OSError as exc:
        raise InputError(Problem(f"cannot read the file: {exc.strerror or exc}", file)) from None
    if len(data) > limits.MAX_FILE_BYTES:
        try:
            size = Path(path).stat().st_size or len(data)
        except OSError:
            size = len(data)
        raise InputError(Problem(limits.file_too_big(max(size, len(data))), file, 1, 1))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data[: exc.start].decode("utf-8", errors="replace")
        line, col = _line_col(good, len(good))
        raise InputError(
            Problem(f"byte 0x{data[exc.start]:02x} is not UTF-8: save the file as UTF-8", file, line, col)
        ) from None
    bad = _NOT_PRINTABLE.search(text)
    if bad:
        line, col = _line_col(text, bad.start())
        char = bad.group()
        what = "a NUL byte" if char == "\0" else f"control character U+{ord(char):04X}"
        raise InputError(Problem(f"{what} is not allowed in YAML: remove it (is this a text file?)", file, line, col))
    return text


#: libyaml when present: it parses ~10x faster than pure Python (a 1 MiB file in about a second).
_BASE: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class BoundedLoader(_BASE):  # type: ignore[misc, valid-type]
    """A safe loader that refuses nesting deeper than ``limits.MAX_DEPTH`` before composing:
    composition recurses once per level, so the depth is checked on the event stream first."""

    def __init__(self, stream: str, file: str):
        super().__init__(stream)
        self.file = file
        self._text = stream

    def get_single_node(self):
        _check_depth(self._text, self.file)
        return super().get_single_node()


def _check_depth(text: str, file: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=_BASE):  # a flat, non-recursive pass over the events
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > limits.MAX_DEPTH:
                mark = event.start_mark
                raise InputError(
                    Problem(
                        f"nested more than {limits.MAX_DEPTH} levels deep: an experiment or inventory needs a handful",
                        file,
                        mark.line + 1,
                        mark.column + 1,
                    )
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _problem(file: str, node: Node, message: str) -> InputError:
    return InputError(Problem(message, file, node.start_mark.line + 1, node.start_mark.column + 1))


def check_nodes(loader: yaml.SafeLoader, root: Node, file: str, finite: bool) -> None:
    """Refuse a composed document whose expansion is too big or recursive, and scalars Python
    cannot construct (bad dates, huge integers) or, with ``finite``, .inf and .nan."""
    size: dict[int, int] = {}  # id(node) -> nodes under it with aliases expanded
    active: set[int] = set()

    def visit(node: Node) -> int:
        key = id(node)
        if key in size:
            return size[key]  # an alias of a node already measured: counted again, not walked
        if key in active:
            raise _problem(
                file, node, "an alias refers to a node that contains it (a recursive anchor): expand it by hand"
            )
        active.add(key)
        total = 1
        if isinstance(node, SequenceNode):
            for item in node.value:
                total += visit(item)
        elif isinstance(node, MappingNode):
            for k, v in node.value:
                total += visit(k) + visit(v)
        elif isinstance(node, ScalarNode):
            _check_scalar(loader, node, file, finite)
        active.discard(key)
        if total > limits.MAX_EXPANDED_NODES:
            raise _problem(
                file,
                node,
                f"this value expands to more than {limits.MAX_EXPANDED_NODES:,} "
                f"values through its aliases (*name): write it out, or use fewer aliases",
            )
        size[key] = total
        return total

    visit(root)


def _check_scalar(loader: yaml.SafeLoader, node: ScalarNode, file: str, finite: bool) -> None:
    if node.tag == _INT_TAG and len(node.value) > _MAX_INT_CHARS:
        raise _problem(file, node, f"a number of {len(node.value)} digits: too long to be a setting")
    if node.tag == _TIMESTAMP_TAG:
        try:
            loader.construct_yaml_timestamp(node)
        except (ValueError, OverflowError) as exc:
            raise _problem(
                file, node, f"{node.value!r} reads as a date but is not one ({exc}): quote it to make it a string"
            ) from None
    if node.tag == _FLOAT_TAG and finite:
        value = loader.construct_yaml_float(node)
        if not math.isfinite(value):
            raise _problem(file, node, f"{node.value} is not a finite number: give a number")
