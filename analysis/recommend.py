"""``cmx recommend``: which cell to run. Cells ranked on an objective by median (with n and the 95 %
interval), the cells that cannot be told apart from the best marked tied with it (the one rule of
:mod:`cmx.analysis.stats`, as ``cmx compare`` decides), constraints that drop cells and say which
dropped each, and the Pareto front when there are several objectives. Data access and ranking
here; formatting in :mod:`cmx.analysis.recommend_format`.
"""

from __future__ import annotations

import json
import operator
import re
from dataclasses import dataclass, field

from cmx.analysis import headline, racing, stats, units
from cmx.engine.errors import suggest
from cmx.engine.model.thresholds import OPERATORS
from cmx.engine.results import metricdefs
from cmx.engine.results.db import tagged_runs_sql
from cmx.workloads.vocab import metrics as M

MAXIMIZE, MINIMIZE = "maximize", "minimize"
#: A threshold's comparisons (engine/model/thresholds.py), and != for a constraint.
OPS = {**OPERATORS, "!=": operator.ne}
_CONSTRAINT = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*(<=|>=|==|!=|<|>)\s*(.+?)\s*$")


class RecommendError(ValueError):
    """Bad input: an unknown metric, a direction against the metric's, a constraint nothing meets (exit 2)."""


@dataclass(frozen=True)
class Objective:
    metric: str
    direction: str  # maximize | minimize

    @property
    def better(self) -> str:
        return "higher" if self.direction == MAXIMIZE else "lower"

    def __str__(self) -> str:
        return f"{self.direction} {self.metric}"


@dataclass(frozen=True)
class Constraint:
    metric: str
    op: str
    value: float
    text: str  # as the user wrote it

    def holds(self, median: float | None) -> bool:
        return median is not None and OPS[self.op](median, self.value)


@dataclass
class Ranked:
    cell_id: str
    values: dict  # dimension → value
    metrics: dict[str, stats.Summary]
    rank: int | None = None
    tied_with_best: bool = False
    excluded_by: list[str] = field(default_factory=list)
    versus_best: racing.Versus | None = None  # the race's rule against the best (analysis/racing.py)


@dataclass
class Recommendation:
    experiment: str
    revision: int
    objectives: list[Objective]
    constraints: list[Constraint]
    ranking: list[Ranked]
    pareto: list[str]
    history: str = ""  # which sweeps of a nightly history the ranking pooled, in words
    decision: racing.Decision | None = None  # the race's rule on these runs (tied = its contenders)
    repeats: int | None = None  # a race's max: the advice says "raise max to N"

    @property
    def best(self) -> Ranked | None:
        return next((r for r in self.ranking if r.rank == 1), None)

    def tied(self) -> list[Ranked]:
        return [r for r in self.ranking if r.tied_with_best and r.rank != 1]


def objective(metric: str, direction: str) -> Objective:
    """An objective checked against the registry: maximising a lower-is-better metric is refused."""
    better = metricdefs.get(metric).better.value
    wanted = "higher" if direction == MAXIMIZE else "lower"
    if better in ("higher", "lower") and better != wanted:
        other = MINIMIZE if direction == MAXIMIZE else MAXIMIZE
        raise RecommendError(f"--{direction} {metric}: {better} is better for {metric}; did you mean --{other}?")
    return Objective(metric, direction)


def parse_constraint(text: str) -> Constraint:
    """``'peak_pss_bytes <= 512MiB'``, ``'tasks_lost == 0'``: units as the summary prints them."""
    m = _CONSTRAINT.match(text)
    if not m:
        raise RecommendError(
            f"--where {text!r}: expected 'METRIC OP VALUE' with OP one of {', '.join(OPS)} "
            "(e.g. 'peak_pss_bytes <= 512MiB')"
        )
    metric, op, raw = m.groups()
    try:
        value = units.parse(metric, raw)
    except ValueError as exc:
        hint = "" if metric in metricdefs.METRICS else suggest(metric, metricdefs.METRICS)
        raise RecommendError(f"--where {text!r}: {exc}{hint}") from None
    return Constraint(metric, op, value, " ".join(text.split()))


def _values(
    con, experiment: str, revision: int, tags: dict[str, str], only: str | None = None, points: list[str] | None = None
) -> dict[str, dict[str, list[float]]]:
    """{cell: {metric: values of its ok runs}}; ``points``: only the runs of these sweeps (a sweep and
    those that resumed it are one point of a history)."""
    cond, params = tagged_runs_sql(con, tags)
    if points is not None:
        cond = (
            f"({cond}) AND run_id IN (SELECT s.run_id FROM run_starts s JOIN sweeps w USING (sweep_id) "
            f"WHERE coalesce(w.resumes, w.sweep_id) IN (SELECT unnest(?::VARCHAR[])))"
        )
        params = [*params, points]
    picked, picked_params = "TRUE", []
    if only:  # the cells ``cmx trend --only`` would select
        from cmx.analysis.compare import SelectionError, parse_only, selection_where

        try:
            where, picked_params = selection_where(con, parse_only(experiment, only))
        except SelectionError as exc:
            raise RecommendError(str(exc)) from None
        picked = f"r.run_id IN (SELECT r.run_id FROM runs r WHERE {where})"
    rows = con.execute(
        "SELECT r.cell_id, m.name, m.value FROM runs r JOIN metrics m USING (run_id) "
        f"WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' AND m.value IS NOT NULL "
        f"AND {cond.replace('run_id IN', 'r.run_id IN', 1)} AND {picked} "
        "ORDER BY r.cell_id, r.run_id",
        [experiment, revision, *params, *picked_params],
    ).fetchall()
    got: dict[str, dict[str, list[float]]] = {}
    for cell_id, name, value in rows:
        got.setdefault(cell_id, {}).setdefault(name, []).append(value)
    return got


def _cell_values(con, experiment: str, revision: int) -> dict[str, dict]:
    """Each cell's dimension values as the plan gave them (``run_starts.dims``)."""
    out = {}
    for cell_id, dims in con.execute(
        "SELECT s.cell_id, any_value(s.dims) FROM run_starts s JOIN runs r USING (run_id) "
        "WHERE r.experiment = ? AND r.revision = ? GROUP BY s.cell_id",
        [experiment, revision],
    ).fetchall():
        out[cell_id] = json.loads(dims) if isinstance(dims, str) else dict(dims or {})
    return out


def _dominates(a: dict[str, float], b: dict[str, float], objectives: list[Objective]) -> bool:
    """a is at least as good as b on every objective's median and better on one."""
    strictly = False
    for o in objectives:
        x, y = a[o.metric], b[o.metric]
        if o.direction == MINIMIZE:
            x, y = -x, -y
        if x < y:
            return False
        strictly |= x > y
    return strictly


def pareto(medians: dict[str, dict[str, float]], objectives: list[Objective]) -> list[str]:
    """The keys of ``medians`` (cell → metric → median) that no other one dominates, in their order."""
    return [
        k for k, m in medians.items() if not any(_dominates(o, m, objectives) for j, o in medians.items() if j != k)
    ]


def recommend(
    con,
    experiment: str,
    revision: int,
    objectives: list[Objective],
    constraints: list[Constraint],
    tags: dict[str, str] | None = None,
    margin_pct: float = stats.MARGIN_PCT,
    only: str | None = None,
) -> Recommendation:
    """Rank the experiment's cells (of ``revision``; ``only``: those a ``DIM=VALUE,…`` selector picks)
    on ``objectives[0]``; see the module docstring."""
    if not objectives:
        raise RecommendError("name an objective: --maximize METRIC or --minimize METRIC")
    points, history = (None, "") if tags else since_last_change(con, experiment, revision, objectives[0].metric, only)
    data = _values(con, experiment, revision, tags or {}, only, points)
    if not data:
        raise RecommendError(
            f"experiment {experiment!r} (revision {revision}) has no ok runs"
            + (" with these tags" if tags else "")
            + (f" in the cells --only {only} selects" if only else "")
        )
    present = {name for metrics in data.values() for name in metrics}
    for name in [o.metric for o in objectives] + [c.metric for c in constraints]:
        if name not in present:
            raise RecommendError(
                f"{name}: no run of {experiment!r} has this metric "
                f"(it has: {', '.join(m for m in metricdefs.METRICS if m in present)})" + suggest(name, present)
            )
    dims = _cell_values(con, experiment, revision)
    wanted = list(dict.fromkeys([o.metric for o in objectives] + [c.metric for c in constraints]))
    summaries = iter(stats.summarize_many([metrics.get(m, []) for metrics in data.values() for m in wanted]))
    cells = [Ranked(cell_id, dims.get(cell_id, {}), {m: next(summaries) for m in wanted}) for cell_id in data]
    for cell in cells:
        cell.excluded_by = [c.text for c in constraints if not c.holds(cell.metrics[c.metric].median)]
        if objectives and any(cell.metrics[o.metric].median is None for o in objectives):
            cell.excluded_by.append(f"no {', '.join(o.metric for o in objectives)} measured")
    kept = [c for c in cells if not c.excluded_by]
    if not kept:
        counts = {c.text: sum(c.text in cell.excluded_by for cell in cells) for c in constraints}
        worst = max(counts, key=counts.get) if counts else "the objectives"
        raise RecommendError(
            f"no cell of {experiment!r} meets every constraint ({worst} excludes "
            f"{counts.get(worst, len(cells))} of {len(cells)})"
        )
    first = objectives[0]
    samples = {cell_id: metrics.get(first.metric, []) for cell_id, metrics in data.items()}
    out = {c.cell_id: "; ".join(c.excluded_by) for c in cells if c.excluded_by}
    looks = _looks(con, experiment, revision, samples)
    # a race counts every cell it raced, also one whose runs all failed (cli/race.py)
    raced = len(samples) if only else len(set(samples) | set(dims))
    level = racing.level(looks[0], looks[1], raced, looks[2])
    decision = racing.decide_samples(samples, first.better, level, out, margin_pct)
    sign = -1 if first.direction == MAXIMIZE else 1
    kept.sort(key=lambda c: (c.cell_id != decision.best, sign * c.metrics[first.metric].median, c.cell_id))
    kept[0].rank, kept[0].tied_with_best = 1, True
    for rank, cell in enumerate(kept[1:], 2):
        cell.rank, cell.versus_best = rank, decision.versus.get(cell.cell_id)
        cell.tied_with_best = cell.cell_id in decision.contenders
    front = pareto({c.cell_id: {o.metric: c.metrics[o.metric].median for o in objectives} for c in kept}, objectives)
    excluded = sorted((c for c in cells if c.excluded_by), key=lambda c: c.cell_id)
    race = looks[1] if looks[0] != looks[1] else None
    return Recommendation(
        experiment, revision, list(objectives), list(constraints), kept + excluded, front, history, decision, race
    )


def since_last_change(con, experiment: str, revision: int, metric: str, only: str | None = None):
    """(the sweeps to rank on, which of them in words): over a history of sweeps (nights) of
    ``revision``, the sweeps since the history's last change of ``metric`` in any cell (``cmx
    trend``'s change points, analysis/trend.py), so that a regression two nights ago is not pooled
    with the nights before it; all of them, said, when the history shows no change. (None, "") for
    a single sweep."""
    from cmx.analysis import trend
    from cmx.analysis.compare import SelectionError

    order = [
        sweep_id
        for (sweep_id,) in con.execute(
            "SELECT sweep_id FROM sweeps WHERE experiment = ? AND coalesce(revision, 1) = ? AND resumes IS NULL "
            "ORDER BY started_at, sweep_id",
            [experiment, revision],
        ).fetchall()
    ]
    if trend.history_points(con, experiment, revision) < 2 or len(order) < 2:
        return None, ""
    try:
        result = trend.trend(con, experiment, revision=revision, metrics=(metric,), only=only)
    except SelectionError:
        return None, ""
    at = {sweep_id: i for i, sweep_id in enumerate(order)}
    changes = [c.at for series in result.series if series.metric == metric for c in series.changes if c.at in at]
    if not changes:
        return order, (
            f"Ranked on the runs of all {len(order)} sweeps of this history: "
            f"cmx trend finds no change of {metric} in it."
        )
    last = max(changes, key=at.get)
    kept = order[at[last] :]
    before = at[last]
    return kept, (
        f"Ranked on the runs of the last {_sweeps(len(kept))} of {len(order)} in this history, since its last change "
        f"of {metric} (sweep {last}, cmx trend); the {_sweeps(before)} before it {'is' if before == 1 else 'are'} "
        "left out."
    )


def _sweeps(count: int) -> str:
    return f"{count} sweep{'' if count == 1 else 's'}"


def _looks(con, experiment: str, revision: int, samples: dict[str, list[float]]) -> tuple[int, int, int]:
    """(min, max, n): the looks the race's rule judges these runs at. A race (``repeats: {min, max}``
    in the latest sweep of ``revision``) looked from min to max, and its last look was at the runs a
    cell the best has now; a sweep of fixed repeats looks once, at the most runs a cell has."""
    row = con.execute(
        "SELECT json_extract(definition, '$.repeats') FROM sweeps WHERE experiment = ? "
        "AND coalesce(revision, 1) = ? ORDER BY started_at DESC LIMIT 1",
        [experiment, revision],
    ).fetchone()
    repeats = json.loads(row[0]) if row and row[0] is not None else None
    most = max([len(v) for v in samples.values()] + [stats.MIN_N])
    if isinstance(repeats, dict) and "min" in repeats and "max" in repeats:
        low, high = int(repeats["min"]), int(repeats["max"])
        return low, high, min(high, most)
    return most, most, most


def _declared(con, experiment: str, revision: int) -> tuple[object, str | None]:
    """(the experiment's ``objective:`` as its latest sweep of ``revision`` stored it, its workload)."""
    row = con.execute(
        "SELECT json_extract(definition, '$.objective'), workload FROM sweeps WHERE experiment = ? "
        "AND coalesce(revision, 1) = ? ORDER BY started_at DESC LIMIT 1",
        [experiment, revision],
    ).fetchone()
    return (json.loads(row[0]) if row and row[0] is not None else None), (row[1] if row else None)


def default_constraints(con, experiment: str, revision: int) -> list[Constraint]:
    """The constraints of the experiment's ``objective: {…, where: {METRIC: "OP VALUE"}}``."""
    declared, _ = _declared(con, experiment, revision)
    where = declared.get("where") if isinstance(declared, dict) else None
    return [parse_constraint(f"{metric} {rule}") for metric, rule in (where or {}).items()]


def default_objective(con, experiment: str, revision: int) -> Objective:
    """The experiment's ``objective:`` (its latest sweep of ``revision``), else its workload's own."""
    declared, _ = _declared(con, experiment, revision)
    if isinstance(declared, dict):
        directions = [(k, v) for k, v in declared.items() if k in (MAXIMIZE, MINIMIZE)]
        if len(directions) == 1:
            ((direction, metric),) = directions
            return objective(metric, direction)
    if isinstance(declared, str):
        metric = declared
    else:  # the objective its runs stored for their workload (none stored, as a user class before 0.3: consume rate)
        metric = headline.objective_of_runs(con, experiment, revision) or M.CONSUME_RATE
    better = metricdefs.get(metric).better.value
    if better not in ("higher", "lower"):
        raise RecommendError(
            f"objective {metric}: no better direction is known for it; "
            "write objective: {maximize: METRIC} or {minimize: METRIC}"
        )
    return Objective(metric, MAXIMIZE if better == "higher" else MINIMIZE)
