"""``cmx status``, ``cmx sql``, ``cmx report`` and ``cmx compare``: reading the results database."""

from __future__ import annotations

import csv
import io
import json
import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from cmx.cli.common import DB_OPTION, WIDE_OPTION, app, err, fail, out
from cmx.cli.tables import show
from cmx.cli.resultsdb import results_db
from cmx.engine.errors import InputError
from cmx.analysis import views
from cmx.engine.results import db


@app.command()
def status(
    db_path: Path = DB_OPTION,
    tag: list[str] = typer.Option(
        [], "--tag", help="Only runs of sweeps run with this KEY=VALUE (repeatable: all must match)."
    ),
):
    """Experiments in the results database and their runs by status.

    A run without an end is [bold]running[/bold] while the sweep that started it is alive, else
    [bold]abandoned[/bold] (its sweep was killed; `cmx run` again resumes it).
    """
    from cmx.engine.run.runstatus import ABANDONED, RUNNING, RunStatus, controller_alive, open_status

    try:
        tags = db.parse_tags(tag)
        db_path = results_db(db_path)
        with views.connect(db_path, read_only=True) as con:
            where, params = db.tagged_runs_sql(con, tags)
            rows = con.execute(sql_status(con, where), params).fetchall()
            shares = _host_shares(con)
            suspect = con.execute("""
                SELECT r.experiment, count(DISTINCT r.run_id) FROM runs r JOIN metrics m USING (run_id)
                WHERE r.status = 'ok' AND m.name = 'clock_suspect' AND m.value = 1
                GROUP BY ALL ORDER BY ALL""").fetchall()
    except (FileNotFoundError, InputError) as exc:
        fail(exc)
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
    for (exp, revision), e in sorted(
        per_exp.items(), key=lambda kv: (last_of[kv[0][0]], kv[0][0], kv[0][1]), reverse=True
    ):
        cells = [f"[red]{e[c]}[/red]" if e[c] and c in bad else str(e[c]) for c in columns]
        table.add_row(Text(exp), str(revision), str(e["runs"]), *cells, str(e["last"])[:19])
    out.print(table if per_exp else ("no runs of sweeps tagged " + " ".join(tag) if tag else "no runs yet"))
    if shares:
        out.print(_shares_table(shares))
    for exp, n in suspect:
        out.print(
            f"[yellow]{exp}: {n} ok run(s) with clock_suspect = 1: hosts' clocks could move their "
            "cross-host latencies by over a tenth (see metrics clock_uncertainty_s, clock_uncorrected_tasks)"
            "[/yellow]",
            soft_wrap=True,
        )


def sql_status(con, where: str = "TRUE") -> str:
    """Per run (of those ``where`` selects): experiment, revision, stored status ('' without an
    end), its sweep's controller, start."""
    has_controllers = con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'sweep_controllers'").fetchone()
    controller = (
        "c.hostname, c.pid, c.pid_started, s.started_at FROM run_starts s "
        "LEFT JOIN sweep_controllers c USING (sweep_id)"
        if has_controllers
        else "NULL, NULL, NULL, s.started_at FROM run_starts s"
    )
    revisions = (
        "LEFT JOIN (SELECT sweep_id, max(revision) AS revision FROM sweeps GROUP BY sweep_id) w USING (sweep_id)"
    )
    return (
        f"SELECT s.experiment, coalesce(w.revision, 1) AS revision, coalesce(e.status, '') AS status, "
        f"{controller} {revisions} LEFT JOIN run_ends e USING (run_id) WHERE {where}"
    )


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
    table = Table(
        title="work per worker host (runs with machines > 1; an even split is 1/machines)", title_justify="left"
    )
    for col in ("experiment", "host", "runs", "tasks", "share", "smallest share"):
        table.add_column(col, justify="left" if col in ("experiment", "host") else "right")
    for (exp, host), (runs, tasks, shares, low) in per.items():
        known = [s for s in shares if s is not None]
        table.add_row(
            Text(exp), Text(host), str(runs), f"{tasks:,}", pct(statistics.median(known) if known else None), pct(low)
        )
    return table


class Format(str, Enum):
    table = "table"
    csv = "csv"
    json = "json"


@app.command("sql")
def sql_command(
    query: str = typer.Argument(
        ...,
        help="Any SQL over the tables runs, tasks, samples, peaks, connections, "
        "metrics, hosts (and the views in analysis/).",
    ),
    db_path: Path = DB_OPTION,
    fmt: Format = typer.Option(Format.table, "--format", "-f", help="Output format."),
):
    """Run any SQL over the results database (DuckDB).

    Example: cmx sql "SELECT pool, concurrency, median(value) FROM metrics JOIN runs USING (run_id)
    WHERE name = 'consume_rate' GROUP BY ALL ORDER BY ALL"
    """
    import duckdb

    from cmx.engine.results.dbfile import empty_query, refusal

    try:
        if empty_query(query):
            raise InputError(empty_query(query))
        with views.connect(db_path, read_only=True, sandboxed=True) as con:
            cur = con.execute(query)
            if cur is None:  # only comments or semicolons
                raise InputError(empty_query(""))
            cols = [d[0] for d in cur.description] if cur.description else []
            rows = cur.fetchall() if cols else []
    except (FileNotFoundError, InputError) as exc:
        fail(exc)
    except duckdb.Error as exc:
        fail(InputError(refusal(exc)))
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


@app.command(
    help=(
        "Write an offline HTML report (index.html) plus a PNG and a Vega-Lite JSON per chart.\n\n"
        "With --tag, the report covers only the runs of sweeps that carry every given tag, and says so.\n"
        "Without --db, an experiment only `cmx run --smoke` has run is reported from results/smoke.duckdb (said on "
        "stderr), as status, trend, compare and recommend read it."
    )
)
def report(
    experiment: str = typer.Argument(..., help="An experiment name in the results database."),
    db_path: Path = DB_OPTION,
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Output directory (default reports/EXPERIMENT/)."),
    revision: Optional[int] = typer.Option(
        None,
        "--revision",
        min=1,
        help="Which revision (definition) of the experiment to report; default the latest. Revisions are never pooled.",
    ),
    tag: list[str] = typer.Option(
        [],
        "--tag",
        help="Report only the runs of sweeps run with this KEY=VALUE (`cmx run --tag`; repeatable: all must match).",
    ),
    by: str = typer.Option(
        "sweep",
        "--by",
        metavar="sweep|tag.KEY",
        help="The history charts' points: one per sweep, or one per value of a tag (as `cmx trend --by`).",
    ),
):
    import time

    from cmx.analysis.pngs import Painter

    started = time.perf_counter()
    target = out_dir or Path("reports") / experiment
    with Painter() as painter:  # its PNG workers start first: their engines warm while the report imports and queries
        from cmx.analysis.compare import SelectionError
        from cmx.analysis.report import write_report

        try:
            tags = db.parse_tags(tag)
            db_path = results_db(db_path, experiment, doing="reporting")
            with views.connect(db_path, read_only=True) as con:
                rep = write_report(con, experiment, target, revision, tags, painter, by=by)
        except (FileNotFoundError, LookupError, InputError, SelectionError) as exc:  # SelectionError: --by
            fail(exc)
    out.print(
        f"{rep.html}: revision {rep.revision}, {rep.cells} cells, {rep.runs} runs, {len(rep.charts)} charts "
        f"({', '.join(rep.charts) or 'none'}) in {time.perf_counter() - started:.1f} s",
        highlight=False,
        soft_wrap=True,
    )


class CompareFormat(str, Enum):
    table = "table"
    markdown = "markdown"
    csv = "csv"
    json = "json"


@app.command(
    help=(
        "Compare two cells like for like: per metric n, median with its 95 % interval, change % with its interval, "
        "p-value, verdict.\n\n"
        "Each side must select exactly one cell: otherwise exit 2 names the dimensions that still vary (--pool-cells "
        "pools them, and says so).\n\n"
        "Verdicts never say more than the runs show:\n"
        "better / worse: shown beyond the margin, i.e. Mann-Whitney p ≤ 0.05 (two-sided, exact), the difference's 95 % "
        "bootstrap interval excludes 0 and the change's whole interval lies beyond ±--margin %;\n"
        "small: shown different, but the change's interval reaches inside ±--margin % (reported, never gating);\n"
        "same: shown the same, i.e. the change's whole interval lies within ±--margin % (default 5);\n"
        "inconclusive: neither shown; the table says how many "
        "runs a side would tell (with 3 runs a side the smallest p "
        "is 0.1, so a difference needs 4);\n"
        "n too small: fewer than 3 ok runs on a side.\n"
        "A side whose runs spread over 10 % of their mean is flagged unstable.\n\n"
        "Differing host facts (CPU model, cores, kernel, Python, Celery/kombu versions) are warned about on stderr.\n"
        "Exit codes: 0, or 1 with --fail-on worse when a metric is worse (or undecided, with worse,inconclusive), 2 on "
        "bad input."
    )
)
def compare(
    baseline: str = typer.Argument(
        ...,
        help="EXPERIMENT or EXPERIMENT:DIM=VALUE,DIM=VALUE selecting one cell "
        "(e.g. quickstart:broker=redis,pool=threads).",
    ),
    contender: str = typer.Argument(..., help="Same form as BASELINE (e.g. quickstart:broker=rabbitmq,pool=threads)."),
    db_path: Path = DB_OPTION,
    fmt: CompareFormat = typer.Option(CompareFormat.table, "--format", "-f", help="Output format."),
    pool_cells: bool = typer.Option(
        False,
        "--pool-cells",
        metavar="",
        help="Allow a side to select several cells (or "
        "revisions) and pool their runs; the output says what was pooled.",
    ),
    tag: list[str] = typer.Option(
        [],
        "--tag",
        help="On both sides, only the runs of sweeps run with this "
        "KEY=VALUE (`cmx run --tag`; repeatable: all must match). One side alone: "
        "tag.KEY=VALUE in its selection.",
    ),
    margin: float = typer.Option(
        5.0,
        "--margin",
        min=0.0,
        metavar="PCT",
        help="Equivalence margin: `same` only when the change's whole 95 % interval lies "
        "within ±PCT % of the baseline's median.",
    ),
    metric: list[str] = typer.Option(
        [], "--metric", "-m", metavar="M", help="Compare (and gate on) only this metric (repeatable)."
    ),
    every: bool = typer.Option(
        False,
        "--all",
        help="Every metric either side has (by default: the objective and the headline metrics of the sides' runs).",
    ),
    fail_on: Optional[str] = typer.Option(
        None,
        "--fail-on",
        metavar="worse[,inconclusive]",
        help="`worse`: exit 1 when any compared metric is shown worse (a CI gate; "
        "harness and noise metrics never gate); `worse,inconclusive`: also when "
        "one is neither shown worse nor alright. Sides too small for any verdict "
        "say so on stderr.",
    ),
    wide: bool = WIDE_OPTION,
):
    from cmx.analysis.compare import compare as compare_runs, parse_selection, with_tags
    from cmx.analysis.compare_format import STAYS, as_csv, as_json, as_markdown, as_table

    from cmx.analysis import gate

    try:
        fails_on = gate.parse(fail_on)
        tags = db.parse_tags(tag)
        base, cont = with_tags(parse_selection(baseline), tags), with_tags(parse_selection(contender), tags)
        db_path = results_db(db_path, base.experiment, cont.experiment)
        with views.connect(db_path, read_only=True) as con:
            res = compare_runs(
                con, base, cont, pool_cells=pool_cells, margin_pct=margin, metrics=tuple(metric), every=every
            )
    except (FileNotFoundError, ValueError, InputError) as exc:
        fail(exc)
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
        show(out, as_table(res), wide=wide, stay=STAYS)
    if not fails_on:
        return
    from cmx.engine.results import metricdefs

    judged = [
        gate.Judged(m.metric, m.result.verdict, m.result.baseline.n, m.result.contender.n)
        for m in res.metrics
        if m.better != "neither" and metricdefs.group_of(m.metric) not in (metricdefs.HARNESS, metricdefs.NOISE)
    ]
    cannot = gate.cannot_fail(judged, latest_side=False)
    if cannot:
        err.print(f"compare: {cannot} (--fail-on {fail_on})", markup=False, highlight=False, soft_wrap=True)
    failed = gate.failures(judged, fails_on)
    if failed:
        err.print(f"compare: {'; '.join(failed)} (--fail-on {fail_on})", markup=False, highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    if cannot and gate.INCONCLUSIVE in fails_on:
        raise typer.Exit(1)
