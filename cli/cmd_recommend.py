"""``cmx recommend``: which configuration to run, ranked with the statistics of ``cmx compare``."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Optional

import typer

from cmx.analysis import views
from cmx.cli.common import DB_OPTION, WIDE_OPTION, app, fail, out
from cmx.cli.tables import show
from cmx.cli.resultsdb import results_db
from cmx.engine.errors import InputError
from cmx.engine.results import db


class RecommendFormat(str, Enum):
    table = "table"
    markdown = "markdown"
    json = "json"


@app.command(
    help=(
        "Which configuration to run: cells ranked on an objective, with ties, constraints and the Pareto front.\n\n"
        "Cells are ranked by the median of the first objective over their ok runs (n and the 95 % interval shown; a "
        "narrower interval breaks a tie of medians). A cell is "
        "tied with the best when cmx compare's rule cannot tell it "
        "apart (not shown better or worse).\n"
        "Constraints drop cells and each dropped cell says which constraint dropped it. With two objectives the Pareto "
        "front (cells no other cell beats on both) is marked.\n\n"
        "With no objective named, the experiment's objective: (with its where: constraints) or its workload's own "
        "(throughput: maximize consume_rate).\n\n"
        "Examples:\n"
        "  cmx recommend quickstart --maximize consume_rate --where 'tasks_lost == 0'\n"
        "  cmx recommend pools --maximize consume_rate --minimize peak_pss_bytes --format json\n\n"
        "Exit 2: an unknown metric, maximizing a lower-is-better metric (or the reverse), a constraint no cell meets."
    )
)
def recommend(
    experiment: str = typer.Argument(..., help="An experiment name in the results database."),
    maximize: list[str] = typer.Option(
        [],
        "--maximize",
        metavar="M",
        help="Rank on this higher-is-better metric (repeatable: a second objective gives a Pareto front).",
    ),
    minimize: list[str] = typer.Option([], "--minimize", metavar="M", help="Rank on this lower-is-better metric."),
    where: list[str] = typer.Option(
        [],
        "--where",
        metavar="'M OP V'",
        help="A constraint on a cell's median, in "
        "the units the summary prints: 'peak_pss_bytes <= 512MiB', 'tasks_lost == 0', "
        "'latency_p99_s < 250ms' (repeatable: all must hold).",
    ),
    revision: Optional[int] = typer.Option(
        None, "--revision", min=1, help="Which revision (definition); default the latest."
    ),
    tag: list[str] = typer.Option([], "--tag", help="Only the runs of sweeps run with this KEY=VALUE (repeatable)."),
    margin: float = typer.Option(
        5.0, "--margin", min=0.0, metavar="PCT", help="Equivalence margin of the tie rule, as in cmx compare."
    ),
    only: Optional[str] = typer.Option(
        None,
        "--only",
        metavar="SELECTOR",
        help="Rank only the cells matching "
        "DIM=VALUE,… (all must match; tag.KEY=VALUE for sweeps run with that tag), "
        "as cmx trend --only: e.g. params.task=app.resize.",
    ),
    fmt: RecommendFormat = typer.Option(RecommendFormat.table, "--format", "-f", help="Output format."),
    db_path: Path = DB_OPTION,
    wide: bool = WIDE_OPTION,
):
    from cmx.analysis.recommend import (
        MAXIMIZE,
        MINIMIZE,
        default_constraints,
        default_objective,
        objective,
        parse_constraint,
        recommend as rank,
    )
    from cmx.analysis.recommend_format import as_json, as_markdown, as_table

    try:
        tags = db.parse_tags(tag)
        objectives = [objective(m, MAXIMIZE) for m in maximize] + [objective(m, MINIMIZE) for m in minimize]
        constraints = [parse_constraint(w) for w in where]
        db_path = results_db(db_path, experiment)
        with views.connect(db_path, read_only=True) as con:
            known = views.revisions(con, experiment)
            chosen = views.choose_revision(
                known, experiment, revision, "" if known else views.experiment_hint(con, experiment)
            )
            if not objectives:  # the experiment's objective, and its where constraints with it
                objectives = [default_objective(con, experiment, chosen)]
                constraints = default_constraints(con, experiment, chosen) + constraints
            rec = rank(con, experiment, chosen, objectives, constraints, tags, margin, only=only)
    except (FileNotFoundError, LookupError, ValueError, InputError) as exc:
        fail(exc)
    if fmt is RecommendFormat.json:
        print(as_json(rec))
    elif fmt is RecommendFormat.markdown:
        sys.stdout.write(as_markdown(rec))
    else:
        show(out, as_table(rec), wide=wide)
