"""Racing repeats (issues 38, 50): which cells of a race still get runs, and which cells ``cmx
recommend`` and the report call tied with the best (the same rule on the same runs).

A race (``repeats: {min, max, until: decided}``) gives every cell ``min`` runs; then, after each
round, the rule looks at the cells still racing (:func:`decide_look`): the best is the one with the
best median; every other is compared with it by a one-sided t-test on the logarithms of the values
(runs spread in proportion to their level, and the margin is a ratio), the variance pooled over
every cell of the race (:func:`racetest.race_look`), Hochberg-adjusted over the cells compared. A cell
stops getting runs when that adjusted p is at most the look's level and its estimated difference
is beyond the margin (``MARGIN_PCT``, 5 %): a difference inside the margin does not stop a cell. A
cell is shown the same as the best when both one-sided tests that the difference lies within
±margin (TOST) reach the level divided by the cells compared. The race is decided when every cell
left but the best is shown the same (a tie the user can pick from, when there is one); it ends
undecided at ``max`` runs a cell or at its budget (``limits.max_runs`` / ``limits.max_time``:
cli/race.py).

The level (:func:`racetest.race_alpha`) is calibrated by simulating this rule over the race's looks
and its number of cells, so that among identical cells a whole race stops some cell in at most
5 % of races: the best is chosen after seeing the data and each look is another chance, so a
pairwise level would be wrong (45 % of races among 10 identical cells at the old level). The
pooled variance gives the test power at 3 runs a cell, so the first look already stops a cell far
worse.
tests/unit/test_racing.py measures the error and the power by simulation, through
:func:`decide_look` (vectorised over races) and :func:`decide_samples` (one race, the same rule).

:func:`decide_samples` is the pure rule on samples; cli/race.py reads them from the database (the
ok runs of the sweep and of the sweep it resumes, so a resumed race goes on where it was), and
``cmx recommend`` (analysis/recommend.py) applies the same rule to the runs it ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from cmx.analysis import racetest, stats

#: What a race says of a cell against the best.
WORSE, SAME, OPEN, FEW, BEST = stats.WORSE, stats.SAME, stats.INCONCLUSIVE, stats.N_TOO_SMALL, "best"
#: Runs a cell past which the runs it would take are not worth saying.
RUNS_CAP = stats.RUNS_NEEDED_CAP


def looks(min_repeats: int, max_repeats: int) -> int:
    """How many times a race from ``min`` to ``max`` runs a cell looks at its cells."""
    return max(1, max_repeats - max(min_repeats, stats.MIN_N) + 1)


def level(min_repeats: int, max_repeats: int, cells: int, n: int | None = None) -> float:
    """The level this race's look at ``n`` runs a cell tests at (its last look when None):
    :func:`racetest.race_alpha` of its looks and cells, shaped by :func:`racetest.race_look_level`."""
    top = max(max_repeats, stats.MIN_N)
    alpha = racetest.race_alpha(max(min_repeats, stats.MIN_N), top, max(2, cells))
    return racetest.race_look_level(alpha, top if n is None else n, top)


@dataclass(frozen=True)
class Versus:
    """One cell against the best at the last look."""

    verdict: str  # WORSE (stopped), SAME (shown within the margin), OPEN, FEW, or BEST
    change_pct: float | None = None  # 100 × (cell / best − 1), of the geometric means
    p: float | None = None  # Hochberg-adjusted one-sided p that the best is better
    runs_needed: int | None = None  # OPEN: runs a cell at which this difference would decide it


@dataclass
class Decision:
    best: str | None  # the cell ranked first (None: no cell has the objective measured)
    contenders: list[str]  # the cells still racing, the best first
    out: dict[str, str] = field(default_factory=dict)  # cell → why it stopped getting runs
    same: list[str] = field(default_factory=list)  # contenders shown within the margin of the best
    versus: dict[str, Versus] = field(default_factory=dict)  # every cell with values

    @property
    def decided(self) -> bool:
        return self.best is not None and all(c in self.same for c in self.contenders[1:])

    @property
    def tied(self) -> list[str]:
        """The contenders other than the best: not told apart from it, or shown the same."""
        return [c for c in self.contenders if c != self.best]

    def runs_to_decide(self) -> int | None:
        """Runs a cell at which the differences seen would decide the race (None: some would take
        more than RUNS_CAP, or none is open)."""
        open_ = [self.versus[c].runs_needed for c in self.tied if c not in self.same]
        if not open_ or any(n is None for n in open_):
            return None
        return max(open_)


def _runs_needed(t: float, n: int, df: float, level_: float) -> int | None:
    """Runs a cell at which a t statistic seen at ``n`` runs a cell (growing as √n, with
    its degrees of freedom) would reach ``level_``; None beyond RUNS_CAP or for ``t`` ≤ 0."""
    if not (math.isfinite(t) and t > 0 and n >= 2 and math.isfinite(df)):
        return None
    m = np.arange(n + 1, RUNS_CAP + 1)
    reached = np.nonzero(t * np.sqrt(m / n) >= stats._sps().t.isf(level_, df * (m - 1) / (n - 1)))[0]
    return int(m[reached[0]]) if len(reached) else None


def decide_look(
    values: np.ndarray, racing: np.ndarray, better: str, alpha: float, margin_pct: float = stats.MARGIN_PCT
) -> tuple[racetest.RaceLook, np.ndarray, np.ndarray, np.ndarray]:
    """The rule at one look of many races at once: ``values`` [races, cells, runs] (NaN: no run),
    ``racing`` [races, cells] the cells still in each race, ``alpha`` this look's :func:`level`.
    Returns (the look, Hochberg-adjusted p, stopped [races, cells], same [races, cells])."""
    look = racetest.race_look(values, racing, better, margin_pct)
    adjusted = racetest.hochberg(look.p)
    beyond = look.change < -margin_pct if better == "higher" else look.change > margin_pct
    stopped = (adjusted <= alpha) & beyond
    tested = np.sum(~np.isnan(look.p), axis=-1, keepdims=True)
    same = (look.same_p <= alpha / np.maximum(tested, 1)) & ~stopped
    return look, adjusted, stopped, same


def decide_samples(
    samples: dict[str, list[float]],
    better: str,
    alpha: float,
    excluded: dict[str, str] | None = None,
    margin_pct: float = stats.MARGIN_PCT,
    resamples: int | None = None,  # noqa: ARG001 (the rule resamples nothing; kept for callers)
) -> Decision:
    """The race's rule on each cell's objective values, in round order (``better``: 'higher' or
    'lower'; ``alpha``: this look's :func:`level`); ``excluded``: cells already out (of the
    objective's constraints, or stopped at an earlier look), with why: their runs still count
    towards the spread, not as contenders."""
    out = dict(excluded or {})
    values = {c: stats._clean(v) for c, v in samples.items()}
    measured = [c for c in values if len(values[c])]
    for c in values:
        if c not in out and not len(values[c]):
            out[c] = "no value of the objective measured"
    racing = [c for c in measured if c not in out]
    if not racing:
        return Decision(None, [], out)
    x = np.full((1, len(measured), max(len(values[c]) for c in measured)), np.nan)
    for i, c in enumerate(measured):
        x[0, i, : len(values[c])] = values[c]
    mask = np.array([[c not in out for c in measured]])
    look, adjusted, stopped, same = decide_look(x, mask, better, alpha, margin_pct)
    best = measured[int(look.best[0])]
    tested = max(1, int(np.sum(~np.isnan(look.p[0]))))
    sign = -1 if better == "higher" else 1
    medians = {c: float(np.median(values[c])) for c in racing}
    contenders, same_cells, versus = [best], [], {best: Versus(BEST)}
    for i in sorted(range(len(measured)), key=lambda i: (sign * medians.get(measured[i], 0.0), measured[i])):
        cell = measured[i]
        if cell == best or cell not in medians:
            continue
        p = None if math.isnan(adjusted[0, i]) else float(adjusted[0, i])
        change = None if math.isnan(look.change[0, i]) else float(look.change[0, i])
        if p is None:
            versus[cell] = Versus(FEW, change)
            contenders.append(cell)
        elif stopped[0, i]:
            versus[cell] = Versus(WORSE, change, p)
            out[cell] = f"shown worse than {best}: {change:+.1f} % (Hochberg-adjusted p {p:.2g} ≤ {alpha:.2g})"
        elif same[0, i]:
            versus[cell] = Versus(SAME, change, p)
            contenders.append(cell)
            same_cells.append(cell)
        else:
            n = int(min(look.n[0, i], look.n[0, look.best[0]]))
            within = abs(change) <= margin_pct
            t = float(look.same_t[0, i]) if within else float(look.t[0, i])
            need = _runs_needed(t, n, float(look.df[0, i]), alpha / tested)
            versus[cell] = Versus(OPEN, change, p, need)
            contenders.append(cell)
    return Decision(best, contenders, out, same_cells, versus)


def cells_text(count: int, verb: str = "is") -> str:
    """``1 cell is``, ``2 cells are`` (``verb`` 'is' or 'was')."""
    plural = {"is": "are", "was": "were"}[verb]
    return f"{count} cell{'' if count == 1 else 's'} {verb if count == 1 else plural}"


def open_text(d: Decision, label, max_repeats: int | None = None, lead: bool = True) -> str:
    """The cells a race (or ``cmx recommend``) has not told apart from the best, in words, and what
    would tell them apart: ``raise max to N`` for a race whose max is below what the differences
    seen would take (``max_repeats``), else the runs a cell it would take. ``lead``: start with
    the best (``… leads``)."""
    open_ = [c for c in d.tied if c not in d.same]
    parts = [f"{label(d.best)} leads"] if lead else []
    if d.same:
        within = f"shown within ±{stats.MARGIN_PCT:g} % of it"
        parts.append(f"{cells_text(len(d.same))} {within}: " + "; ".join(map(label, d.same)))
    if open_:
        parts.append(f"{cells_text(len(open_))} not told apart from it: " + "; ".join(map(label, open_)))
    words = "; ".join(parts)
    need = d.runs_to_decide()
    if not open_:
        return words
    if need is None:
        return words + (
            f"; the differences seen would take more than {RUNS_CAP} runs a cell to decide: "
            "they may be too small to matter"
        )
    if max_repeats is not None and need > max_repeats:
        return words + f"; the differences seen would take {need} runs a cell to decide: raise max to {need}"
    return words + f"; the differences seen would take {need} runs a cell to decide"
