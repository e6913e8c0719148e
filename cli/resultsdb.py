"""Which results database a reading command opens: the one way `cmx status`, `report`, `trend`,
`compare` and `recommend` find the smoke runs (issue 43).

Without ``--db``, an experiment that only `cmx run --smoke` has run yet (cmx init's first steps:
the README's install flow) is read from the smoke database, results/smoke.duckdb, and the command
says so in one line on stderr; `cmx status` reads it when the default database holds no run at all.
A ``--db`` given is always the one read."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from cmx.cli.common import err
from cmx.engine.results import db
from cmx.engine.results.db import SMOKE_DB  # not engine/plan/smoke.py: it imports the whole model


def _has_runs(path: Path, experiments: Iterable[str] | None) -> bool:
    """``path`` holds runs of every one of ``experiments`` (of any experiment when None)."""
    if not path.is_file():
        return False
    with db.connect(path, read_only=True) as con:
        if experiments is None:
            return con.execute("SELECT count(*) FROM runs").fetchone()[0] > 0
        return all(
            con.execute("SELECT count(*) FROM runs WHERE experiment = ?", [e]).fetchone()[0] > 0 for e in experiments
        )


def results_db(db_path: Path, *experiments: str, doing: str = "reading") -> Path:
    """``db_path``, or the smoke database when ``db_path`` is the default, holds no runs of the
    experiments named (of any, when none is named) and the smoke database holds runs of them all."""
    names = sorted(set(experiments)) or None
    if Path(db_path) != db.DEFAULT_DB or _has_runs(Path(db_path), names) or not _has_runs(SMOKE_DB, names):
        return db_path
    if names is None:
        said = f"no runs in {db_path}: {doing} the smoke runs, in {SMOKE_DB}"
    elif len(names) == 1:
        said = f"{names[0]} has no runs in {db_path}: {doing} its smoke runs, in {SMOKE_DB}"
    else:
        said = f"{' and '.join(names)} have no runs in {db_path}: {doing} their smoke runs, in {SMOKE_DB}"
    err.print(said, markup=False, highlight=False, soft_wrap=True)
    return SMOKE_DB
