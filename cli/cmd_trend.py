"""``cmx trend``: an experiment's metrics across its sweeps (or tag values), with the changes found."""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Optional

import typer

from cmx.analysis import views
from cmx.cli.common import DB_OPTION, WIDE_OPTION, app, err, fail, out
from cmx.cli.tables import show
from cmx.cli.resultsdb import results_db
from cmx.analysis.rules import TREND_RULE
from cmx.engine.errors import InputError


class TrendFormat(str, enum.Enum):
    table = "table"
    markdown = "markdown"
    json = "json"


@app.command(
    help=(
        "Per cell and metric, one point per sweep (or tag value): n, median and its 95 % interval; and the change "
        "points.\n\n"
        "Each finished sweep is one point (an interrupted sweep and the run that resumed it are one). "
        f"{TREND_RULE.rstrip('.')}. "  # the rule as analysis/rules.py words it, for every page that states it
        "The latest point is always compared with the stable nights just before it, so a regression shows the night "
        "it happens, and keeps failing --fail-on worse while it stands. When the points ran on different "
        "environments (package versions, servers, kernel, CPU, governor: the fingerprint compare warns of), stderr "
        "names each fact and the point it changed at; a change whose "
        "two sides' hosts were loaded differently from outside the run says so beside it (noise labels a change, never "
        "hides one).\n\n"
        "Exit codes: 0; 1 with --fail-on when a headline metric's latest point is worse (or undecided, with "
        "inconclusive); 2 bad input."
    )
)
def trend(
    experiment: str = typer.Argument(..., help="The experiment's name."),
    by: str = typer.Option(
        "sweep",
        "--by",
        help="One point per sweep, or per value of a tag (`tag.KEY`, from "
        "`cmx run --tag KEY=VALUE`), in the order the sweeps ran.",
    ),
    metric: list[str] = typer.Option([], "--metric", "-m", metavar="M", help="Only this metric (repeatable)."),
    only: Optional[str] = typer.Option(
        None,
        "--only",
        metavar="SELECTOR",
        help="Only cells matching DIM=VALUE,… (all must match; tag.KEY=VALUE for sweeps run with that tag).",
    ),
    fmt: TrendFormat = typer.Option(TrendFormat.table, "--format", "-f", help="Output format."),
    revision: Optional[int] = typer.Option(
        None, "--revision", min=1, help="The experiment's revision (default: the latest)."
    ),
    db_path: Path = DB_OPTION,
    fail_on: Optional[str] = typer.Option(
        None,
        "--fail-on",
        metavar="worse[,inconclusive]",
        help="`worse`: exit 1 when a headline metric's latest point is shown worse, or a regression before it "
        "still stands (a nightly CI gate); `worse,inconclusive`: also when its latest point "
        "shows neither worse nor alright. A gate whose latest point has too few "
        "runs to show anything says so on stderr.",
    ),
    wide: bool = WIDE_OPTION,
):
    from cmx.analysis import gate
    from cmx.analysis.trend import trend as trend_of
    from cmx.analysis.trend_gate import latest_gate
    from cmx.analysis.trend_format import as_json, as_markdown, as_table

    try:
        fails_on = gate.parse(fail_on)
        db_path = results_db(db_path, experiment)
        with views.connect(db_path, read_only=True) as con:
            res = trend_of(con, experiment, by=by, metrics=tuple(metric), only=only, revision=revision)
    except (FileNotFoundError, ValueError, InputError) as exc:
        fail(exc)
    for warning in res.warnings:
        err.print(f"warning: environments differ: {warning}", markup=False, highlight=False, soft_wrap=True)
    if fmt is TrendFormat.json:
        print(as_json(res))
    elif fmt is TrendFormat.markdown:
        sys.stdout.write(as_markdown(res))
    else:
        show(out, as_table(res), wide=wide)
    if not fails_on:
        return
    judged = latest_gate(res)
    cannot = first_point(judged) or gate.cannot_fail(judged, latest_side=True)
    if cannot:
        err.print(f"trend: {cannot} (--fail-on {fail_on})", markup=False, highlight=False, soft_wrap=True)
    failed = gate.failures(judged, fails_on)
    if failed:
        err.print(
            f"trend: {'; '.join(failed)} at the latest point (--fail-on {fail_on})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(1)
    if cannot and gate.INCONCLUSIVE in fails_on:
        raise typer.Exit(1)


def first_point(judged) -> str | None:
    """The line a gate says on the first sweep (no series has an earlier point to be compared with:
    more runs tonight would not help), or None."""
    if judged and all(j.n_b == 0 for j in judged):
        return (
            "no verdict yet: every series has one point (its first sweep), and the next sweep is compared "
            "with it, so this gate cannot fail tonight"
        )
    return None
