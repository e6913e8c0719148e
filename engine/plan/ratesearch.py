"""Rate-vs-latency sweeps: a cell's maximum sustainable rate, then runs at fractions of it.

An experiment asks for it with the ``params.rate_fraction`` dimension of the ``throughput``
workload in stream mode (``[0.1, 0.5, 0.8, 0.95]``). Before the first run of a cell at a
fraction, the sweep runs the cell once with ``mode: ramp`` (its *search run*, a cell of its own:
the same values without the fraction, ``params.mode: ramp``; see workloads/drive/ramp.py) unless an ok
search run of it is already stored. After that run is ingested, :func:`judge` splits its tasks
into the ramp's steps by their intended send time and stores ``max_sustainable_rate``: the rate
of the highest step such that it and every step before it was *sustained*:

- every task the step sent finished (none lost);
- its p99 latency (from intended send) stayed within ``P99_RUNAWAY`` × the first step's p99, or
  ``P99_SLACK_S`` above it, whichever is larger (p99 did not run away);
- the median latency of the step's last quarter of tasks exceeds its first quarter's by less
  than ``GROWTH_SHARE`` of a step (the queue was not growing through the step).

Each fraction run then publishes at fraction × that rate (stored as ``target_rate``). The search
is one bounded run: ``ramp_steps × ramp_step_s`` seconds at most, plus the drain of its last step.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from cmx.engine.model.cells import Cell, cell_id
from cmx.engine.model.dimensions import normalise_values
from cmx.workloads.vocab import metrics as M

FRACTION = "params.rate_fraction"
P99_RUNAWAY = 4.0
P99_SLACK_S = 0.1
GROWTH_SHARE = 0.25


@dataclass(frozen=True)
class Step:
    index: int
    rate: float  # the step's target rate, tasks/s
    sent: int
    finished: int
    p99_s: float | None
    growth_s: float | None  # median latency of the last quarter minus the first quarter's
    sustained: bool


def search_cell(workload: str, cell: Cell) -> Cell:
    """The cell whose one ramp run finds ``cell``'s maximum sustainable rate."""
    values = {k: v for k, v in cell.values.items() if k != FRACTION}
    values["params.mode"] = "ramp"
    normal = normalise_values(workload, values)
    return Cell(cell_id(workload, normal), MappingProxyType(normal))


def stored_max(con, experiment: str, search_cell_id: str) -> float | None:
    """The latest ok search run's ``max_sustainable_rate`` for that cell, if any."""
    row = con.execute(
        """
        SELECT m.value FROM runs r JOIN metrics m USING (run_id)
        WHERE r.experiment = ? AND r.cell_id = ? AND r.status = 'ok' AND m.name = 'max_sustainable_rate'
        ORDER BY r.started_at DESC LIMIT 1""",
        [experiment, search_cell_id],
    ).fetchone()
    return row[0] if row else None


def _facts(con, run_id: str) -> dict[str, float]:
    return dict(
        con.execute(
            "SELECT name, value FROM metrics WHERE run_id = ? AND name IN "
            "('ramp_steps_run', 'ramp_start_rate', 'ramp_factor', 'ramp_step_s')",
            [run_id],
        ).fetchall()
    )


def steps(con, run_id: str) -> list[Step]:
    """The ramp's steps, each judged (see the module's docstring). Stamps come from ``task_times``
    (engine/results/sql/task_times.sql): a worker's clock ahead of the driver's must not read as latency."""
    f = _facts(con, run_id)
    if len(f) < 4:
        return []
    n_steps, start, factor, step_s = int(f[M.RAMP_STEPS_RUN]), f[M.RAMP_START_RATE], f[M.RAMP_FACTOR], f[M.RAMP_STEP_S]
    rows = con.execute(
        """
        WITH t AS (
            SELECT intended_at, state, finished_at - intended_at AS latency_s,
                CAST(floor((intended_at - min(intended_at) OVER ()) / ?) AS INTEGER) AS step
            FROM task_times WHERE run_id = ? AND intended_at IS NOT NULL
        ), r AS (
            SELECT *, percent_rank() OVER (PARTITION BY step ORDER BY intended_at) AS pos FROM t
        )
        SELECT step, count(*) AS sent,
            count(*) FILTER (WHERE state NOT IN ('LOST', 'UNSEEN') AND latency_s IS NOT NULL) AS finished,
            quantile_cont(latency_s, 0.99) AS p99,
            median(latency_s) FILTER (WHERE pos >= 0.75) - median(latency_s) FILTER (WHERE pos <= 0.25) AS growth
        FROM r GROUP BY step ORDER BY step""",
        [step_s, run_id],
    ).fetchall()
    by_step = {r[0]: r for r in rows}
    first_p99 = by_step.get(0, (0, 0, 0, None, None))[3]
    out = []
    for k in range(n_steps):
        _, sent, finished, p99, growth = by_step.get(k, (k, 0, 0, None, None))
        ok = bool(sent) and finished == sent and p99 is not None and first_p99 is not None
        ok = ok and p99 <= max(P99_RUNAWAY * first_p99, first_p99 + P99_SLACK_S)
        ok = ok and (growth is None or growth < GROWTH_SHARE * step_s)
        out.append(Step(k, start * factor**k, sent, finished, p99, growth, ok))
    return out


def judge(con, run_id: str) -> tuple[float | None, str]:
    """(max_sustainable_rate or None, a sentence saying how it was found)."""
    found = steps(con, run_id)
    if not found:
        return None, "the ramp run recorded no steps"
    best = None
    for s in found:
        if not s.sustained:
            break
        best = s
    if best is None:
        s = found[0]
        return None, (
            f"not even the first step ({s.rate:,.0f}/s) was sustained (p99 {s.p99_s}, {s.finished} of "
            f"{s.sent} finished): lower params.rate"
        )
    if best is found[-1]:
        return best.rate, (
            f"every step was sustained, up to {best.rate:,.0f}/s: the cell may sustain more "
            "(raise ramp_steps or ramp_factor)"
        )
    nxt = found[best.index + 1]
    return best.rate, (
        f"{best.rate:,.0f}/s sustained; {nxt.rate:,.0f}/s was not (p99 {nxt.p99_s or 0:.3f} s, "
        f"{nxt.finished} of {nxt.sent} finished)"
    )


def after_ingest(con, run_id: str, params: dict) -> str | None:
    """Store what a search run found (``max_sustainable_rate``) and a fraction run's ``target_rate``;
    an error sentence when a search run found no sustainable rate (the run then fails)."""
    insert = "INSERT INTO metrics (run_id, name, value, unit) VALUES (?, ?, ?, 'tasks/s')"
    if params.get("mode") == "ramp":
        best, how = judge(con, run_id)
        if best is None:
            return f"rate search: {how}"
        con.execute(insert, [run_id, M.MAX_SUSTAINABLE_RATE, best])
    if params.get("rate_fraction") is not None and params.get("rate") is not None:
        con.execute(insert, [run_id, M.TARGET_RATE, float(params["rate"])])
    return None
