"""The user's code of an experiment on the controller: what to ship to the hosts, and its checks.

Tasks modules (``tasks`` workload: ``params.module``, ``params.app``) and workload class files
(``workload.name: ./my_workload.py:Resize``) are found relative to the experiment file and shipped
with the workloads package, each under ``cmx_user/<its own name>`` (workloads/catalog/usercode.py).
They are checked before any host is touched: the file exists, it imports, the task is there.
The tasks module is imported in a subprocess with a time bound, never in cmx's own process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from cmx.workloads.catalog import registry, usercode

ENGINE_ROOT = Path(__file__).resolve().parents[2]
#: Seconds importing the user's module on the controller may take before validation gives up.
IMPORT_TIMEOUT_S = 60.0


def base_dir(exp) -> Path:
    return Path(exp.source).resolve().parent if exp.source else Path.cwd()


def _cell_params(cells) -> list[dict[str, Any]]:
    return [{k.removeprefix("params."): v for k, v in c.values.items() if k.startswith("params.")} for c in cells]


def _module_source(base: Path, module: str) -> Path | None:
    """The file or package folder a ``module`` param names, or None when there is none."""
    path = base / module
    if path.is_file() and path.suffix == ".py":
        return path
    if path.is_dir() and (path / "__init__.py").is_file():
        return path
    return None


def _top_level_source(base: Path, dotted: str) -> Path | None:
    top = dotted.split(".")[0]
    for candidate in (base / top, base / f"{top}.py"):
        found = _module_source(base, candidate.name)
        if found:
            return found
    return None


def sources(exp, cells) -> dict[str, Path]:
    """``cmx_user/<name>`` -> file or folder, for every piece of user code the sweep's cells use.
    Raises ValueError when two different sources would land under one name."""
    base = base_dir(exp)
    found: dict[str, Path] = {}

    def add(src: Path | None) -> None:
        if src is None:
            return
        name = f"cmx_user/{src.name}"
        if name in found and found[name] != src.resolve():
            raise ValueError(f"two user modules are both called {src.name} ({found[name]} and {src}); rename one")
        found[name] = src.resolve()

    name = exp.workload.name
    if registry.is_user_class(name):
        where, _ = usercode.parse_object_ref(name)
        add(_module_source(base, where) if usercode.is_file_ref(where) else _top_level_source(base, where))
    if name == "replay":  # the profile travels as user code does (workloads/catalog/replay.py)
        for params in _cell_params(cells):
            if params.get("profile"):
                add(_profile_source(base, params["profile"]))
    if name == "tasks":
        for params in _cell_params(cells):
            if params.get("module"):
                add(_module_source(base, params["module"]))
            if params.get("app"):
                add(_top_level_source(base, usercode.parse_object_ref(params["app"])[0]))
    return found


def workload_queues(exp, params: dict[str, Any]) -> list[str]:
    """The workload's own queues for a run with ``params`` (``Workload.queues``: replay's recorded ones)."""
    workload = registry.get(exp.workload.name)
    return list(workload.queues(workload.Params.model_validate(params), base_dir(exp)))


def _profile_source(base: Path, profile: str) -> Path:
    """The replay workload's profile file; ValueError naming where it was looked for."""
    path = base / profile
    if not path.is_file():
        raise ValueError(
            f"params.profile: no profile {profile} next to the experiment (looked for {path}; "
            "write one with cmx capture --out)"
        )
    return path


def check_replay(exp, cells) -> list[tuple[str, Any, str]]:
    """Problems with the ``replay`` workload's params, as (param, value, message): the profile
    must be one, and each of ``names`` a name it recorded."""
    if exp.workload.name != "replay":
        return []
    from cmx.workloads.catalog.replay_plan import read_rows, task_names

    problems: list[tuple[str, Any, str]] = []
    for params in _cell_params(cells):
        path = base_dir(exp) / params.get("profile", "")
        if not path.is_file():
            continue  # sources() says so
        try:
            recorded = task_names(read_rows(path))
        except ValueError as exc:
            problems.append(("profile", params.get("profile"), f"params.profile: {exc}"))
            continue
        unknown = [n for n in params.get("names") or () if n not in recorded]
        if unknown:
            problems.append(
                (
                    "names",
                    params.get("names"),
                    f"params.names: {', '.join(map(repr, unknown))} not in "
                    f"the profile (it recorded: {', '.join(recorded[:10]) or 'no task'})",
                )
            )
    return list({p[2]: p for p in problems}.values())


def check_tasks(exp, cells) -> list[tuple[str, Any, str]]:
    """Problems with the ``tasks`` workload's code, as (param, value, message): the module must
    exist, import (in a subprocess, bounded) and register the task."""
    if exp.workload.name != "tasks":
        return []
    base = base_dir(exp)
    problems: list[tuple[str, Any, str]] = []
    done: set[str] = set()
    bad_modules: set[str] = set()
    for params in _cell_params(cells):
        module, task, app = params.get("module"), params.get("task"), params.get("app")
        key = json.dumps([module, task, app])
        if key in done:
            continue
        done.add(key)
        if module in bad_modules:
            continue
        if module is not None:
            bad_modules.add(module)  # until it passes: one line per bad module, not one per cell
            name = usercode.module_name(module)
            if _module_source(base, module) is None:
                problems.append(
                    (
                        "module",
                        module,
                        f"params.module: no {module} next to the experiment "
                        f"(looked for {base / module}: a .py file or a folder with __init__.py)",
                    )
                )
                continue
            if not name.isidentifier() or name in usercode.RESERVED:
                problems.append(
                    (
                        "module",
                        module,
                        f"params.module: {name!r} cannot be a module name "
                        "(use letters, digits and _, and not workloads, engine, celery…)",
                    )
                )
                continue
            if importlib.util.find_spec(name) is not None and _installed_elsewhere(name, base):
                problems.append(
                    ("module", module, f"params.module: an installed module is also called {name!r}; rename yours")
                )
                continue
            bad_modules.discard(module)
        error, where = _import_in_subprocess(params, base)
        if error and error.startswith("ModuleNotFoundError") and exp.workload.requirements:
            continue  # a package only the hosts get (workload.requirements): the workers' start checks it
        if error:
            field = "task" if error.startswith("KeyError") else ("app" if app and module is None else "module")
            at = f" (at {where})" if where else ""
            problems.append((field, params.get(field), f"params.{field}: importing your code failed: {error}{at}"))
    return problems


def _installed_elsewhere(name: str, base: Path) -> bool:
    spec = importlib.util.find_spec(name)
    origin = Path(spec.origin or "").resolve() if spec else None
    return bool(origin) and not origin.is_relative_to(base)


def _import_in_subprocess(params: dict, base: Path) -> tuple[str | None, str]:
    from cmx.workloads.catalog.user_tasks import check_script

    env = {**os.environ, "PYTHONPATH": str(ENGINE_ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", check_script(), json.dumps(params), str(base)],
            capture_output=True,
            text=True,
            timeout=IMPORT_TIMEOUT_S,
            cwd=str(base),
            env=env,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return f"it did not finish importing within {IMPORT_TIMEOUT_S:g} s", ""
    lines = proc.stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1]) if lines else {}
    except ValueError:
        out = {}
    if proc.returncode != 0 and not out:
        last = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        return last, ""
    return out.get("error"), out.get("where", "")
