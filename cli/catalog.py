"""``cmx workloads``: every built-in workload and every user workload class found in a folder,
with each param's type, default and description (from the params models themselves)."""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic_core import PydanticUndefined

from cmx.workloads.catalog import registry, usercode
from cmx.workloads.catalog.base import Workload


@dataclass(frozen=True)
class Param:
    name: str
    type: str
    default: str
    description: str


@dataclass(frozen=True)
class Entry:
    name: str  # what `workload.name` says in an experiment
    where: str  # built-in, or the file it was found in
    doc: str
    params: tuple[Param, ...]


def type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return "|".join(str(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(a) for a in args)
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def params_of(cls: type[Workload]) -> tuple[Param, ...]:
    out = []
    for name, info in cls.Params.model_fields.items():
        if info.default is PydanticUndefined and info.default_factory is None:
            default = "(required)"
        else:
            default = repr(info.get_default(call_default_factory=True))
        out.append(Param(name, type_name(info.annotation), default, info.description or ""))
    return tuple(out)


def _doc(cls: type) -> str:
    import sys

    text = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip()
    return text.splitlines()[0] if text else ""


def builtins() -> list[Entry]:
    return [
        Entry(name, "built-in", _doc(registry.WORKLOADS[name]), params_of(registry.WORKLOADS[name]))
        for name in registry.names()
    ]


def discover(folder: Path) -> tuple[list[Entry], list[str]]:
    """User workload classes in the .py files of ``folder`` (those that mention ``Workload``),
    and a line per file that did not import."""
    found, problems = [], []
    for path in sorted(Path(folder).glob("*.py")):
        try:
            if "Workload" not in path.read_text(errors="replace"):
                continue
            module = usercode.import_file(path)
        except Exception as exc:
            problems.append(f"{path}: {type(exc).__name__}: {exc}".splitlines()[0])
            continue
        for obj in vars(module).values():
            if (
                isinstance(obj, type)
                and issubclass(obj, Workload)
                and obj.__module__ == module.__name__
                and not getattr(obj, "__abstractmethods__", None)
                and hasattr(obj, "Params")
            ):
                found.append(Entry(f"./{path.name}:{obj.__name__}", str(path), _doc(obj), params_of(obj)))
    return found, problems
