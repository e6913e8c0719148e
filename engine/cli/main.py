"""``cmx``: validate, plan, run and query Celery experiment matrices.

Exit codes: 0 all runs ok; 1 some runs failed; 2 bad input (nothing ran); 130 interrupted.
"""
from __future__ import annotations

import csv
import io
import json
import signal
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from cmx.engine.results import db
from cmx.engine.errors import HostError, InputError, Problem

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
MAX_CELLS_OPTION = typer.Option(None, "--max-cells", min=1, help="Refuse a matrix of more cells than this "
                                "(default 10,000: a guard against a typo that multiplies the sweep).")
RUN_DB_OPTION = typer.Option(db.DEFAULT_DB, "--db", help="The results database (DuckDB file). Its directory also "
                             "holds the sweep's artifacts/, wheelhouse and generated .secrets.json (keep it out of git).")


def _print_version(value: bool) -> None:
    if not value:
        return
    from cmx.engine.run.provenance import cmx_version, git_state

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
            err.print(str(p), markup=False, highlight=False, emoji=False, soft_wrap=True)
    else:
        err.print(f"error: {exc}", markup=False, highlight=False, emoji=False, soft_wrap=True)
    raise typer.Exit(2)


def _load(file: Path, inventory: Optional[Path] = None, need_inventory: bool = True,
          results_dir: Path = db.DEFAULT_DB.parent, max_cells: Optional[int] = None):
    """Experiment, cells and (optionally) inventory, all validated before any host is touched."""
    from cmx.engine.cli.checks import check_against_inventory
    from cmx.engine.model.load import load_experiment
    from cmx.engine.hosts.inventory import load_inventory
    from cmx.engine.limits import DEFAULT_MAX_CELLS
    from cmx.engine.model.cells import expand

    if not file.is_file():
        raise InputError(Problem("no such experiment file", str(file)))
    exp = load_experiment(file, max_cells=max_cells or DEFAULT_MAX_CELLS)
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
    max_cells: Optional[int] = MAX_CELLS_OPTION,
):
    """Check an experiment (and its inventory) without touching any host.

    Prints nothing and exits 0 when it is valid; otherwise prints FILE:LINE:COL: message lines and exits 2.
    Cells that walk into one of Celery's known traps (engine/model/pitfalls.py) get a warning line each
    naming the experiment that shows it; warnings keep exit 0 (measuring a trap is legitimate).
    """
    from cmx.engine.model.pitfalls import warnings as pitfall_warnings

    try:
        _, cells, _ = _load(file, inventory, max_cells=max_cells)
    except (InputError, HostError) as exc:
        _fail(exc)
    for warning in pitfall_warnings(cells):
        err.print(f"{file}: warning: {warning}", markup=False, highlight=False, soft_wrap=True)


@app.command()
def plan(
    file: Path = typer.Argument(..., help="An experiment YAML file."),
    as_json: bool = typer.Option(False, "--json", help='Print {"experiment", "repeats", "cells": [{"cell_id", "params"}]}.'),
    max_cells: Optional[int] = MAX_CELLS_OPTION,
):
    """Show the cells an experiment expands to (matrix × zip − exclude + include)."""
    from cmx.engine.plan.planner import plan_json
    from cmx.analysis.summary import varying_dimensions

    try:
        exp, cells, _ = _load(file, need_inventory=False, max_cells=max_cells)
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
    shuffle: Optional[int] = typer.Option(None, "--shuffle", metavar="SEED", help="Randomise the order of the "
                                          "cells within each round of repeats (same SEED, same order); each run's "
                                          "position is stored as run_starts.seq."),
    max_cells: Optional[int] = MAX_CELLS_OPTION,
    tag: list[str] = typer.Option([], "--tag", help="KEY=VALUE stored with the sweep (repeatable); "
                                  "`cmx status --tag` selects by it."),
    note: Optional[str] = typer.Option(None, "--note", help="A note stored with the sweep."),
    smoke_mode: bool = typer.Option(False, "--smoke", help="Each cell once at a tiny size with a short timeout, "
                                    "into results/smoke.duckdb unless --db is given: catches configuration "
                                    "errors before a long sweep."),
):
    """Run the sweep: provision the hosts once, then start, drive, stop and ingest every run.

    Runs already stored as ok are skipped (resume), so an interrupted sweep continues where it stopped. Ctrl-C (or SIGTERM) stops the current run's processes on every host, stores it as interrupted, and keeps the rest (exit 130).

    Exit codes: 0 every run ok, 1 some runs failed or timed out, 2 bad input (nothing ran).
    """
    from cmx.engine.plan.matrix import cells_for_only
    from cmx.engine.plan.planner import plan as plan_runs
    from cmx.engine.run.progress import handler_for
    from cmx.engine.run.provenance import definition_hash, revision_for
    from cmx.engine.run.runner import Interrupted, RunStatus, Sweep
    from cmx.analysis.summary import cell_headlines, render, summarize, varying_dimensions
    from cmx.workloads.catalog import registry

    if smoke_mode and Path(db_path) == db.DEFAULT_DB:
        from cmx.engine.plan.smoke import SMOKE_DB
        db_path = SMOKE_DB
    try:
        tags = db.parse_tags(tag)
        exp, cells, inv = _load(file, inventory, results_dir=Path(db_path).parent, max_cells=max_cells)
        if smoke_mode:
            from cmx.engine.plan.smoke import smoke
            exp, cells = smoke(exp, cells)
        digest = definition_hash(exp, cells)  # of every cell, whatever --only selects
        if only:
            cells = cells_for_only(cells, only)
            if not cells:
                raise InputError(Problem(f"--only {only!r} matches no cell (see `cmx plan {file}`)"))
    except (InputError, HostError) as exc:
        _fail(exc)
    runs = plan_runs(exp, cells, shuffle=shuffle)
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
    sweep = Sweep(exp, inv, Path(db_path), Path(db_path).parent, handler=None, tags=tags, note=note)
    sweep.provenance = _provenance(exp, inv, digest, revision)
    sweep.shuffle_seed = shuffle
    interrupted = False
    outcomes = []
    # SIGTERM is Ctrl-C (timeout(1), CI runners and systemd send it); while runs execute, the
    # sweep takes both signals over to stop the current run cleanly.
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    try:
        with handler_for(out, varying) as bar:
            sweep.handler = bar
            outcomes = sweep.execute(runs, skipped)
    except Interrupted as exc:
        interrupted, outcomes = True, exc.args[0]
    except KeyboardInterrupt:  # before any run started (provisioning): nothing of a run to store
        interrupted = True
    except (InputError, HostError) as exc:
        _fail(exc)
    headline, shown = cell_headlines(registry.get(exp.workload.name), cells)
    with db.connect(db_path) as con:
        summaries = summarize(con, exp.name, cells, headline, revision)
    for s in summaries:
        s.shown = shown.get(s.cell.cell_id)
    out.print(render(f"{exp.name} (results in {db_path}; `cmx sql` to query)", summaries, headline))
    for warning in sweep.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if interrupted:
        err.print("interrupted: the current run was stopped and stored as interrupted; `cmx run` again resumes.")
        raise typer.Exit(130)
    failed = [o for o in outcomes if o.status is not RunStatus.OK]
    if failed:
        err.print(f"{len(failed)} of {len(outcomes)} run(s) did not succeed; see `cmx status --db {db_path}`.")
        raise typer.Exit(1)


def _provenance(exp, inv, digest: str, revision: int) -> dict:
    from cmx.engine.run.provenance import Provenance, cmx_version, git_state, inventory_hash

    commit, dirty = git_state()
    return Provenance(cmx_version(), commit, dirty, digest, inventory_hash(inv), revision).columns()


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@app.command()
def status(db_path: Path = DB_OPTION,
           tag: list[str] = typer.Option([], "--tag", help="Only runs of sweeps run with this KEY=VALUE "
                                         "(repeatable: all must match).")):
    """Experiments in the results database and their runs by status.

    A run without an end is [bold]running[/bold] while the sweep that started it is alive, else
    [bold]abandoned[/bold] (its sweep was killed; `cmx run` again resumes it).
    """
    from cmx.engine.run.runstatus import ABANDONED, RUNNING, RunStatus, controller_alive, open_status

    try:
        tags = db.parse_tags(tag)
        with db.connect(db_path, read_only=True) as con:
            where, params = db.tagged_runs_sql(con, tags)
            rows = con.execute(sql_status(con, where), params).fetchall()
            shares = _host_shares(con)
            suspect = con.execute("""
                SELECT r.experiment, count(DISTINCT r.run_id) FROM runs r JOIN metrics m USING (run_id)
                WHERE r.status = 'ok' AND m.name = 'clock_suspect' AND m.value = 1
                GROUP BY ALL ORDER BY ALL""").fetchall()
    except (FileNotFoundError, InputError) as exc:
        _fail(exc)
    columns = [s.value for s in RunStatus] + [RUNNING, ABANDONED]
    per_exp: dict[tuple[str, int], dict] = {}
    alive: dict[tuple, bool] = {}
    for exp, revision, status, hostname, pid, pid_started, started in rows:
        if not status:
            key = (hostname, pid, pid_started)
            if key not in alive:
                alive[key] = controller_alive(hostname, pid, pid_started)
            status = open_status(alive[key])
        e = per_exp.setdefault((exp, revision), {"runs": 0, "last": started, **{c: 0 for c in columns}})
        e["runs"] += 1
        e[status] = e.get(status, 0) + 1
        e["last"] = max(e["last"], started)
    table = Table(title=Text(f"{db_path}"), title_justify="left")
    table.add_column("experiment")
    for col in ["revision", "runs", *columns]:
        table.add_column(col, justify="right")
    table.add_column("last run")
    bad = {RunStatus.FAILED.value, RunStatus.TIMEOUT.value, RunStatus.INTERRUPTED.value, ABANDONED}
    last_of = {}
    for (exp, _), e in per_exp.items():
        last_of[exp] = max(str(e["last"]), last_of.get(exp, ""))
    for (exp, revision), e in sorted(per_exp.items(), key=lambda kv: (last_of[kv[0][0]], kv[0][0], kv[0][1]),
                                     reverse=True):
        cells = [f"[red]{e[c]}[/red]" if e[c] and c in bad else str(e[c]) for c in columns]
        table.add_row(Text(exp), str(revision), str(e["runs"]), *cells, str(e["last"])[:19])
    out.print(table if per_exp else ("no runs of sweeps tagged " + " ".join(tag) if tag else "no runs yet"))
    if shares:
        out.print(_shares_table(shares))
    for exp, n in suspect:
        out.print(f"[yellow]{exp}: {n} ok run(s) with clock_suspect = 1: hosts' clocks could move their "
                  "cross-host latencies by over a tenth (see metrics clock_uncertainty_s, clock_uncorrected_tasks)"
                  "[/yellow]", soft_wrap=True)


def sql_status(con, where: str = "TRUE") -> str:
    """Per run (of those ``where`` selects): experiment, revision, stored status ('' without an
    end), its sweep's controller, start."""
    has_controllers = con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'sweep_controllers'").fetchone()
    controller = ("c.hostname, c.pid, c.pid_started, s.started_at FROM run_starts s "
                  "LEFT JOIN sweep_controllers c USING (sweep_id)" if has_controllers
                  else "NULL, NULL, NULL, s.started_at FROM run_starts s")
    revisions = "LEFT JOIN (SELECT sweep_id, max(revision) AS revision FROM sweeps GROUP BY sweep_id) w USING (sweep_id)"
    return (f"SELECT s.experiment, coalesce(w.revision, 1) AS revision, coalesce(e.status, '') AS status, "
            f"{controller} {revisions} LEFT JOIN run_ends e USING (run_id) WHERE {where}")


def _host_shares(con) -> list:
    from cmx.analysis.hostshare import host_shares

    return host_shares(con)


def _shares_table(rows) -> Table:
    """Work per worker host, per experiment, over its runs with machines > 1."""
    import statistics

    from cmx.analysis.hostshare import pct

    per: dict[tuple[str, str], list] = {}
    for exp, _cell, host, runs, tasks, share, low in rows:
        agg = per.setdefault((exp, host), [0, 0, [], None])
        agg[0] += runs
        agg[1] += tasks
        agg[2].append(share)
        agg[3] = min((v for v in (agg[3], low) if v is not None), default=None)
    table = Table(title="work per worker host (runs with machines > 1; an even split is 1/machines)",
                  title_justify="left")
    for col in ("experiment", "host", "runs", "tasks", "share", "smallest share"):
        table.add_column(col, justify="left" if col in ("experiment", "host") else "right")
    for (exp, host), (runs, tasks, shares, low) in per.items():
        known = [s for s in shares if s is not None]
        table.add_row(Text(exp), Text(host), str(runs), f"{tasks:,}",
                      pct(statistics.median(known) if known else None), pct(low))
    return table


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

    from cmx.engine.results.dbfile import empty_query, refusal

    try:
        if empty_query(query):
            raise InputError(empty_query(query))
        with db.connect(db_path, read_only=True, sandboxed=True) as con:
            cur = con.execute(query)
            if cur is None:  # only comments or semicolons
                raise InputError(empty_query(""))
            cols = [d[0] for d in cur.description] if cur.description else []
            rows = cur.fetchall() if cols else []
    except (FileNotFoundError, InputError) as exc:
        _fail(exc)
    except duckdb.Error as exc:
        _fail(InputError(refusal(exc)))
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

    from cmx.analysis.report import write_report

    started = time.perf_counter()
    target = out_dir or Path("reports") / experiment
    try:
        with db.connect(db_path, read_only=True) as con:
            rep = write_report(con, experiment, target, revision)
    except (FileNotFoundError, LookupError, InputError) as exc:
        _fail(exc)
    out.print(f"{rep.html}: revision {rep.revision}, {rep.cells} cells, {rep.runs} runs, {len(rep.charts)} charts "
              f"({', '.join(rep.charts) or 'none'}) in {time.perf_counter() - started:.1f} s", highlight=False,
              soft_wrap=True)


class CompareFormat(str, Enum):
    table = "table"
    markdown = "markdown"
    csv = "csv"
    json = "json"


@app.command()
def compare(
    baseline: str = typer.Argument(..., help="EXPERIMENT or EXPERIMENT:DIM=VALUE,DIM=VALUE selecting one cell "
                                   "(e.g. quickstart:broker=redis,pool=threads)."),
    contender: str = typer.Argument(..., help="Same form as BASELINE (e.g. quickstart:broker=rabbitmq,pool=threads)."),
    db_path: Path = DB_OPTION,
    fmt: CompareFormat = typer.Option(CompareFormat.table, "--format", "-f", help="Output format."),
    pool_cells: bool = typer.Option(False, "--pool-cells", help="Allow a side to select several cells (or "
                                    "revisions) and pool their runs; the output says what was pooled."),
):
    """Compare two cells like for like: per metric n, median with its 95 % interval, change %, p-value, verdict.

    Each side must select exactly one cell: otherwise exit 2 names the dimensions that still vary (--pool-cells pools them, and says so).

    The verdict is better/worse only when the change's bootstrap interval excludes 0 and the Mann-Whitney p ≤ 0.05, else same; with fewer than 3 ok runs on a side it says "n too small".

    Differing host facts (CPU model, cores, kernel, Python, Celery/kombu versions) are warned about on stderr.
    """
    from cmx.analysis.compare import compare as compare_runs, parse_selection
    from cmx.analysis.compare_format import as_csv, as_json, as_markdown, as_table

    try:
        base, cont = parse_selection(baseline), parse_selection(contender)
        with db.connect(db_path, read_only=True) as con:
            res = compare_runs(con, base, cont, pool_cells=pool_cells)
    except (FileNotFoundError, ValueError, InputError) as exc:
        _fail(exc)
    for warning in res.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if fmt in (CompareFormat.csv, CompareFormat.json):
        for note in res.notes:  # the table and markdown carry these themselves
            err.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    if fmt is CompareFormat.csv:
        sys.stdout.write(as_csv(res))
    elif fmt is CompareFormat.json:
        print(as_json(res))
    elif fmt is CompareFormat.markdown:
        sys.stdout.write(as_markdown(res))
    else:
        out.print(as_table(res))


def _usage_errors() -> tuple[type[BaseException], ...]:
    """Click's exception base: typer >= 0.20 vendors click (typer.TyperException), older uses click."""
    kinds: list[type[BaseException]] = [getattr(typer, "TyperException", None)]
    try:
        import click
        kinds.append(click.ClickException)
    except ImportError:
        pass
    return tuple(k for k in kinds if k is not None)


@app.command("schema")
def schema_command(
    out_file: Optional[Path] = typer.Option(None, "--out", help="Write it to this file instead of stdout."),
):
    """Print the JSON Schema (draft 2020-12) of the experiment file, for editors and CI checks.

    Generated from the models `cmx validate` uses; docs/cmx.schema.json is the committed copy that
    shipped experiments name in their first line (# yaml-language-server: $schema=...).
    """
    from cmx.engine.model.schema import schema_text

    text = schema_text()
    if out_file is None:
        sys.stdout.write(text)
    else:
        out_file.write_text(text)


@app.command("workloads")
def workloads_command(
    folder: Path = typer.Option(Path("experiments"), "--dir", help="Where to look for your workload classes "
                                "(the .py files beside your experiments)."),
):
    """List the built-in workloads and your workload classes, with each param's type, default and description.

    Your classes are looked for in the .py files of --dir; their params are what `workload.params`
    and `params.*` dimensions take.
    """
    from cmx.engine.cli.catalog import builtins, discover

    entries, problems = builtins(), []
    if folder.is_dir():
        found, problems = discover(folder)
        entries += found
    for entry in entries:
        table = Table(title=Text(f"{entry.name}  ({entry.where})  {entry.doc}"), title_justify="left")
        for col in ("param", "type", "default", "description"):
            table.add_column(col)
        for p in entry.params:
            table.add_row(Text(p.name), Text(p.type), Text(p.default), Text(p.description))
        out.print(table)
    for line in problems:
        err.print(f"warning: {line}", markup=False, highlight=False, emoji=False, soft_wrap=True)


@app.command("init")
def init_command(
    name: str = typer.Argument(..., help="The experiment's name (letters, digits, '_', '-')."),
    folder: Path = typer.Option(Path("experiments"), "--dir", help="Where to write the two files."),
):
    """Write experiments/NAME.yaml and experiments/NAME_tasks.py, a benchmark of your own tasks that runs as it is.

    Edit the tasks module (plain Celery) and the matrix into your own; try it with
    `cmx run experiments/NAME.yaml --smoke`.
    """
    from cmx.engine.cli.scaffold import init

    try:
        experiment, tasks = init(name, folder)
    except InputError as exc:
        _fail(exc)
    out.print(f"wrote {experiment} and {tasks}; next: cmx run {experiment} --smoke", highlight=False, markup=False)


def main() -> None:
    """The ``cmx`` entry point: usage errors are one line and exit 2, like every input error."""
    try:
        code = app(standalone_mode=False)
    except _usage_errors() as exc:  # a missing argument, an unknown option or command, a bad value
        if type(exc).__name__ == "NoArgsIsHelpError":  # plain `cmx`: the help, as before
            exc.show()
            sys.exit(2)
        ctx = getattr(exc, "ctx", None)
        command = ctx.command_path if ctx is not None else "cmx"
        hint = f" (see {command} --help)" if ctx is not None else ""
        err.print(str(Problem(f"{exc.format_message()}{hint}", command)), markup=False, highlight=False,
                  soft_wrap=True)
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort:
        err.print("interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
