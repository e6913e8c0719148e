"""The results database (DuckDB): schema, the ``runs`` and ``task_times`` views, and the records a
sweep writes. The analysis views (``cmx.analysis.views``) are installed by analysis on top of
these, never from here: results know nothing of analysis. Connections are short-lived (open, write,
close) so that ``cmx sql`` and ``cmx status`` can read between runs of a live sweep; DuckDB allows one
writing process at a time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any


from cmx.engine.results import headlines
from cmx.engine.errors import InputError, Problem

# What every caller reaches through this module (db.connect, db.sql...): the connection's own module.
from cmx.engine.results.dbconnect import _CHECKED as _CHECKED, _first_line as _first_line, connect as connect
from cmx.engine.results.dbconnect import BUILTIN_ORDER as BUILTIN_ORDER, RUN_COLUMNS as RUN_COLUMNS
from cmx.engine.results.dbconnect import RESULT_VIEWS as RESULT_VIEWS, SQL_DIR as SQL_DIR, sql as sql
from cmx.engine.results.dbconnect import install_result_views as install_result_views, refresh_runs_view

if TYPE_CHECKING:  # the runner's workload class: reading a database need not import it
    from cmx.workloads.catalog.base import Workload

DEFAULT_DB = Path("results/cmx.duckdb")
SMOKE_DB = Path("results/smoke.duckdb")  # `cmx run --smoke`'s: here, so readers need not import engine/plan/smoke.py


def record_sweep(
    con,
    sweep_id: str,
    experiment: str,
    source: str,
    workload: str,
    description: str,
    inventory: str,
    definition: dict[str, Any],
    provenance: dict[str, Any] | None = None,
    shuffle_seed: int | None = None,
    tags: dict[str, str] | None = None,
    note: str | None = None,
    planned: int | None = None,
    resumes: str | None = None,
) -> None:
    """``provenance``: more columns of ``sweeps`` (cmx.engine.run.provenance.Provenance.columns());
    ``planned``/``resumes``: the runs this sweep means to execute and the point it continues."""
    extra = {
        **(provenance or {}),
        "shuffle_seed": shuffle_seed,
        "tags": json.dumps(tags or {}),
        "note": note,
        "planned": planned,
        "resumes": resumes,
    }
    names = ["sweep_id", "experiment", "source", "workload", "description", "inventory", "definition", *extra]
    con.execute(
        f"INSERT INTO sweeps ({', '.join(names)}, started_at) VALUES ({', '.join('?' * len(names))}, now())",
        [sweep_id, experiment, source, workload, description, inventory, json.dumps(definition), *extra.values()],
    )


def record_sweep_end(con, sweep_id: str, how: str) -> None:  # a race ended (decided, max, budget): finished
    con.execute("INSERT INTO sweep_ends VALUES (?, now(), ?)", [sweep_id, how])


def record_controller(con, sweep_id: str, hostname: str, pid: int, pid_started: float) -> None:
    con.execute("INSERT INTO sweep_controllers VALUES (?, ?, ?, ?)", [sweep_id, hostname, pid, pid_started])


def parse_tags(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--tag``) as a dict; InputError naming the first bad one."""
    import re

    tags: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z0-9_.-]+", key):
            raise InputError(Problem(f"--tag {item!r}: expected KEY=VALUE, KEY of letters, digits, '_', '.', '-'"))
        tags[key] = value
    return tags


def tagged_runs_sql(con, tags: dict[str, str]) -> tuple[str, list]:
    """A condition on ``run_id`` selecting runs of sweeps that carry every one of ``tags``."""
    if not tags:
        return "TRUE", []
    if not con.execute(
        "SELECT 1 FROM duckdb_columns() WHERE table_name = 'sweeps' AND column_name = 'tags'"
    ).fetchone():
        return "FALSE", []  # a database from before tags (opened read-only): no sweep has any
    conds = " AND ".join("json_extract_string(w.tags, ?) = ?" for _ in tags)
    params = [p for key, value in tags.items() for p in (f'$."{key}"', value)]
    return (f"run_id IN (SELECT s.run_id FROM run_starts s JOIN sweeps w USING (sweep_id) WHERE {conds})", params)


def record_run_start(
    con,
    *,
    experiment: str,
    sweep_id: str,
    run_id: str,
    cell_id: str,
    repeat: int,
    workload: str,
    dims: dict[str, Any],
    params: dict[str, Any],
    warmup_s: float,
    seq: int | None = None,
    loaded: Workload | None = None,
) -> None:  # loaded: the runner's workload (a user's class)
    new_keys = set(dims) - _known_dimensions(con)
    con.execute(
        "INSERT INTO run_starts (experiment, sweep_id, run_id, cell_id, repeat, workload, dims, params, "
        "warmup_s, started_at, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, now(), ?)",
        [experiment, sweep_id, run_id, cell_id, repeat, workload, json.dumps(dims), json.dumps(params), warmup_s, seq],
    )
    headlines.record(con, run_id, loaded or workload, params)
    if new_keys:
        refresh_runs_view(con)


def _known_dimensions(con) -> set[str]:
    return {r[0] for r in con.execute("SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs'").fetchall()}


def record_run_end(con, run_id: str, status: str, error: str | None, stage_seconds: dict[str, float]) -> None:
    con.execute("INSERT INTO run_ends VALUES (?, ?, ?, now(), ?)", [run_id, status, error, json.dumps(stage_seconds)])


def check_name_is_ours(con, exp, path: Path | str) -> None:
    """An experiment name is unique in a results database: a file that reuses the name of one
    with another workload would mix two kinds of runs (and resume would skip the wrong cells)."""
    row = con.execute(
        "SELECT workload, source FROM sweeps WHERE experiment = ? AND workload <> ? ORDER BY started_at DESC LIMIT 1",
        [exp.name, exp.workload.name],
    ).fetchone()
    if row:
        raise InputError(
            Problem(
                f"experiment name '{exp.name}' is taken in {path} by a sweep of workload "
                f"'{row[0]}' (from {row[1]}): give this experiment its own name, or pass "
                "another --db",
                exp.source,
            )
        )


#: Ends that count as a run having ended: a sweep whose planned runs all have one is finished.
ENDED = ("ok", "failed", "timeout")


def resume_point(con, experiment: str, revision: int) -> tuple[str | None, set[tuple[str, int]]]:
    """Whether ``cmx run`` resumes: (the point's sweep id, the (cell_id, repeat) stored ok in it)
    when the experiment's latest sweep of ``revision`` is unfinished (Ctrl-C, a killed controller,
    on_error: abort: a planned run without an ok, failed or timeout end), else (None, empty set):
    a finished sweep is one point of history and the next ``cmx run`` measures again."""
    row = con.execute(
        f"""
        SELECT w.sweep_id, coalesce(w.resumes, w.sweep_id), w.planned,
            (SELECT count(*) FROM run_starts s JOIN run_ends e USING (run_id)
             WHERE s.sweep_id = w.sweep_id AND e.status IN {ENDED}),
            (SELECT count(*) FROM run_starts s LEFT JOIN run_ends e USING (run_id)
             WHERE s.sweep_id = w.sweep_id AND (e.status IS NULL OR e.status NOT IN {ENDED})),
            -- on_error: abort stops at the first run that is not ok, even its last one: aborted
            json_extract_string(w.definition, '$.on_error') = 'abort' AND EXISTS (
                SELECT 1 FROM run_starts s JOIN run_ends e USING (run_id)
                WHERE s.sweep_id = w.sweep_id AND e.status <> 'ok')
        FROM sweeps w WHERE w.experiment = ? AND coalesce(w.revision, 1) = ?
        ORDER BY w.started_at DESC LIMIT 1""",
        [experiment, revision],
    ).fetchone()
    if row is None:
        return None, set()
    sweep_id, point, planned, ended, unended, aborted = row
    raced = con.execute("SELECT 1 FROM sweep_ends WHERE sweep_id = ?", [sweep_id]).fetchone()  # a race that ended
    # A sweep stored before `planned` was recorded: finished unless a run of it has no end.
    if not unended and not aborted and (planned is None or ended >= planned or raced):
        return None, set()
    rows = con.execute(
        """SELECT s.cell_id, s.repeat FROM run_starts s JOIN run_ends e USING (run_id)
                          JOIN sweeps w USING (sweep_id)
                          WHERE coalesce(w.resumes, w.sweep_id) = ? AND e.status = 'ok'""",
        [point],
    ).fetchall()
    return point, {(c, r) for c, r in rows}


def point_sweeps(con, point: str) -> list[str]:
    """The sweeps of one point of history: the first and every sweep that resumed it."""
    return [
        s
        for (s,) in con.execute(
            "SELECT sweep_id FROM sweeps WHERE coalesce(resumes, sweep_id) = ? ORDER BY started_at", [point]
        ).fetchall()
    ]


def record_threshold_checks(con, sweep_id: str, checks) -> None:
    """The thresholds checked when ``sweep_id`` ended: (cell_id, metric, op, value, median, n, held) each."""
    con.executemany("INSERT INTO threshold_checks VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [[sweep_id, *c] for c in checks])
