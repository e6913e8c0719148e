"""A racing sweep's schedule (issue 38): which planned runs run, decided round by round.

The plan holds every run a race could need (each cell ``max`` times, engine/plan/planner.py). The
sweep runs them through :class:`Race`, which lets round 1 to ``min`` through whole and, before each
later round, asks :func:`decide` (the race's rule, analysis/racing.py) which cells still race (read from the runs
the database holds, so a resumed race goes on where it stopped); only their runs of that round
run. It stops when the race is decided, at ``max``, or at the budget (``limits.max_runs``, runs
of this sweep point; ``limits.max_time``, since this invocation's first run), and says why.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from cmx.analysis import racing, stats
from cmx.analysis.recommend import RecommendError, default_constraints, default_objective
from cmx.engine.results import db


class Race:
    def __init__(
        self, exp, db_path: Path, revision: int, sweep, cells: list[str], skipped: int = 0, now=time.monotonic
    ):
        self.exp, self.db_path, self.revision, self.sweep = exp, Path(db_path), revision, sweep
        self.cells = sorted(cells)  # every cell races, also one whose runs a resume found all stored
        self.skipped, self.now = skipped, now
        self.decision: racing.Decision | None = None
        self.objective = ""
        self.ended = ""  # why the race ended: decided, max reached, a budget
        self.ran = 0

    def level(self, n: int) -> float:
        """The level of this race's look at ``n`` runs a cell (racing.level: its looks and cells)."""
        return racing.level(self.exp.racing.min, self.exp.racing.max, len(self.cells), n)

    def _decide(self, cells: list[str], n: int) -> racing.Decision:
        point = self.sweep.resumes or self.sweep.sweep_id
        try:
            with db.connect(self.db_path, read_only=True) as con:
                self.decision, self.objective = decide(con, self.exp.name, self.revision, point, cells, self.level(n))
        except RecommendError as exc:  # no objective to race on (a metric without a direction): every cell runs
            if self.decision is None:
                self.sweep.handler.stage(None, f"race: {exc}; every cell gets its {self.exp.racing.max} runs")
            self.decision, self.objective = racing.Decision(None, list(cells)), "no objective"
        return self.decision

    def _budget(self, started: float | None) -> str:
        limits = self.exp.limits
        if limits.max_runs is not None and self.skipped + self.ran >= limits.max_runs:
            return f"the budget limits.max_runs ({limits.max_runs} runs) was reached"
        if limits.max_time is not None and started is not None and self.now() - started >= limits.max_time:
            return f"the budget limits.max_time ({limits.max_time:g} s) was reached"
        return ""

    def __call__(self, runs):
        r = self.exp.racing
        rounds: dict[int, list] = {}
        for run in runs:
            rounds.setdefault(run.repeat, []).append(run)
        cells = self.cells
        started = None
        for repeat in range(1, r.max + 1):
            batch = rounds.get(repeat, [])
            if repeat > r.min:
                decision = self._decide(cells, repeat - 1)
                if decision.decided:
                    self.ended = "decided"
                    self.sweep.handler.retotal(self.ran)  # the bar ends full: no run is still to come
                    return
                batch = [run for run in batch if run.cell.cell_id in decision.contenders]
                left = len(decision.contenders) * (r.max - repeat + 1)
                self.sweep.handler.retotal(self.ran + left)
                self.sweep.handler.stage(
                    None,
                    f"race after {repeat - 1} runs a cell: {len(decision.contenders)} of "
                    f"{len(cells)} cells still race on {self.objective}; at most {left} "
                    f"runs to go",
                )
            for run in batch:
                why = self._budget(started)
                if why:
                    self.ended = why
                    self._decide(cells, max(repeat - 1, r.min))
                    self.sweep.handler.retotal(self.ran)
                    return
                if started is None:
                    started = self.now()
                self.ran += 1
                yield run
        decision = self._decide(cells, r.max)
        self.ended = "decided" if decision.decided else f"max ({r.max} runs a cell) was reached"

    def summary(self, label) -> str:
        """One line for the end of the sweep; ``label(cell_id)`` names a cell by its dimensions.
        ``cmx recommend`` and the report say the same of the same runs (racing.decide_samples)."""
        d = self.decision
        if d is None or d.best is None:
            return f"race: undecided: {self.ended or 'no run of it ended ok'}"
        cells = len(d.contenders) + len(d.out)
        runs = f"after {self.skipped + self.ran} runs, of at most {cells} cells × {self.exp.racing.max}"
        if d.decided and not d.tied:
            return (
                f"race: decided on {self.objective}: {label(d.best)} is the best; every other cell was shown "
                f"worse (or out of the objective's where) {runs}"
            )
        if d.decided:
            tied = "; ".join(label(c) for c in d.tied)
            others = "; every other cell was shown worse (or out of the objective's where)" if d.out else ""
            return (
                f"race: decided on {self.objective}: a tie: {label(d.best)} leads and {racing.cells_text(len(d.tied))} "
                f"shown within ±{stats.MARGIN_PCT:g} % of it ({tied}): pick any{others} {runs}"
            )
        return f"race: undecided on {self.objective}: {self.ended}; " + racing.open_text(d, label, self.exp.racing.max)


def decide(
    con,
    experiment: str,
    revision: int,
    point: str,
    cells: list[str],
    alpha: float,
    margin_pct: float = stats.MARGIN_PCT,
) -> tuple[racing.Decision, str]:
    """The race of ``cells`` on the experiment's objective (and its ``where``), over the ok runs of
    the sweep point ``point`` (a sweep and the sweeps that resumed it); and the objective, as words."""
    objective = default_objective(con, experiment, revision)
    constraints = default_constraints(con, experiment, revision)
    wanted = [objective.metric, *(c.metric for c in constraints)]
    rows = con.execute(
        "SELECT r.cell_id, m.name, m.value FROM runs r JOIN run_starts s USING (run_id) JOIN metrics m USING (run_id) "
        "WHERE r.experiment = ? AND s.sweep_id IN (SELECT sweep_id FROM sweeps WHERE coalesce(resumes, sweep_id) = ?) "
        f"AND r.status = 'ok' AND m.value IS NOT NULL AND m.name IN ({', '.join('?' for _ in wanted)}) "
        "ORDER BY r.cell_id, r.run_id",
        [experiment, point, *wanted],
    ).fetchall()
    values: dict[str, dict[str, list[float]]] = {c: {} for c in cells}
    for cell_id, name, value in rows:
        if cell_id in values:
            values[cell_id].setdefault(name, []).append(value)
    excluded = {}
    for cell_id, got in values.items():
        for c in constraints:
            if got.get(c.metric) and not c.holds(float(np.median(got[c.metric]))):
                excluded[cell_id] = f"out of the objective's where: {c.text}"
                break
    samples = {c: got.get(objective.metric, []) for c, got in values.items()}
    return racing.decide_samples(samples, objective.better, alpha, excluded, margin_pct), str(objective)
