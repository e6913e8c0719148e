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

from cmx.analysis import headline, stats, units
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
    versus_best: stats.Comparison | None = None


@dataclass
class Recommendation:
    experiment: str
    revision: int
    objectives: list[Objective]
    constraints: list[Constraint]
    ranking: list[Ranked]
    pareto: list[str]

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
    con, experiment: str, revision: int, tags: dict[str, str], only: str | None = None
) -> dict[str, dict[str, list[float]]]:
    cond, params = tagged_runs_sql(con, tags)
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
    data = _values(con, experiment, revision, tags or {}, only)
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
    sign = -1 if first.direction == MAXIMIZE else 1
    kept.sort(
        key=lambda c: (
            sign * c.metrics[first.metric].median,
            c.metrics[first.metric].high - c.metrics[first.metric].low,
            c.cell_id,
        )
    )
    best = kept[0]
    best.rank, best.tied_with_best = 1, True
    versus = stats.compare_many(
        data[best.cell_id][first.metric],
        [data[c.cell_id][first.metric] for c in kept[1:]],
        first.better,
        margin_pct=margin_pct,
    )  # one batch: compare_samples of each
    for rank, (cell, cmp) in enumerate(zip(kept[1:], versus), 2):
        cell.rank, cell.versus_best = rank, cmp
        cell.tied_with_best = cmp.verdict not in stats.SHOWN
    front = pareto({c.cell_id: {o.metric: c.metrics[o.metric].median for o in objectives} for c in kept}, objectives)
    excluded = sorted((c for c in cells if c.excluded_by), key=lambda c: c.cell_id)
    return Recommendation(experiment, revision, list(objectives), list(constraints), kept + excluded, front)


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
