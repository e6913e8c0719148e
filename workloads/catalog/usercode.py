"""The user's own code (tasks modules, Celery apps, workload classes), where it lives and how it is imported.

On the controller it sits next to the experiment file; on every host it is shipped with the
workloads package into ``<lib>/cmx_user/`` (each file or package by its own name). Both sides
import it under the same module name (a file's stem, a package's folder name), so task names that
Celery derives from ``__module__`` are the same on the driver and the workers.

The user's folder goes at the END of ``sys.path``: a user file called ``json.py`` must never shadow
the standard library for the harness; a name that collides is refused instead (:func:`import_module`).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: Where the shipped user code is on a host (beside the shipped ``workloads`` package).
_PACKAGE = Path(__file__).resolve().parents[1]  # the workloads folder
# Shipped, the user's code sits beside cmx/ (lib/<key>/cmx/workloads, lib/<key>/cmx_user); in a
# checkout the workloads folder is at the top.
USER_DIR = (_PACKAGE.parents[1] if _PACKAGE.parent.name == "cmx" else _PACKAGE.parent) / "cmx_user"
#: Top-level names the harness itself needs: a user module may not take them.
RESERVED = frozenset({"cmx", "workloads", "engine", "analysis", "cmx_user", "celery", "kombu"})


def module_name(module: str) -> str:
    """The import name of a ``module`` param: ``mytasks.py`` -> ``mytasks``, ``pkg/`` -> ``pkg``."""
    path = Path(module.rstrip("/"))
    return path.stem if path.suffix == ".py" else path.name


def parse_object_ref(ref: str) -> tuple[str, str]:
    """``pkg.mod:attr`` or ``./file.py:attr`` -> (module part, attribute)."""
    where, sep, attr = ref.rpartition(":")
    if not sep or not where or not attr.isidentifier():
        raise ValueError(f"expected MODULE:NAME or ./FILE.py:NAME, got {ref!r}")
    return where, attr


def is_file_ref(where: str) -> bool:
    return where.endswith(".py") or "/" in where


def add_to_path(folder: Path) -> None:
    folder = str(Path(folder).resolve())
    if folder not in sys.path:
        sys.path.append(folder)


def import_module(name: str, folder: Path) -> ModuleType:
    """Import the user's module ``name`` (dotted) from ``folder``; refuses an installed module of
    the same name, which would otherwise be imported in the user's place."""
    top = name.split(".")[0]
    if top in RESERVED:
        raise ImportError(f"the user module name {top!r} is taken by the harness; rename it")
    add_to_path(folder)
    module = importlib.import_module(name)
    origin = Path(getattr(module, "__file__", None) or "").resolve()
    if not origin.is_relative_to(Path(folder).resolve()):
        raise ImportError(
            f"module {top!r} is already installed ({origin}); rename your module so yours is the one imported"
        )
    return module


def import_file(path: Path) -> ModuleType:
    """Import a .py file under its stem as module name (the same name on every host)."""
    path = Path(path).resolve()
    name = path.stem
    if name in RESERVED:
        raise ImportError(f"the user module name {name!r} is taken by the harness; rename {path.name}")
    loaded = sys.modules.get(name)
    if loaded is not None and Path(getattr(loaded, "__file__", "") or "").resolve() == path:
        return loaded
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_object(ref: str, folders: list[Path]):
    """The object ``ref`` names: ``./file.py:Name`` (a file in one of ``folders``, searched by its
    path, then by its bare name as shipped) or ``pkg.mod:Name`` (importable, or found in ``folders``)."""
    where, attr = parse_object_ref(ref)
    if is_file_ref(where):
        for folder in folders:
            for candidate in (Path(folder) / where, Path(folder) / Path(where).name):
                if candidate.is_file():
                    module = import_file(candidate)
                    break
            else:
                continue
            break
        else:
            looked = ", ".join(str(f) for f in folders if Path(f).is_dir())
            raise FileNotFoundError(f"no file {where} (looked in {looked or 'no folder'})")
    else:
        for folder in folders:
            top = where.split(".")[0]
            if (Path(folder) / top).is_dir() or (Path(folder) / f"{top}.py").is_file():
                add_to_path(folder)
        module = importlib.import_module(where)
    try:
        return getattr(module, attr)
    except AttributeError:
        raise AttributeError(f"{where} has no {attr!r}") from None


def user_folders(extra: Path | None = None) -> list[Path]:
    """Where user code is looked for: ``extra`` (the experiment's folder on the controller), then
    the shipped folder (on hosts)."""
    return ([Path(extra)] if extra is not None else []) + [USER_DIR]
