"""``cmx schema``, ``cmx workloads`` and ``cmx init``: what an experiment file can say, and a start."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table
from rich.text import Text

from cmx.cli.common import app, err, fail, out
from cmx.engine.errors import InputError


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
    folder: Path = typer.Option(
        Path("experiments"),
        "--dir",
        help="Where to look for your workload classes (the .py files beside your experiments).",
    ),
):
    """List the built-in workloads and your workload classes, with each param's type, default and description.

    Your classes are looked for in the .py files of --dir; their params are what `workload.params`
    and `params.*` dimensions take.
    """
    from cmx.cli.catalog import builtins, discover

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
    folder: Path = typer.Option(Path("experiments"), "--dir", help="Where to write the files."),
    from_profile: Path = typer.Option(
        None,
        "--from-profile",
        metavar="FILE",
        help="A profile cmx capture wrote: sweep pools × concurrency × prefetch "
        "for that traffic (workload replay) instead.",
    ),
):
    """Write experiments/NAME.yaml and experiments/NAME_tasks.py, a benchmark of your own tasks that runs as it is.

    Edit the tasks module (plain Celery) and the matrix into your own; try it with
    `cmx run experiments/NAME.yaml --smoke`. With --from-profile, only NAME.yaml: the captured
    traffic replayed across pools, concurrency and prefetch, ranked on p99 latency.

    Exit codes: 0; 2 bad input (a bad NAME, a file already there, no such profile).
    """
    from cmx.cli.scaffold import init, init_from_profile

    try:
        if from_profile is not None:
            experiment = init_from_profile(name, folder, from_profile)
            out.print(f"wrote {experiment}; next: cmx run {experiment} --smoke", highlight=False, markup=False)
            return
        experiment, tasks = init(name, folder)
    except InputError as exc:
        fail(exc)
    out.print(f"wrote {experiment} and {tasks}; next: cmx run {experiment} --smoke", highlight=False, markup=False)
