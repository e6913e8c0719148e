"""What each run's workload calls its headline, stored with the run (table ``run_headlines``), so
that analysis reads it from the database and never imports a workload class or runs a user's code
(issue 41): the metrics the summary shows for the run's params (``Workload.headline``), the
workload's whole headline (``headline_metrics``: the table's columns, in the workload's order), and
the objective it ranks on when the experiment names none.

Written with the run's start (``db.record_run_start``). A database stored by an earlier cmx has its
runs of built-in workloads filled in once, when it is upgraded (and runs imported from an older
export, when they arrive); a run of a user's class stored then has no row, and analysis shows every
judged metric for it, as it did for any workload it did not know.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the runner's class; reading a database need not import it
    from cmx.workloads.catalog.base import Workload

TABLE = "run_headlines"
COLUMNS = "(run_id VARCHAR, headline JSON, headline_all JSON, objective VARCHAR)"


def of_workload(workload: Workload, params: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(the headline for these params, the whole headline, the objective) of ``workload``."""
    try:
        shown = workload.headline(workload.Params(**params))
    except Exception:  # noqa: BLE001 (params a run could not start with, or an older cmx stored: the whole headline)
        shown = workload.headline_metrics
    return tuple(shown), tuple(workload.headline_metrics), workload.objective


def _builtin(name: str) -> Workload | None:
    from cmx.workloads.catalog import registry  # never a user's file: that is the runner's to load

    cls = registry.WORKLOADS.get(name)
    return cls() if cls is not None else None


def record(con, run_id: str, workload: Workload | str, params: dict[str, Any]) -> None:
    """Store the run's headline; ``workload`` an instance (the runner's, a user's class included) or
    a built-in's name (nothing is stored for a name the catalog does not hold)."""
    found = _builtin(workload) if isinstance(workload, str) else workload
    if found is None:
        return
    shown, whole, objective = of_workload(found, params)
    con.execute(f"INSERT INTO {TABLE} VALUES (?, ?, ?, ?)", [run_id, json.dumps(shown), json.dumps(whole), objective])


def backfill(con) -> int:
    """Store the headline of every run that has none and whose workload is a built-in; how many."""
    missing = con.execute(f"""SELECT run_id, workload, params FROM run_starts
                              WHERE run_id NOT IN (SELECT run_id FROM {TABLE})""").fetchall()
    done = 0
    for run_id, workload, params in missing:
        found = _builtin(workload or "")
        if found is None:
            continue
        try:
            stored = json.loads(params) if isinstance(params, str) else (params or {})
        except ValueError:
            stored = {}
        record(con, run_id, found, stored if isinstance(stored, dict) else {})
        done += 1
    return done
