"""The sweep's progress display: a rich progress bar, as a SweepHandler (no logic here)."""
from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from engine.planner import Run
from engine.runner import RunOutcome, RunStatus, run_label


class ProgressBar:
    def __init__(self, console: Console, varying: list[str]):
        self.console = console
        self.varying = varying
        self.progress = Progress(TextColumn("[bold]runs"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                 TextColumn("{task.description}", markup=False), console=console, transient=False)
        self.task = None

    def __enter__(self):
        self.progress.__enter__()
        return self

    def __exit__(self, *exc):
        return self.progress.__exit__(*exc)

    def sweep_started(self, total: int, skipped: int) -> None:
        if skipped:
            self.console.print(f"resuming: {skipped} run(s) already stored as ok are skipped (--no-resume runs them)")
        self.task = self.progress.add_task("", total=total)

    def stage(self, run: Run | None, stage: str) -> None:
        label = f"{run_label(run, self.varying)}: " if run else ""
        self.progress.update(self.task, description=f"{label}{stage}")

    def run_finished(self, outcome: RunOutcome) -> None:
        if outcome.status is not RunStatus.OK:
            label = escape(f"{run_label(outcome.run, self.varying)} ({outcome.run.run_id}): {outcome.error}")
            self.console.print(f"[red]{outcome.status.value}[/red] {label}", highlight=False)
        self.progress.advance(self.task)
