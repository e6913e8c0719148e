"""``cmx``: validate, plan, run and query Celery experiment matrices.

Exit codes: 0 all runs ok; 1 some runs failed; 2 bad input (nothing ran); 3 a threshold crossed; 130 interrupted.

The app and what commands share are in :mod:`cmx.cli.common`; the commands, one module
per group: :mod:`~cmx.cli.cmd_run` (validate, plan, run), :mod:`~cmx.cli.cmd_results`
(status, sql, report, compare), :mod:`~cmx.cli.cmd_recommend` (recommend),
:mod:`~cmx.cli.cmd_trend` (trend), :mod:`~cmx.cli.cmd_travel` (export, import),
:mod:`~cmx.cli.cmd_catalog` (schema, workloads, init),
:mod:`~cmx.cli.cmd_doctor` (doctor, services up).
Importing them registers the commands, in the order ``cmx --help`` lists them.
"""

from __future__ import annotations

import sys

import typer

# Imported for their commands, in the order `cmx --help` lists them.
from cmx.cli import cmd_run  # noqa: F401  isort: skip
from cmx.cli import cmd_results  # noqa: F401  isort: skip
from cmx.cli import cmd_recommend  # noqa: F401  isort: skip
from cmx.cli import cmd_catalog  # noqa: F401  isort: skip
from cmx.cli import cmd_trend  # noqa: F401  isort: skip
from cmx.cli import cmd_travel  # noqa: F401  isort: skip
from cmx.cli import cmd_doctor  # noqa: F401  isort: skip
from cmx.cli import cmd_replay  # noqa: F401  isort: skip
from cmx.cli.common import app, err
from cmx.engine.errors import Problem

__all__ = ["app", "main"]


def _usage_errors() -> tuple[type[BaseException], ...]:
    """Click's exception base: typer >= 0.20 vendors click (typer.TyperException), older uses click."""
    kinds: list[type[BaseException]] = [getattr(typer, "TyperException", None)]
    try:
        import click

        kinds.append(click.ClickException)
    except ImportError:
        pass
    return tuple(k for k in kinds if k is not None)


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
        err.print(str(Problem(f"{exc.format_message()}{hint}", command)), markup=False, highlight=False, soft_wrap=True)
        sys.exit(getattr(exc, "exit_code", 2))
    except typer.Abort:
        err.print("interrupted")
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
