"""The analysis views (``analysis/sql/*.sql``): task_times, run_summary, cell_summary, latency_percentiles,
memory_timeseries, connection_maxima, memory_per_task, latency_spectrum, rate_timeseries.

Each file is one ``CREATE OR REPLACE VIEW`` that any DuckDB client can run (``.read`` in the
duckdb shell). :func:`install_views` runs them all; ``cmx.engine.results.db.connect`` calls it on every
connection, so ``cmx sql "SELECT * FROM run_summary"`` works on any results database.
"""
from __future__ import annotations

import re
from pathlib import Path

import duckdb

SQL_DIR = Path(__file__).with_name("sql")
#: Installed in this order: later views may read earlier ones.
VIEWS = ("task_times", "run_summary", "cell_summary", "latency_percentiles", "memory_timeseries", "connection_maxima",
         "memory_per_task", "latency_spectrum", "rate_timeseries")

_CREATE = re.compile(r"CREATE\s+OR\s+REPLACE\s+VIEW", re.IGNORECASE)


class ViewError(RuntimeError):
    """An analysis view could not be installed (names the .sql file)."""


def view_sql(name: str, temporary: bool = False) -> str:
    """The SQL that creates view ``name``; ``temporary`` makes it a TEMP view (read-only databases)."""
    text = (SQL_DIR / f"{name}.sql").read_text()
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
