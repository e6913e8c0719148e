"""Racing repeats (issue 38): which cells of a race still get runs.

A race (``repeats: {min, max, until: decided}``) gives every cell ``min`` runs; then, after each
round, :func:`decide` ranks the cells on the objective as ``cmx recommend`` does (the same
statistics module, the same verdict rule) and a cell stops getting runs once it is shown worse
than the best (``better``, ``worse`` or ``small``: any shown difference, the best's side being
better) or is out of the objective's ``where``. The race is decided when no cell but the best is
left; it ends undecided at ``max`` runs a cell or at its budget (``limits.max_runs`` /
``limits.max_time``: cli/race.py).

The error rate over repeated looks: a race looks at its cells up to ``max - min + 1`` times, each
a chance of a false elimination, so each look tests at a smaller level, the same at every look
(Pocock's boundary), calibrated for the Mann-Whitney test over exactly these looks
(:func:`stats.race_alpha`): the chance that any look shows a difference between two identical
cells is ALPHA. This is the racing of F-race and irace with a group-sequential boundary instead of
their Friedman tests; tests/unit/test_racing.py measures it by
simulation (a false winner among identical cells, and the runs a real difference takes).

:func:`decide_samples` is the pure rule on samples; :func:`decide` reads them from the database
(the ok runs of the sweep and of the sweep it resumes, so a resumed race goes on where it was).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from cmx.analysis import stats


def looks(min_repeats: int, max_repeats: int) -> int:
    """How many times a race from ``min`` to ``max`` runs a cell looks at its cells."""
    return max(1, max_repeats - min_repeats + 1)


@dataclass
class Decision:
    best: str | None  # the cell ranked first (None: no cell has the objective measured)
    contenders: list[str]  # the cells still racing, the best first
    out: dict[str, str] = field(default_factory=dict)  # cell → why it stopped getting runs

    @property
    def decided(self) -> bool:
        return self.best is not None and self.contenders == [self.best]


def decide_samples(
    samples: dict[str, list[float]],
    better: str,
    alpha: float,
    excluded: dict[str, str] | None = None,
    margin_pct: float = stats.MARGIN_PCT,
    resamples: int = stats.RESAMPLES,
) -> Decision:
    """The race's rule on each cell's objective values (``better``: 'higher' or 'lower'); ``excluded``:
    cells out of the objective's constraints, with why."""
    out = dict(excluded or {})
    racing = {c: v for c, v in samples.items() if c not in out and len(v)}
    for c in samples:
        if c not in out and c not in racing:
            out[c] = "no value of the objective measured"
    if not racing:
        return Decision(None, [], out)
    medians = {c: float(np.median(v)) for c, v in racing.items()}  # the ranking needs no interval
    sign = -1 if better == "higher" else 1
    order = sorted(racing, key=lambda c: (sign * medians[c], c))
    best, others = order[0], order[1:]
    versus = stats.compare_many(
        racing[best], [racing[c] for c in others], better, resamples=resamples, margin_pct=margin_pct, alpha=alpha
    )
    contenders = [best]
    for cell, cmp in zip(others, versus):
        if cmp.verdict in stats.SHOWN:
            out[cell] = (
                f"shown {cmp.verdict if cmp.verdict != stats.SMALL else 'worse (by a small margin)'} "
                f"than {best} (p {cmp.p_value:.2g} ≤ {alpha:.2g})"
            )
        else:
            contenders.append(cell)
    return Decision(best, contenders, out)


def decide(
    con,
    experiment: str,
    revision: int,
    point: str,
    cells: list[str],
    alpha: float,
    margin_pct: float = stats.MARGIN_PCT,
) -> tuple[Decision, str]:
    """The race of ``cells`` on the experiment's objective (and its ``where``), over the ok runs of
    the sweep point ``point`` (a sweep and the sweeps that resumed it); and the objective, as words."""
    from cmx.analysis.recommend import default_constraints, default_objective

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
    return decide_samples(samples, objective.better, alpha, excluded, margin_pct), str(objective)
