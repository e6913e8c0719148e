"""``cmx trend``: an experiment's metrics across its sweeps (or tag values), with the changes found."""
from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Optional

import typer

from cmx.analysis import views
from cmx.engine.cli.common import DB_OPTION, app, err, fail, out
from cmx.engine.errors import InputError


class TrendFormat(str, enum.Enum):
    table = "table"
    markdown = "markdown"
    json = "json"


class TrendFailOn(str, enum.Enum):
    worse = "worse"


@app.command()
def trend(
    experiment: str = typer.Argument(..., help="The experiment's name."),
    by: str = typer.Option("sweep", "--by", help="One point per sweep, or per value of a tag (`tag.KEY`, from "
                           "`cmx run --tag KEY=VALUE`), in the order the sweeps ran."),
    metric: list[str] = typer.Option([], "--metric", "-m", metavar="M", help="Only this metric (repeatable)."),
    only: Optional[str] = typer.Option(None, "--only", metavar="SELECTOR", help="Only cells matching DIM=VALUE,… "
                                       "(all must match; tag.KEY=VALUE for sweeps run with that tag)."),
    fmt: TrendFormat = typer.Option(TrendFormat.table, "--format", "-f", help="Output format."),
    revision: Optional[int] = typer.Option(None, "--revision", min=1, help="The experiment's revision "
                                           "(default: the latest)."),
    db_path: Path = DB_OPTION,
    fail_on: Optional[TrendFailOn] = typer.Option(None, "--fail-on", help="`worse`: exit 1 when a metric's "
                                                  "latest point is shown worse (a nightly CI gate)."),
):
    """Per cell and metric, one point per sweep (or tag value): n, median and its 95 % interval; and the change points.

    Each finished sweep is one point (an interrupted sweep and the run that resumed it are one). Changes are found by E-divisive means (as apache-otava does) over the points' medians and kept only when the runs before and after differ under the rule of `cmx compare`: Mann-Whitney p ≤ 0.05 and the change's 95 % interval excludes 0 (better / worse / differs). The latest point is always compared with the runs since the last change before it, so a regression shows the night it happens. When the points ran on different environments (package versions, servers, kernel, CPU, governor: the fingerprint compare warns of), stderr names each fact and the point it changed at.

    Exit codes: 0; 1 with --fail-on worse when a latest point is worse; 2 bad input.
    """
    from cmx.analysis.stats import WORSE
    from cmx.analysis.trend import latest_verdicts, trend as trend_of
    from cmx.analysis.trend_format import as_json, as_markdown, as_table

    try:
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
        out.print(as_table(res))
    worse = [f"{s.metric} of {s.cell_id} at {c.at} ({c.comparison.change_pct:+.1f}%)"
             for s, c in latest_verdicts(res) if c.comparison.verdict == WORSE]
    if fail_on is TrendFailOn.worse and worse:
        err.print(f"trend: worse at the latest point: {', '.join(worse)} (--fail-on worse)", markup=False,
                  highlight=False, soft_wrap=True)
        raise typer.Exit(1)
