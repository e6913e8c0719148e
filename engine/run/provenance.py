"""Provenance of a sweep: which cmx (version, git commit) ran which definition on which inventory.

Stored with every sweep (``sweeps``), so a number can be traced to the code and the definition
that produced it. The definition hash also splits an experiment's runs into *revisions*: runs
under a different definition are never pooled with the earlier ones (as pyperf refuses to merge
runs whose metadata differ).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cmx.engine.errors import InputError, Problem
from cmx.engine.paths import ROOT, is_checkout

if TYPE_CHECKING:
    from cmx.engine.model.experiment import Experiment
    from cmx.engine.hosts.inventory import Inventory
    from cmx.engine.model.cells import Cell

GIT_TIMEOUT_S = 5.0


def cmx_version() -> str:
    """The installed version of celery-matrix, else the one in this checkout's pyproject.toml."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("celery-matrix")
    except PackageNotFoundError:
        import tomllib

        try:
            return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "unknown"


def git_state(repo: Path | None = None, timeout: float = GIT_TIMEOUT_S) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout cmx runs from (or of ``repo``); (None, None) when it is not a
    git checkout, git is missing, or git does not answer within ``timeout`` seconds. An installed
    cmx has no commit of its own: git would answer for whatever repository holds its venv."""
    if repo is None:
        if not is_checkout():
            return None, None
        repo = ROOT

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(
                ["git", "-C", str(repo), *args],
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None, None
    status = git("status", "--porcelain")
    return commit.strip(), (bool(status.strip()) if status is not None else None)


def _sha256(data: Any) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


#: Limits added after definitions had hashes (the fault runs' ``settle`` and ``fault_restart``): at
#: their default they are left out, so an unchanged experiment keeps its revision after an upgrade
#: (its unfinished sweep resumes, its history goes on), as a dimension added later keeps cell ids.
LATER_LIMITS = ("settle", "fault_restart")


def definition_hash(exp: Experiment, cells: list[Cell]) -> str:
    """sha256 of what the runs of an experiment are: the workload, its cells (ids over normalised
    values, so key order, ``0`` vs ``0.0``, whitespace and comments do not matter; every workload
    param is a cell value) and the limits. Left out, because they change no run: the name, the
    description, the file's path, the inventory path (its content has its own hash), ``repeats``
    (more repeats of the same cells are more of the same runs, a race's too), a race's budget
    (``limits.max_runs``, ``max_time``: how many runs, not what a run is) and ``on_error``."""
    limits = {k: v for k, v in exp.limits.model_dump(mode="json").items() if k not in ("max_runs", "max_time")}
    defaults = type(exp.limits)().model_dump(mode="json")
    for name in LATER_LIMITS:  # at its default, the hash an older cmx gave the same definition
        if limits.get(name) == defaults.get(name):
            del limits[name]
    return _sha256({"workload": exp.workload.name, "cells": sorted(c.cell_id for c in cells), "limits": limits})


def stored_definition_hash(definition: dict) -> str | None:
    """The definition hash of a sweep stored before hashes were (from its ``definition`` JSON);
    None when it cannot be read as an experiment any more."""
    from cmx.engine.model.experiment import Experiment
    from cmx.engine.model.cells import expand

    try:
        exp = Experiment.model_validate(definition)
        return definition_hash(exp, expand(exp))
    except Exception:  # an old, now invalid definition: its hash is unknown
        return None


_SECRET_KEYS = ("password", "secret", "token")


def inventory_hash(inv: Inventory) -> str:
    """sha256 of the inventory as cmx reads it (groups, hosts, and the variables cmx uses), with
    every secret left out: ``*_password`` values are dropped and passwords in URLs are redacted,
    so only the hash is stored and it reveals nothing (a changed password is the same inventory)."""
    from cmx.engine.hosts.preflight import redact

    def clean(key: str, value: Any) -> Any:
        if isinstance(value, str) and "://" in value:
            return redact(value)
        if isinstance(value, list):
            return [clean(key, v) for v in value]
        return value

    hostvars = {
        host: {k: clean(k, v) for k, v in sorted(vars_.items()) if not any(s in k.lower() for s in _SECRET_KEYS)}
        for host, vars_ in inv.hostvars.items()
    }
    return _sha256({"groups": {g: list(h) for g, h in inv.groups.items()}, "hostvars": hostvars})


@dataclass(frozen=True)
class Provenance:
    """What a sweep stores about where its numbers came from (columns of ``sweeps``)."""

    cmx_version: str
    git_commit: str | None
    git_dirty: bool | None
    definition_hash: str
    inventory_hash: str | None
    revision: int

    def columns(self) -> dict[str, Any]:
        return asdict(self)


def revision_for(con, exp: Experiment, digest: str, db_path: Path | str, new_revision: bool) -> int:
    """The revision the sweep's runs belong to: the experiment's latest one when its definition is
    unchanged, the next one with ``new_revision``. A changed definition without ``new_revision``
    raises InputError: its runs would be pooled with runs of another definition. A revision none
    of whose sweeps stored a run (provisioning failed, say) takes the changed definition as it is."""
    rows = con.execute(
        """
        SELECT coalesce(revision, 1), definition_hash, definition FROM sweeps WHERE experiment = ?
        ORDER BY coalesce(revision, 1) DESC, started_at DESC LIMIT 1""",
        [exp.name],
    ).fetchall()
    if not rows:
        return 1
    latest, stored, definition = rows[0]
    if new_revision:
        return latest + 1
    has_runs = con.execute(
        """
        SELECT count(*) FROM run_starts s JOIN sweeps w USING (sweep_id)
        WHERE w.experiment = ? AND coalesce(w.revision, 1) = ?""",
        [exp.name, latest],
    ).fetchone()[0]
    if not has_runs:
        return latest
    if stored is None:  # a sweep stored before definition hashes
        stored = stored_definition_hash(json.loads(definition) if isinstance(definition, str) else definition)
    if stored == digest:
        return latest
    raise InputError(
        Problem(
            f"experiment '{exp.name}' has runs in {db_path} under another definition (revision {latest}): "
            f"pass --new-revision to start revision {latest + 1} beside them, or give the experiment "
            "another name, or pass another --db",
            exp.source,
        )
    )
