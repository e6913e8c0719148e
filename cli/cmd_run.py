"""``cmx validate``, ``cmx plan`` and ``cmx run``: from an experiment file to stored runs."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from cmx.cli.common import INVENTORY_OPTION, MAX_CELLS_OPTION, RUN_DB_OPTION, WIDE_OPTION, app, err, fail, out
from cmx.cli.sweepend import check_point_thresholds, labels_of, say_history
from cmx.cli.tables import show
from cmx.engine.errors import HostError, InputError, Problem
from cmx.analysis import views
from cmx.engine.results import db


def _load(
    file: Path,
    inventory: Optional[Path] = None,
    need_inventory: bool = True,
    results_dir: Path = db.DEFAULT_DB.parent,
    max_cells: Optional[int] = None,
):
    """Experiment, cells and (optionally) inventory, all validated before any host is touched."""
    from cmx.cli.checks import check_against_inventory, check_thresholds
    from cmx.engine.model.load import load_experiment
    from cmx.engine.hosts.inventory import choose_inventory, load_inventory, uses_builtin
    from cmx.engine.limits import DEFAULT_MAX_CELLS
    from cmx.engine.model.cells import expand

    if not file.is_file():
        raise InputError(Problem("no such experiment file", str(file)))
    exp = load_experiment(file, max_cells=max_cells or DEFAULT_MAX_CELLS)
    check_thresholds(exp)
    cells = expand(exp)
    inv = None
    if need_inventory:
        path = choose_inventory(inventory, exp.inventory, file)
        if uses_builtin(inventory, exp.inventory):
            err.print(
                f"{file}: no inventory named (--inventory, inventory:, ./inventory/local.yml): using the "
                "built-in localhost inventory (this machine plays every part; `cmx doctor` shows its file)",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )
        inv = load_inventory(path, secrets_dir=results_dir)
        check_against_inventory(exp, cells, inv)
    return exp, cells, inv


@app.command()
def validate(
    file: Path = typer.Argument(..., help="An experiment YAML file."),
    inventory: Optional[Path] = INVENTORY_OPTION,
    max_cells: Optional[int] = MAX_CELLS_OPTION,
):
    """Check an experiment (and its inventory) without touching any host.

    When it is valid, prints what it found and exits 0: its cells and runs, about how long the sweep takes (from
    the experiment's runs stored in results/cmx.duckdb, if any) and whether its repeats can show a difference
    between cells at all (one line on stderr too when no inventory is named and the built-in localhost inventory
    is used); otherwise prints FILE:LINE:COL: message lines and exits 2.
    Cells that walk into one of Celery's known traps (engine/model/pitfalls.py) get a warning line each
    naming the experiment that shows it; warnings keep exit 0 (measuring a trap is legitimate).
    """
    from cmx.cli.sweepsize import summary

    try:
        exp, cells, _ = _load(file, inventory, max_cells=max_cells)
    except (InputError, HostError) as exc:
        fail(exc)
    for line in summary(file, exp, cells):
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    _warn_pitfalls(file, cells)


def _warn_pitfalls(file: Path, cells) -> None:
    """Celery's known traps the cells walk into, one line each on stderr: what `cmx validate` says,
    `cmx run` says before its first run, and the report repeats."""
    from cmx.engine.model.pitfalls import warnings as pitfall_warnings

    for warning in pitfall_warnings(cells):
        err.print(f"{file}: warning: {warning}", markup=False, highlight=False, soft_wrap=True)


@app.command()
def plan(
    file: Path = typer.Argument(..., help="An experiment YAML file."),
    as_json: bool = typer.Option(
        False, "--json", metavar="", help='Print {"experiment", "repeats", "cells": [{"cell_id", "params"}]}.'
    ),
    max_cells: Optional[int] = MAX_CELLS_OPTION,
):
    """Show the cells an experiment expands to (matrix × zip − exclude + include)."""
    from cmx.engine.plan.planner import plan_json
    from cmx.analysis.summary import varying_dimensions

    try:
        exp, cells, _ = _load(file, need_inventory=False, max_cells=max_cells)
    except InputError as exc:
        fail(exc)
    if as_json:
        print(json.dumps(plan_json(exp, cells), indent=2))
        return
    from cmx.engine.model.cells import value_text

    dims = varying_dimensions(cells) or sorted(cells[0].values)
    table = Table(
        title=f"{exp.name}: {len(cells)} cells × {exp.repeats_text()} = "
        f"{'at most ' if exp.racing else ''}{len(cells) * exp.max_repeats} runs",
        title_justify="left",
    )
    table.add_column("cell_id")
    for d in dims:
        table.add_column(d)
    for c in cells:
        table.add_row(
            c.cell_id,
            *[
                Text(value_text(c.values[d]) if d in c.values else "–")  # data, never markup
                for d in dims
            ],
        )
    out.print(table)
    same = {k: v for k, v in cells[0].values.items() if k not in dims}
    if same:
        out.print(
            "same in every cell: " + ", ".join(f"{k}={value_text(v)}" for k, v in same.items()),
            highlight=False,
            markup=False,
        )


@app.command(
    help=(
        "Run the sweep: provision the hosts once, then start, drive, stop and ingest every run.\n\n"
        "Each finished sweep is one point of history: run again (each night from cron, say), the same experiment is "
        "measured again as a new sweep, one point more for `cmx trend`. A sweep is finished when every run it planned "
        "has an end: ok, failed or timed out. An unfinished one (Ctrl-C, a killed controller, on_error: abort) is "
        "resumed instead: its runs stored as ok are skipped and the rest run, as the same point (--no-resume measures "
        "every run anew). Ctrl-C (or SIGTERM) stops the current "
        "run's processes on every host, stores it as interrupted, "
        "and keeps the rest (exit 130). A changed definition is refused unless --new-revision.\n\n"
        "When the experiment has history (two sweeps or more of "
        "its revision), the sweep's end computes it as `cmx trend` "
        "does (its statistics are kept, so the next `cmx trend` "
        "reads them back) and says which metrics changed at this "
        "sweep, that night.\n\n"
        "Cells that walk into one of Celery's known traps get a warning line each on stderr before the first run (as "
        "`cmx validate` says them; the report repeats them).\n\n"
        "Thresholds (`thresholds:` in the experiment) are checked per cell on the median of its ok runs when the sweep "
        "ends; a table of what held follows the summary.\n\n"
        "Exit codes: 0 every run ok and every threshold held, 1 some runs failed or timed out, 2 bad input (nothing "
        "ran), 3 a threshold crossed, 130 interrupted. When several apply, the first of 2, 130, 1, 3."
    )
)
def run(
    file: Path = typer.Argument(..., help="An experiment YAML file."),
    inventory: Optional[Path] = INVENTORY_OPTION,
    db_path: Path = RUN_DB_OPTION,
    only: Optional[str] = typer.Option(
        None,
        "--only",
        help="Run only matching cells: a cell-id glob, or "
        "dim=value globs, comma-separated, all must match (pool=gevent,concurrency=4).",
    ),
    no_resume: bool = typer.Option(
        False,
        "--no-resume",
        metavar="",
        help="Measure again even when the latest sweep was interrupted: a new sweep of "
        "every run, its ok runs not skipped.",
    ),
    new_revision: bool = typer.Option(
        False,
        "--new-revision",
        metavar="",
        help="The experiment's definition changed since its runs in --db: store this "
        "sweep's runs as its next revision, apart from the earlier ones (cmx run "
        "refuses a changed definition without it).",
    ),
    shuffle: Optional[int] = typer.Option(
        None,
        "--shuffle",
        metavar="SEED",
        help="Randomise the order of the "
        "cells within each round of repeats (same SEED, same order); each run's "
        "position is stored as run_starts.seq.",
    ),
    max_cells: Optional[int] = MAX_CELLS_OPTION,
    tag: list[str] = typer.Option(
        [],
        "--tag",
        help="KEY=VALUE stored with the sweep (repeatable); "
        "`cmx status`, `cmx report` and `cmx compare` select by it with --tag.",
    ),
    note: Optional[str] = typer.Option(None, "--note", help="A note stored with the sweep."),
    smoke_mode: bool = typer.Option(
        False,
        "--smoke",
        metavar="",
        help="Each cell once at a tiny size with a short timeout, into "
        "results/smoke.duckdb unless --db is given: catches configuration errors "
        "before a long sweep.",
    ),
    wide: bool = WIDE_OPTION,
    host_wait: float = typer.Option(
        3600.0,
        "--host-wait",
        metavar="SECONDS",
        min=0,
        help="How long to wait while another sweep started from this machine uses "
        "one of this sweep's hosts with the same cmx_workdir (one line names it); "
        "then exit 2. Two sweeps never share a host's work dir at once.",
    ),
):
    from cmx.engine.plan.matrix import cells_for_only
    from cmx.engine.plan.planner import plan as plan_runs
    from cmx.engine.run.progress import handler_for
    from cmx.engine.run.provenance import definition_hash, revision_for
    from cmx.engine.run.runner import Interrupted, RunStatus, Sweep
    from cmx.analysis.summary import cell_headlines, render, summarize, varying_dimensions
    from cmx.workloads.catalog import registry

    if smoke_mode and Path(db_path) == db.DEFAULT_DB:
        db_path = db.SMOKE_DB
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
        fail(exc)
    runs = plan_runs(exp, cells, shuffle=shuffle)
    skipped = 0
    try:
        with views.connect(db_path) as con:  # before any host is touched: a bad --db fails here
            db.check_name_is_ours(con, exp, db_path)
            revision = revision_for(con, exp, digest, db_path, new_revision)
            resumes, done = (None, set()) if no_resume else db.resume_point(con, exp.name, revision)
    except (InputError, HostError) as exc:  # HostError: the database cannot be written (a full disk)
        fail(exc)
    _warn_pitfalls(file, cells)  # on the terminal before the runs (bad input stays one line), not only in the report
    if not smoke_mode:  # what the sweep can show, before its runs are spent (a smoke run shows nothing)
        from cmx.cli.sweepsize import shows

        said = shows(exp, cells)
        if said:
            out.print(said, markup=False, highlight=False, soft_wrap=True)
    kept = [r for r in runs if (r.cell.cell_id, r.repeat) not in done]
    skipped, runs = len(runs) - len(kept), kept
    varying = varying_dimensions(cells)
    sweep = Sweep(exp, inv, Path(db_path), Path(db_path).parent, handler=None, tags=tags, note=note)
    sweep.provenance = _provenance(exp, inv, digest, revision)
    sweep.shuffle_seed = shuffle
    sweep.host_wait_s = host_wait
    sweep.resumes = resumes
    race = None
    if exp.racing:  # only the runs the race still needs, decided round by round (cli/race.py)
        from cmx.cli.race import Race

        race = sweep.schedule = Race(exp, Path(db_path), revision, sweep, [c.cell_id for c in cells], skipped)
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
        fail(exc)
    headline, shown = cell_headlines(registry.get(exp.workload.name), cells)
    try:
        with views.connect(db_path) as con:
            summaries = summarize(con, exp.name, cells, headline, revision, point=sweep.resumes or sweep.sweep_id)
    except HostError as exc:  # the database could not be written since (a full disk): what is stored stays
        fail(exc)
    for s in summaries:
        s.shown = shown.get(s.cell.cell_id)
    show(out, render(f"{exp.name} (results in {db_path}; `cmx sql` to query)", summaries, headline), wide=wide)
    _say_starved(summaries, labels_of(cells, varying))
    if race is not None and not interrupted and race.ended:
        with db.connect(db_path) as con:  # a race that ended is a finished sweep, never resumed
            db.record_sweep_end(con, sweep.sweep_id, race.ended)
        labels = labels_of(cells, varying)
        out.print(race.summary(lambda c: labels.get(c, c)), markup=False, highlight=False, soft_wrap=True)
    crossed = False if interrupted else check_point_thresholds(exp, cells, sweep, Path(db_path), varying)
    if not interrupted and not smoke_mode:
        say_history(exp.name, revision, Path(db_path), labels_of(cells, varying))
    for warning in sweep.warnings:
        err.print(f"warning: {warning}", markup=False, highlight=False, soft_wrap=True)
    if interrupted:
        err.print("interrupted: the current run was stopped and stored as interrupted; `cmx run` again resumes.")
        raise typer.Exit(130)
    failed = [o for o in outcomes if o.status is not RunStatus.OK]
    if failed:
        err.print(f"{len(failed)} of {len(outcomes)} run(s) did not succeed; see `cmx status --db {db_path}`.")
        raise typer.Exit(1)
    if crossed:
        err.print(f"{crossed} threshold check(s) crossed (exit 3); stored in threshold_checks.")
        raise typer.Exit(3)


def _say_starved(summaries, labels: dict[str, str]) -> None:
    """Under the summary: each cell whose workers sat idle while its tasks waited in the broker,
    and the pitfall experiment that shows why where the cell walks into a known one."""
    from cmx.analysis.summary import starved
    from cmx.engine.model import pitfalls

    for cell, line in starved(summaries, lambda c: labels.get(c, c)):
        known = [p for p, _ in pitfalls.matches(cell.values) if p.starves]
        if known:
            line += f"; it walks into '{known[0].title}': {known[0].experiment} shows it"
        out.print(line, markup=False, highlight=False, soft_wrap=True)


def _provenance(exp, inv, digest: str, revision: int) -> dict:
    from cmx.engine.run.provenance import Provenance, cmx_version, git_state, inventory_hash

    commit, dirty = git_state()
    return Provenance(cmx_version(), commit, dirty, digest, inventory_hash(inv), revision).columns()


def _raise_keyboard_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt
