"""``cmx``: validate, plan, run and query Celery experiment matrices.

Exit codes: 0 all runs ok; 1 some runs failed; 2 bad input (nothing ran); 130 interrupted.
"""
from __future__ import annotations

import csv
import io
import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from engine import db
from engine.errors import HostError, InputError, Problem

app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode="rich",
    help="celery-matrix: sweep real Celery deployments defined in YAML and query the results in SQL.\n\n"
         "Typical session: [bold]cmx validate[/bold] FILE, [bold]cmx plan[/bold] FILE, [bold]cmx run[/bold] FILE, "
         "then [bold]cmx status[/bold] and [bold]cmx sql[/bold] \"SELECT …\".",
)
# Not a terminal (CI logs, pipes): wide enough that the summary table stays readable.
out = Console(width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True)

DB_OPTION = typer.Option(db.DEFAULT_DB, "--db", help="The results database (DuckDB file).")
RUN_DB_OPTION = typer.Option(db.DEFAULT_DB, "--db", help="The results database (DuckDB file). Its directory also "
                             "holds the sweep's artifacts/, wheelhouse and generated .secrets.json (keep it out of git).")


def _print_version(value: bool) -> None:
    if not value:
        return
    from engine.provenance import cmx_version, git_state

    commit, dirty = git_state()
    where = f" (git {commit[:12]}{', with uncommitted changes' if dirty else ''})" if commit else ""
    print(f"cmx {cmx_version()}{where}")
    raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="Print the version (and the git commit when run from a checkout) and exit."),
) -> None:
    pass


def _fail(exc: Exception) -> None:
    if isinstance(exc, InputError):
        for p in exc.problems:
            err.print(str(p), markup=False, highlight=False, soft_wrap=True)
    else:
        err.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _load(file: Path, inventory: Optional[Path] = None, need_inventory: bool = True,
          results_dir: Path = db.DEFAULT_DB.parent):
    """Experiment, cells and (optionally) inventory, all validated before any host is touched."""
    from engine.checks import check_against_inventory
    from engine.experiment import load_experiment
    from engine.inventory import load_inventory
    from engine.matrix import expand

    if not file.is_file():
        raise InputError(Problem("no such experiment file", str(file)))
    exp = load_experiment(file)
    cells = expand(exp)
    inv = None
    if need_inventory:
        inv = load_inventory(inventory or Path(exp.inventory), secrets_dir=results_dir)
        check_against_inventory(exp, cells, inv)
    return exp, cells, inv


@app.command()
def validate(
    file: Path = typer.Argument(..., help="An experiment YAML file."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", "-i", help="Check against this inventory "
                                             "instead of the experiment's own."),
):
    """Check an experiment (and its inventory) without touching any host.

    Prints nothing and exits 0 when it is valid; otherwise prints FILE:LINE:COL: message lines and exits 2.
    Cells that walk into one of Celery's known traps (engine/pitfalls.py) get a warning line each
    naming the experiment that shows it; warnings keep exit 0 (measuring a trap is legitimate).
    """
    from engine.pitfalls import warnings as pitfall_warnings

    try:
        _, cells, _ = _load(file, inventory)
    except (InputError, HostError) as exc:
        _fail(exc)
    for warning in pitfall_warnings(cells):
        err.print(f"{file}: warning: {warning}", markup=False, highlight=False, soft_wrap=True)


@app.command()
def plan(
    file: Path = typer.Argument(..., help="An experiment YAML file."),
    as_json: bool = typer.Option(False, "--json", help='Print {"experiment", "repeats", "cells": [{"cell_id", "params"}]}.'),
):
    """Show the cells an experiment expands to (matrix × zip − exclude + include)."""
    from engine.planner import plan_json
    from engine.summary import varying_dimensions

    try:
        exp, cells, _ = _load(file, need_inventory=False)
    except InputError as exc:
        _fail(exc)
    if as_json:
        print(json.dumps(plan_json(exp, cells), indent=2))
        return
    dims = varying_dimensions(cells) or sorted(cells[0].values)
    table = Table(title=f"{exp.name}: {len(cells)} cells × {exp.repeats} repeats = {len(cells) * exp.repeats} runs",
                  title_justify="left")
    table.add_column("cell_id")
    for d in dims:
        table.add_column(d)
    for c in cells:
        table.add_row(c.cell_id, *[Text(str(c.values.get(d))) for d in dims])  # data, never markup
    out.print(table)
    same = {k: v for k, v in cells[0].values.items() if k not in dims}
    if same:
        out.print("same in every cell: " + ", ".join(f"{k}={v}" for k, v in same.items()), highlight=False,
                  markup=False)


@app.command()
def run(
    file: Path = typer.Argument(..., help="An experiment YAML file."),
    inventory: Optional[Path] = typer.Option(None, "--inventory", "-i", help="Ansible inventory (default: the "
                                             "experiment's `inventory`, else inventory/local.yml)."),
    db_path: Path = RUN_DB_OPTION,
    only: Optional[str] = typer.Option(None, "--only", help="Run only matching cells: a cell-id glob, or "
                                       "dim=value globs, comma-separated, all must match (pool=gevent,concurrency=4)."),
    no_resume: bool = typer.Option(False, "--no-resume", help="Run again runs already stored as ok."),
    new_revision: bool = typer.Option(False, "--new-revision", help="The experiment's definition changed since "
                                      "its runs in --db: store this sweep's runs as its next revision, apart from "
                                      "the earlier ones (cmx run refuses a changed definition without it)."),
):
    """Run the sweep: provision the hosts once, then start, drive, stop and ingest every run.

    Runs already stored as ok are skipped (resume), so an interrupted sweep continues where it stopped. Ctrl-C stops the current run's processes, stores it as failed, and keeps the rest (exit 130).

    Exit codes: 0 every run ok, 1 some runs failed or timed out, 2 bad input (nothing ran).
    """
    from engine.matrix import cells_for_only
    from engine.planner import plan as plan_runs
    from engine.progress import ProgressBar
    from engine.provenance import definition_hash, revision_for
    from engine.runner import Interrupted, RunStatus, Sweep
    from engine.summary import render, summarize, varying_dimensions
    from workloads import registry

    try:
        exp, cells, inv = _load(file, inventory, results_dir=Path(db_path).parent)
        digest = definition_hash(exp, cells)  # of every cell, whatever --only selects
        if only:
            cells = cells_for_only(cells, only)
            if not cells:
                raise InputError(Problem(f"--only {only!r} matches no cell (see `cmx plan {file}`)"))
    except (InputError, HostError) as exc:
        _fail(exc)
    runs = plan_runs(exp, cells)
    skipped = 0
    try:
        with db.connect(db_path) as con:  # before any host is touched: a bad --db fails here
            db.check_name_is_ours(con, exp, db_path)
            revision = revision_for(con, exp, digest, db_path, new_revision)
            done = set() if no_resume else db.completed_runs(con, exp.name, revision)
    except InputError as exc:
        _fail(exc)
    kept = [r for r in runs if (r.cell.cell_id, r.repeat) not in done]
    skipped, runs = len(runs) - len(kept), kept
    varying = varying_dimensions(cells)
    sweep = Sweep(exp, inv, Path(db_path), Path(db_path).parent, handler=None)
    sweep.provenance = _provenance(exp, inv, digest, revision)
    interrupted = False
    outcomes = []
    try:
        with ProgressBar(out, varying) as bar:
            sweep.handler = bar
            outcomes = sweep.execute(runs, skipped)
    except Interrupted as exc:
        interrupted, outcomes = True, exc.args[0]
    except (InputError, HostError) as exc:
        _fail(exc)
    headline = registry.get(exp.workload.name).headline_metrics
    with db.connect(db_path) as con:
        summaries = summarize(con, exp.name, cells, headline, revision)
    out.print(render(f"{exp.name} (results in {db_path}; `cmx sql` to query)", summaries, headline))
    for warning in sweep.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if interrupted:
        err.print("interrupted: the current run was stopped and stored as failed; `cmx run` again resumes.")
        raise typer.Exit(130)
    failed = [o for o in outcomes if o.status is not RunStatus.OK]
    if failed:
        err.print(f"{len(failed)} of {len(outcomes)} run(s) did not succeed; see `cmx status --db {db_path}`.")
        raise typer.Exit(1)


def _provenance(exp, inv, digest: str, revision: int) -> dict:
    from engine.provenance import Provenance, cmx_version, git_state, inventory_hash

    commit, dirty = git_state()
    return Provenance(cmx_version(), commit, dirty, digest, inventory_hash(inv), revision).columns()


@app.command()
def status(db_path: Path = DB_OPTION):
    """Experiments in the results database and their runs by status."""
    try:
        with db.connect(db_path, read_only=True) as con:
            rows = con.execute("""
                SELECT experiment, revision, count(*) AS runs,
                       count(*) FILTER (WHERE status = 'ok') AS ok,
                       count(*) FILTER (WHERE status = 'failed') AS failed,
                       count(*) FILTER (WHERE status = 'timeout') AS timeout,
                       max(started_at) AS last_run
                FROM runs GROUP BY experiment, revision ORDER BY max(last_run) OVER (PARTITION BY experiment) DESC,
                         experiment, revision DESC""").fetchall()
    except (FileNotFoundError, InputError) as exc:
        _fail(exc)
    table = Table(title=Text(f"{db_path}"), title_justify="left")
    for col in ("experiment", "revision", "runs", "ok", "failed", "timeout", "last run"):
        table.add_column(col, justify="right" if col in ("revision", "runs", "ok", "failed", "timeout") else "left")
    for exp, revision, runs, ok, failed, timeout, last in rows:
        table.add_row(Text(exp), str(revision), str(runs), str(ok), f"[red]{failed}[/red]" if failed else "0",
                      f"[red]{timeout}[/red]" if timeout else "0", str(last)[:19])
    out.print(table if rows else "no runs yet")


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command("sql")
def sql_command(
    query: str = typer.Argument(..., help="Any SQL over the tables runs, tasks, samples, peaks, connections, "
                                "metrics, hosts (and the views in analysis/)."),
    db_path: Path = DB_OPTION,
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
):
    """Run SQL over the results. Example:

    cmx sql "SELECT pool, concurrency, median(value) FROM metrics JOIN runs USING (run_id)
    WHERE name = 'consume_rate' GROUP BY ALL ORDER BY ALL"
    """
    import duckdb

    try:
        with db.connect(db_path, read_only=True) as con:
            cur = con.execute(query)
            cols = [d[0] for d in cur.description] if cur.description else []
            rows = cur.fetchall() if cols else []
    except (FileNotFoundError, InputError) as exc:
        _fail(exc)
    except duckdb.Error as exc:
        _fail(InputError(Problem(str(exc).splitlines()[0], "query")))
    if fmt is Format.json:
        print(json.dumps([dict(zip(cols, r)) for r in rows], default=str, indent=2))
    elif fmt is Format.csv:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(cols)
        w.writerows(rows)
        sys.stdout.write(buf.getvalue())
    else:
        table = Table()
        for c in cols:
            table.add_column(Text(c))
        for r in rows:
            table.add_row(*[Text("NULL" if v is None else str(v)) for v in r])  # data, never markup
        out.print(table)


@app.command()
def report(
    experiment: str = typer.Argument(..., help="An experiment name in the results database."),
    db_path: Path = DB_OPTION,
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Output directory (default reports/EXPERIMENT/)."),
    revision: Optional[int] = typer.Option(None, "--revision", min=1, help="Which revision (definition) of the "
                                           "experiment to report; default the latest. Revisions are never pooled."),
):
    """Write an offline HTML report (index.html) plus a PNG and a Vega-Lite JSON per chart."""
    import time

    from analysis.report import write_report

    started = time.perf_counter()
    target = out_dir or Path("reports") / experiment
    try:
        with db.connect(db_path, read_only=True) as con:
            rep = write_report(con, experiment, target, revision)
    except (FileNotFoundError, LookupError, InputError) as exc:
        _fail(exc)
    out.print(f"{rep.html}: revision {rep.revision}, {rep.cells} cells, {rep.runs} runs, {len(rep.charts)} charts "
              f"({', '.join(rep.charts) or 'none'}) in {time.perf_counter() - started:.1f} s", highlight=False)


class CompareFormat(str, Enum):
    table = "table"
    markdown = "markdown"
    csv = "csv"


@app.command()
def compare(
    baseline: str = typer.Argument(..., help="EXPERIMENT or EXPERIMENT:DIM=VALUE,DIM=VALUE (e.g. quickstart:broker=redis)."),
    contender: str = typer.Argument(..., help="Same form as BASELINE (e.g. quickstart:broker=rabbitmq)."),
    db_path: Path = DB_OPTION,
    fmt: CompareFormat = typer.Option(CompareFormat.table, "--format", "-f", help="Output format."),
):
    """Headline metrics of two selections of runs: medians over ok runs, diff, diff % and which is better."""
    from analysis.compare import compare as compare_runs, parse_selection
    from analysis.compare_format import as_csv, as_markdown, as_table

    try:
        base, cont = parse_selection(baseline), parse_selection(contender)
        with db.connect(db_path, read_only=True) as con:
            diffs = compare_runs(con, base, cont)
    except (FileNotFoundError, ValueError, InputError) as exc:
        _fail(exc)
    if fmt is CompareFormat.csv:
        sys.stdout.write(as_csv(diffs))
    elif fmt is CompareFormat.markdown:
        sys.stdout.write(as_markdown(base, cont, diffs))
    else:
        out.print(as_table(base, cont, diffs))


def main() -> None:
    app()


if __name__ == "__main__":
    main()
