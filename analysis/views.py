"""The analysis views (``analysis/sql/*.sql``): run_summary, cell_summary, steady_tasks,
latency_percentiles, memory_timeseries, connection_maxima, memory_per_task, latency_spectrum, rate_timeseries.

Each file is one ``CREATE OR REPLACE VIEW`` that any DuckDB client can run (``.read`` in the
duckdb shell). They read the results' own tables and views (``runs``, and ``task_times`` from
``engine/results/sql``). Analysis depends on results, never the reverse: :func:`connect` opens the
database through ``cmx.engine.results.db.connect`` and installs the views on it, so every command
that reads results (``cmx sql "SELECT * FROM run_summary"`` included) finds them, and a database
``cmx`` wrote stores them.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb

from cmx.engine.errors import suggest
from cmx.engine.results import db
from cmx.engine.results.metricdefs import RUN_SUMMARY_COLUMNS

SQL_DIR = Path(__file__).with_name("sql")
#: Installed in this order: later views may read earlier ones.
VIEWS = (
    "run_summary",
    "cell_summary",
    "steady_tasks",
    "latency_percentiles",
    "memory_timeseries",
    "connection_maxima",
    "memory_per_task",
    "latency_spectrum",
    "rate_timeseries",
)

_CREATE = re.compile(r"CREATE\s+OR\s+REPLACE\s+VIEW", re.IGNORECASE)
_GENERATED = re.compile(r"(-- BEGIN metric columns[^\n]*\n)(.*?)(\s*-- END metric columns)", re.DOTALL)


class ViewError(RuntimeError):
    """An analysis view could not be installed (names the .sql file)."""


def metric_columns_sql() -> str:
    """run_summary's metric columns: the registry's ``RUN_SUMMARY_COLUMNS`` (metricdefs)."""
    return ",\n".join(f"        max(value) FILTER (WHERE name = '{name}') AS {name}" for name in RUN_SUMMARY_COLUMNS)


def generated_run_summary() -> str:
    """run_summary.sql with its metric columns written from the registry (the committed file must
    equal it: tests/unit/test_metric_registry.py; ``python -m cmx.analysis.views`` rewrites it)."""
    text = (SQL_DIR / "run_summary.sql").read_text()
    new, n = _GENERATED.subn(lambda m: m.group(1) + metric_columns_sql() + m.group(3), text)
    assert n == 1, "run_summary.sql has no '-- BEGIN metric columns' … '-- END metric columns' block"
    return new


def view_sql(name: str, temporary: bool = False) -> str:
    """The SQL that creates view ``name``; ``temporary`` makes it a TEMP view (read-only databases)."""
    text = generated_run_summary() if name == "run_summary" else (SQL_DIR / f"{name}.sql").read_text()
    if temporary:
        text, n = _CREATE.subn("CREATE OR REPLACE TEMP VIEW", text, count=1)
        assert n == 1, f"{name}.sql has no CREATE OR REPLACE VIEW"
    return text


def install_views(con: duckdb.DuckDBPyConnection, temporary: bool = False) -> None:
    """Create (or replace) every analysis view on ``con``.

    A read-only database cannot store views, so ``temporary=True`` creates them for this
    connection only; temporary views also shadow stale stored ones of the same name.
    """
    for name in VIEWS:
        try:
            con.execute(view_sql(name, temporary))
        except duckdb.Error as exc:
            raise ViewError(f"{SQL_DIR / (name + '.sql')}: {str(exc).splitlines()[0]}") from exc


def dimension_columns(con) -> dict[str, str]:
    """The dimension columns of ``runs`` (name → SQL type), in the view's order: every column but
    the run's own (``db.RUN_COLUMNS``). The one place analysis reads which dimensions there are."""
    rows = con.execute(
        "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'runs' ORDER BY column_index"
    ).fetchall()
    return {name: kind for name, kind in rows if name not in db.RUN_COLUMNS}


def restrict_to_tags(con, tags: dict[str, str]) -> None:
    """For the rest of this connection, ``runs`` and every view over it hold only the runs of sweeps
    that carry every one of ``tags`` (``--tag KEY=VALUE``; none: nothing changes). A TEMP view of
    the same name shadows the stored ``runs``; nothing is written to the database."""
    if not tags:
        return
    cond, params = db.tagged_runs_sql(con, tags)
    con.execute(f"CREATE OR REPLACE TEMP TABLE cmx_tagged_runs AS SELECT run_id FROM runs WHERE {cond}", params)
    catalog = con.execute("SELECT current_database()").fetchone()[0].replace('"', '""')
    con.execute(
        f'CREATE OR REPLACE TEMP VIEW runs AS SELECT * FROM "{catalog}".main.runs '
        "WHERE run_id IN (SELECT run_id FROM temp.main.cmx_tagged_runs)"
    )


def revisions(con, experiment: str) -> list[int]:
    """The experiment's revisions (definitions) in the database, oldest first."""
    return [
        r[0]
        for r in con.execute(
            "SELECT DISTINCT revision FROM runs WHERE experiment = ? ORDER BY 1", [experiment]
        ).fetchall()
    ]


def experiment_hint(con, experiment: str) -> str:
    """``; did you mean 'NAME'?`` when ``experiment`` is not in the database and one close to it is."""
    known = [e for (e,) in con.execute("SELECT DISTINCT experiment FROM runs").fetchall()]
    return "" if experiment in known else suggest(experiment, known)


def choose_revision(known: list[int], experiment: str, revision: int | None, hint: str = "") -> int:
    """``revision`` when the experiment has it, its latest when None; LookupError (exit 2) otherwise
    (``hint``: :func:`experiment_hint`'s, for a name not in the database)."""
    if not known:
        raise LookupError(f"experiment {experiment!r} has no runs in this database{hint}")
    if revision is not None and revision not in known:
        raise LookupError(
            f"experiment {experiment!r} has no revision {revision} in this database "
            f"(it has {', '.join(map(str, known))})"
        )
    return known[-1] if revision is None else revision


def tags_text(tags: dict[str, str]) -> str:
    """``commit=abc env=lab``: tags as ``--tag`` takes them."""
    return " ".join(f"{k}={v}" for k, v in tags.items())


@contextmanager
def connect(
    path: Path | str, read_only: bool = False, wait_s: float = 30.0, sandboxed: bool = False
) -> Iterator[duckdb.DuckDBPyConnection]:
    """``cmx.engine.results.db.connect`` with the analysis views installed (stored when writable,
    for this connection only when read-only): how every command that reads results opens them."""
    with db.connect(
        path,
        read_only=read_only,
        wait_s=wait_s,
        sandboxed=sandboxed,
        prepare=lambda con, temporary: install_views(con, temporary),
    ) as con:
        yield con


if __name__ == "__main__":  # rewrite run_summary.sql's metric columns from the registry
    (SQL_DIR / "run_summary.sql").write_text(generated_run_summary())
