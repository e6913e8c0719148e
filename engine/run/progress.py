"""The sweep's progress display, as SweepHandlers (no logic here): a rich bar with an ETA on a
terminal, and one plain line per run elsewhere (CI logs, nohup, pipes), also with an ETA. Both
say the ETA in one form, the time left (`span`):

    [3/12] broker=redis pool=threads #1 ok in 17.2 s · ETA 3 min 20 s
"""

from __future__ import annotations

import re

import time

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from cmx.engine.plan.planner import Run
from cmx.engine.run.runner import RunOutcome, RunStatus, run_label


def eta(started: float, done: int, total: int, now: float) -> float | None:
    """Wall-clock epoch seconds the sweep should end at: the mean time per finished run so far
    (harness and provisioning included) times the runs left. None before the first run ends."""
    if done <= 0 or done > total:
        return None
    return now + (now - started) / done * (total - done)


def span(seconds: float) -> str:
    """A time left as people say it: ``45 s``, ``3 min 20 s``, ``2 h 05 min``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s" if seconds % 60 else f"{seconds // 60} min"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class _EtaColumn(ProgressColumn):
    """The bar's ETA, reckoned and said as the lines say it (`eta`, `span`): not rich's own."""

    def __init__(self, bar: "ProgressBar"):
        super().__init__()
        self.bar = bar

    def render(self, task) -> Text:
        bar = self.bar
        if bar.first_start is None:
            return Text("")
        end = eta(bar.first_start, int(task.completed), int(task.total or 0), bar.now())
        return Text(f"ETA {span(end - bar.now())}" if end and not task.finished else "")


class ProgressBar:
    def __init__(self, console: Console, varying: list[str], now=time.time):
        self.console = console
        self.varying = varying
        self.now = now
        self.first_start: float | None = None  # the ETA counts from the first run's start, as the lines do
        self.notes_said: set[str] = set()
        self.progress = Progress(
            TextColumn("[bold]runs"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            _EtaColumn(self),
            TextColumn("{task.description}", markup=False),
            console=console,
            transient=False,
        )
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

    def retotal(self, total: int) -> None:
        """A race changed how many runs are still possible (cli/race.py)."""
        self.progress.update(self.task, total=total)

    def stage(self, run: Run | None, stage: str) -> None:
        if run is not None and self.first_start is None:
            self.first_start = self.now()
        label = f"{run_label(run, self.varying)}: " if run else ""
        self.progress.update(self.task, description=f"{label}{stage}")

    def run_finished(self, outcome: RunOutcome) -> None:
        if outcome.status is not RunStatus.OK:
            label = escape(f"{run_label(outcome.run, self.varying)} ({outcome.run.run_id}): {outcome.error}")
            self.console.print(f"[red]{outcome.status.value}[/red] {label}", highlight=False)
        for note in new_notes(self, outcome):
            self.console.print(f"note: {note}", markup=False, highlight=False)
        self.progress.advance(self.task)


class ProgressLines:
    """Without a terminal: sweep-level stages and one line per finished run, never rewritten."""

    def __init__(self, console: Console, varying: list[str], now=time.time):
        self.console = console
        self.varying = varying
        self.now = now
        self.total = 0
        self.done = 0
        self.started = 0.0
        self.run_started: dict[str, float] = {}
        self.notes_said: set[str] = set()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def _say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)

    def sweep_started(self, total: int, skipped: int) -> None:
        self.total, self.started = total, self.now()
        if skipped:
            self._say(f"resuming: {skipped} run(s) already stored as ok are skipped (--no-resume runs them)")
        self._say(f"{total} run(s) to do")

    def retotal(self, total: int) -> None:
        """A race changed how many runs are still possible (cli/race.py)."""
        self.total = total

    def stage(self, run: Run | None, stage: str) -> None:
        if run is None:
            self._say(stage)
        else:
            if run.run_id in self.run_started:
                return  # a later stage of a run: it started at its first
            self.run_started[run.run_id] = now = self.now()
            if not self.done and len(self.run_started) == 1:
                self.started = now  # the ETA counts from the first run's start, not from provisioning

    def run_finished(self, outcome: RunOutcome) -> None:
        now = self.now()
        self.done += 1
        took = now - self.run_started.pop(outcome.run.run_id, now)
        status = outcome.status.value
        line = f"[{self.done}/{self.total}] {run_label(outcome.run, self.varying)} {status} in {took:.1f} s"
        end = eta(self.started, self.done, self.total, now)
        line += " · done" if self.done >= self.total else (f" · ETA {span(end - now)}" if end else "")
        if outcome.status is not RunStatus.OK and outcome.error:
            line += f"\n    {outcome.run.run_id}: {outcome.error}"
        self._say(line)
        for note in new_notes(self, outcome):
            self._say(f"note: {note}")


def note_shape(note: str) -> str:
    """A note with its numbers left out: ``driver sent 3 of 20 units late`` and ``… 5 of 20 …`` are one."""
    return re.sub(r"\d[\d,.]*", "#", note)


def new_notes(handler, outcome: RunOutcome) -> list[str]:
    """The run's notes of a shape the sweep has not printed yet: each kind once a sweep (every run of
    a replay sweep says the same, its counts aside); each run's own are in its driver.json."""
    new = []
    for note in dict.fromkeys(outcome.notes):
        shape = note_shape(note)
        if shape not in handler.notes_said:
            handler.notes_said.add(shape)
            new.append(note)
    return new


def handler_for(console: Console, varying: list[str]):
    """The bar on a terminal, lines elsewhere."""
    return ProgressBar(console, varying) if console.is_terminal else ProgressLines(console, varying)
