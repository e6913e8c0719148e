"""``cmx export`` and ``cmx import``: an experiment's sweeps as Parquet, merged into another
results database (cmx.engine.results.travel)."""

from __future__ import annotations

from pathlib import Path

import typer

from cmx.cli.common import DB_OPTION, app, err, fail, out
from cmx.engine.errors import InputError


@app.command(
    "export",
    help=(
        "Write an experiment's sweeps as Parquet: one file per table (sweeps with their provenance, runs, tasks, "
        "samples, metrics, hosts, …) and manifest.json (cmx version, table versions, sweep ids, row counts).\n\n"
        "Exit codes: 0; 2 bad input (no such experiment, --out not empty)."
    ),
)
def export_cmd(
    experiment: str = typer.Argument(..., help="The experiment's name."),
    out_dir: Path = typer.Option(..., "--out", metavar="DIR", help="A new (or empty) folder to write."),
    db_path: Path = DB_OPTION,
):
    from cmx.engine.results import travel
    from cmx.engine.run.provenance import cmx_version

    try:
        m = travel.export(db_path, experiment, out_dir, cmx_version())
    except (FileNotFoundError, InputError) as exc:
        fail(exc)
    out.print(
        f"exported {experiment}: {len(m.sweeps)} sweep(s), {sum(m.rows.values()):,} rows in "
        f"{len(m.rows)} tables to {out_dir}",
        markup=False,
        highlight=False,
    )


@app.command(
    "import",
    help=(
        "Merge an export into a results database (created if "
        "new): its sweeps not already there, in one transaction.\n\n"
        "A sweep is known by its id: one already in the database is skipped and said so, so importing the nightly "
        "exports of several machines, or one twice, stores each sweep once. An export from an older cmx is imported "
        "(columns added since read empty); one from a newer cmx is refused.\n\n"
        "Revision numbers are per database: a sweep whose "
        "revision stands here for another definition of the experiment "
        "is refused (its runs would be pooled with that definition's).\n\n"
        "Exit codes: 0; 2 bad input (not an export, a newer "
        "one, run ids that clash, a revision of another definition), "
        "nothing imported."
    ),
)
def import_cmd(
    folder: Path = typer.Argument(..., help="A folder `cmx export --out` wrote."),
    db_path: Path = DB_OPTION,
):
    from cmx.engine.results import travel

    try:
        res = travel.import_export(folder, db_path)
    except InputError as exc:
        fail(exc)
    for sweep in res.skipped:
        out.print(f"skipped sweep {sweep}: already in {db_path}", markup=False, highlight=False)
    if res.added:
        rows = ", ".join(f"{table} {n:,}" for table, n in res.rows.items() if n)
        out.print(
            f"imported {len(res.added)} sweep(s) ({', '.join(res.added)}) into {db_path}: {rows}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        _histories(db_path, res.added)
    else:
        out.print(
            f"nothing to import: every sweep of {folder} is already in {db_path}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


def _histories(db_path: Path, sweeps: list[str]) -> None:
    """The histories the imported sweeps belong to, computed now (every metric, as `cmx trend` shows
    them), a line each: the next sweep's end and the morning's `cmx trend` read them back rather than
    compute a whole history unannounced. Imported rows stay whatever happens here."""
    import time

    import duckdb

    from cmx.analysis import views
    from cmx.analysis.compare import SelectionError
    from cmx.analysis.trend import history_points, trend

    try:
        with views.connect(db_path, read_only=True) as con:
            revisions = con.execute(
                "SELECT DISTINCT experiment, coalesce(revision, 1) FROM sweeps WHERE sweep_id "
                "IN (SELECT unnest(?::VARCHAR[])) ORDER BY ALL",
                [sweeps],
            ).fetchall()
            for experiment, revision in revisions:
                points = history_points(con, experiment, revision)
                if points < 2:
                    continue
                out.print(
                    f"history: computing {experiment} (revision {revision}, {points} points)…",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
                began = time.monotonic()
                try:
                    res = trend(con, experiment, revision=revision)
                except SelectionError:
                    continue
                out.print(
                    f"history: {experiment} computed in {time.monotonic() - began:.1f} s ({len(res.series)} "
                    "series); `cmx trend` reads it back",
                    markup=False,
                    highlight=False,
                    soft_wrap=True,
                )
    except (duckdb.Error, OSError, ValueError) as exc:
        err.print(
            f"warning: the imported histories were not computed ({exc}); `cmx trend` computes them",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
