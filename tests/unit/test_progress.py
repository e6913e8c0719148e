"""Progress without a terminal: one line per run with k/N, status, duration and an ETA."""
from __future__ import annotations

import io
import time

from rich.console import Console

from cmx.engine.model.cells import Cell
from cmx.engine.plan.planner import Run
from cmx.engine.run.progress import ProgressLines, clock, eta, handler_for
from cmx.engine.run.runner import RunOutcome, RunStatus


def test_eta_is_mean_time_per_run_times_runs_left():
    assert eta(100.0, 2, 6, 120.0) == 120.0 + 10 * 4
    assert eta(100.0, 0, 6, 120.0) is None
    now = time.mktime((2026, 11, 23, 14, 0, 0, 0, 0, -1))
    assert clock(now + 5 * 60, now) == "14:05"
    assert clock(now + 2 * 86400, now).endswith("14:00") and len(clock(now + 2 * 86400, now)) > 5


def test_lines_without_a_terminal():
    buf = io.StringIO()
    console = Console(file=buf, width=160)
    assert isinstance(handler_for(console, ["pool"]), ProgressLines)  # a StringIO is no terminal
    ticks = iter([0.0, 10.0, 13.2, 13.2, 20.0, 21.5, 21.5])
    lines = ProgressLines(console, ["pool"], now=lambda: next(ticks))
    runs = [Run(f"r{i}", "e", Cell(f"c{i}", {"pool": p}), 1) for i, p in enumerate(("solo", "threads"))]
    lines.sweep_started(2, 0)                                   # t = 0
    lines.stage(None, "provisioning 1 host(s)")
    lines.stage(runs[0], "start + drive")                       # t = 10: the first run starts
    lines.run_finished(RunOutcome(runs[0], RunStatus.OK, None))  # t = 13.2
    lines.stage(runs[1], "start + drive")                       # t = 13.2
    lines.stage(runs[1], "ingest")                              # t = 20 (the run's start is kept)
    lines.run_finished(RunOutcome(runs[1], RunStatus.FAILED, "boom"))  # t = 21.5
    out = buf.getvalue().splitlines()
    assert out[0] == "2 run(s) to do"
    assert out[1] == "provisioning 1 host(s)"
    assert out[2] == f"[1/2] pool=solo #1 ok in 3.2 s · ETA {clock(13.2 + 3.2, 13.2)}"
    assert out[3] == "[2/2] pool=threads #1 failed in 8.3 s · done"
    assert out[4] == "    r1: boom"
