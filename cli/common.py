"""What every ``cmx`` command shares: the Typer app, the consoles, common options, and the one way
bad input ends a command (one line per problem, exit 2). The commands live in ``cmd_*.py``."""

from __future__ import annotations

import os
import sys

import typer
from rich.console import Console

from cmx.cli.tables import LOG_WIDTH, WIDE_HELP
from cmx.engine.errors import InputError
from cmx.engine.results import db


def _help_as_click_wrote_it() -> None:
    """typer 0.29's help prints ``<bool>`` beside every flag (``--help <bool>``), which reads as if it
    took a value, and a required argument as ``{path}`` on the usage line; a flag shows no type and an
    argument its name in capitals (``Usage: cmx profile show [OPTIONS] FILE``), as click wrote them."""
    from typer import core

    shown = core.TyperOption.display_type_rich
    if getattr(shown, "cmx", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag and self.metavar is None else shown(self, ctx)

    def usage_name(self) -> str:
        name = self.metavar or self.name.upper()
        return (name if self.required else f"[{name}]") + ("..." if self.nargs != 1 else "")

    display_type_rich.cmx = True
    core.TyperOption.display_type_rich = display_type_rich
    if hasattr(core.TyperArgument, "_usage_display_name"):
        core.TyperArgument._usage_display_name = usage_name


_help_as_click_wrote_it()
app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode="rich",
    help="celery-matrix: sweep real Celery deployments defined in YAML and query the results in SQL.\n\n"
    "Typical session: [bold]cmx validate[/bold] FILE, [bold]cmx plan[/bold] FILE, [bold]cmx run[/bold] FILE, "
    "then [bold]cmx status[/bold] and [bold]cmx sql[/bold] \"SELECT …\".",
)
# Not a terminal (CI logs, pipes): COLUMNS, else wide enough that the summary table stays readable
# (cli/tables.py fits every table to this width).
out = Console(width=None if sys.stdout.isatty() or os.environ.get("COLUMNS", "").isdigit() else LOG_WIDTH)
err = Console(stderr=True)

WIDE_OPTION = typer.Option(False, "--wide", help=WIDE_HELP)
DB_OPTION = typer.Option(db.DEFAULT_DB, "--db", help="The results database (DuckDB file).")
INVENTORY_OPTION = typer.Option(
    None,
    "--inventory",
    "-i",
    help="The Ansible inventory (file or folder). Without "
    "it: the experiment's `inventory:` (relative to the experiment file), else "
    "./inventory/local.yml, else the built-in localhost inventory (said on stderr).",
)
MAX_CELLS_OPTION = typer.Option(
    None,
    "--max-cells",
    min=1,
    help="Refuse a matrix of more cells than this (default 10,000: a guard against a typo that multiplies the sweep).",
)
RUN_DB_OPTION = typer.Option(
    db.DEFAULT_DB,
    "--db",
    help="The results database (DuckDB file). Its directory also "
    "holds the sweep's artifacts/, shipped code and generated .secrets.json (keep it out "
    "of git).",
)


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
    version: bool = typer.Option(
        False,
        "--version",
        callback=_print_version,
        is_eager=True,
        metavar="",
        help="Print the version (and the git commit when run from a checkout) and exit.",
    ),
) -> None:
    pass


def fail(exc: Exception) -> None:
    if isinstance(exc, InputError):
        for p in exc.problems:
            err.print(str(p), markup=False, highlight=False, emoji=False, soft_wrap=True)
    else:
        err.print(f"error: {exc}", markup=False, highlight=False, emoji=False, soft_wrap=True)
    raise typer.Exit(2)
