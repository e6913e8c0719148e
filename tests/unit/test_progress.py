"""Progress without a terminal: one line per run with k/N, status, duration and an ETA; the ETA is
the time left in one form on a terminal and in logs (issue 43)."""

from __future__ import annotations

import io

from rich.console import Console

from cmx.engine.model.cells import Cell
from cmx.engine.plan.planner import Run
from cmx.engine.run.progress import ProgressBar, ProgressLines, eta, handler_for, span
from cmx.engine.run.runner import RunOutcome, RunStatus


def test_eta_is_mean_time_per_run_times_runs_left():
    assert eta(100.0, 2, 6, 120.0) == 120.0 + 10 * 4
    assert eta(100.0, 0, 6, 120.0) is None


def test_the_time_left_is_said_as_a_duration():
    assert [span(s) for s in (0, 44.6, 60, 200, 3599, 7500)] == [
        "0 s",
        "45 s",
        "1 min",
        "3 min 20 s",
        "59 min 59 s",
        "2 h 05 min",
    ]


def test_lines_without_a_terminal():
    buf = io.StringIO()
    console = Console(file=buf, width=160)
    assert isinstance(handler_for(console, ["pool"]), ProgressLines)  # a StringIO is no terminal
    ticks = iter([0.0, 10.0, 13.2, 13.2, 21.5, 21.5])
    lines = ProgressLines(console, ["pool"], now=lambda: next(ticks))
    runs = [Run(f"r{i}", "e", Cell(f"c{i}", {"pool": p}), 1) for i, p in enumerate(("solo", "threads"))]
    lines.sweep_started(2, 0)  # t = 0
    lines.stage(None, "provisioning 1 host(s)")
    lines.stage(runs[0], "start + drive")  # t = 10: the first run starts
    lines.run_finished(RunOutcome(runs[0], RunStatus.OK, None))  # t = 13.2
    lines.stage(runs[1], "start + drive")  # t = 13.2
    lines.stage(runs[1], "ingest")  # (the run's start is kept)
    lines.run_finished(RunOutcome(runs[1], RunStatus.FAILED, "boom"))  # t = 21.5
    out = buf.getvalue().splitlines()
    assert out[0] == "2 run(s) to do"
    assert out[1] == "provisioning 1 host(s)"
    assert out[2] == "[1/2] pool=solo #1 ok in 3.2 s · ETA 3 s"
    assert out[3] == "[2/2] pool=threads #1 failed in 8.3 s · done"
    assert out[4] == "    r1: boom"


def test_eta_counts_from_the_first_runs_start_not_its_last_stage():
    """A run reports several stages; the ETA after the first run is its whole duration times the
    runs left (it once restarted at each stage, promising a 12-run sweep done in a minute)."""
    buf = io.StringIO()
    ticks = iter([0.0, 10.0, 70.0])
    lines = ProgressLines(Console(file=buf, width=160), ["pool"], now=lambda: next(ticks))
    run = Run("r0", "e", Cell("c0", {"pool": "solo"}), 1)
    lines.sweep_started(12, 0)  # t = 0
    for stage in ("start + drive", "stop + collect", "ingest"):
        lines.stage(run, stage)  # t = 10 at the first, no clock read after
    lines.run_finished(RunOutcome(run, RunStatus.OK, None))  # t = 70
    assert buf.getvalue().splitlines()[-1] == "[1/12] pool=solo #1 ok in 60.0 s · ETA 11 min"


def test_a_run_is_labelled_as_the_file_writes_its_values_and_the_label_selects_it():
    from cmx.engine.plan.matrix import cells_for_only
    from cmx.engine.run.runner import run_label

    values = {
        "celery.task_acks_late": True,
        "celery.worker_max_tasks_per_child": None,
        "celery.broker_transport_options": {"visibility_timeout": 60, "priority_steps": [0, 9]},
    }
    cell = Cell("c0", values)
    label = run_label(Run("r0", "e", cell, 2), list(values))
    assert label == (
        "celery.task_acks_late=true celery.worker_max_tasks_per_child=null "
        "celery.broker_transport_options={visibility_timeout: 60, priority_steps: [0, 9]} #2"
    )
    assert run_label(Run("r0", "e", cell, 1), []) == "cell c0 #1"  # nothing varies: which cell it is
    # a scalar as a progress line shows it, --only takes back (a mapping holds commas, which
    # --only splits on: select its cell by cell id)
    for part in ("celery.task_acks_late=true", "celery.worker_max_tasks_per_child=null"):
        assert cells_for_only([cell, Cell("c1", {})], part) == [cell], part


def test_the_bar_says_the_eta_as_the_lines_do():
    buf = io.StringIO()
    clock = [0.0]
    bar = ProgressBar(Console(file=buf, width=200, force_terminal=True), ["pool"], now=lambda: clock[0])
    run = Run("r0", "e", Cell("c0", {"pool": "solo"}), 1)
    with bar:
        bar.sweep_started(12, 0)
        bar.stage(run, "starting")  # t = 0: the first run starts
        clock[0] = 10.0
        bar.progress.update(bar.task, completed=1)
        column = bar.progress.columns[4]
        assert str(column.render(bar.progress.tasks[0])) == "ETA 1 min 50 s"  # t = 10: 10 s a run, 11 left


def test_a_runs_notes_are_printed_once_a_sweep():
    """A replay whose arrivals are receipts says so in its driver's notes: the sweep prints each note
    once, after the first run that made it (every run of a replay sweep says the same)."""
    buf = io.StringIO()
    lines = ProgressLines(Console(file=buf, width=160), ["pool"], now=lambda: 0.0)
    runs = [Run(f"r{i}", "e", Cell(f"c{i}", {"pool": "solo"}), i + 1) for i in range(3)]
    lines.sweep_started(3, 0)
    said = ("arrivals of 10 of 10 recorded tasks are their workers' receipts",)
    for run, notes in zip(runs, (said, said + ("another",), ())):
        lines.stage(run, "start + drive")
        lines.run_finished(RunOutcome(run, RunStatus.OK, None, notes=notes))
    out = buf.getvalue().splitlines()
    assert [x for x in out if x.startswith("note:")] == [f"note: {said[0]}", "note: another"]
    assert out.index(f"note: {said[0]}") == 2 and out.index("note: another") == 4
