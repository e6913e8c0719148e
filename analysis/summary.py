"""The end-of-sweep summary: one row per cell, the dimensions that vary, and headline metrics
(median over the cell's ok runs, with n and its 95 % bootstrap interval). Statistics here and in
:mod:`cmx.analysis.stats`; drawing in :func:`render`."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from rich.table import Table
from rich.text import Text

from cmx.analysis import stats
from cmx.analysis.units import fmt, span
from cmx.engine.results import metricdefs
from cmx.engine.results.dbconnect import sql
from cmx.engine.model.cells import Cell, value_text
from cmx.workloads.vocab import metrics as M


#: Facts a cell shows when its work is split over hosts (metric, the dimension that splits it).
SPLIT_FACTS = ((M.HOST_SHARE_MIN, "machines"), (M.PUBLISH_RATE_MIN_DRIVER, "drivers"))
#: A cell whose workers sat idle while its tasks waited in the broker for this share of a run or
#: more (the median over its ok runs of ``worker_starved_share``, which counts only idle stretches
#: of 0.5 s or more) is named under the summary: the workers' fetching, not their pool's work, held
#: its tasks back. Starved green workers score 0.8-1.0, every other cell measured 0 (2026-12-07);
#: a fifth leaves room for tasks longer than the 2 s stall (a 3 s task idles up to 2 s after it).
STARVED_SHARE = 0.2


@dataclass
class CellSummary:
    cell: Cell
    runs: int = 0
    ok: int = 0
    lost: float = 0.0
    unseen: float = 0.0  # tasks not seen run on a host whose records did not arrive (may have run)
    not_run: float = 0.0  # tasks a run that did not end ok (interrupted, failed) stopped before: not lost
    metrics: dict[str, stats.Summary] = field(default_factory=dict)  # n, median, low, high over ok runs
    #: Ok runs without a value of the metric (a peak PSS no reading inside the run gave).
    missing: dict[str, int] = field(default_factory=dict)
    #: The metrics that mean something for this cell (its workload's headline for its params);
    #: None: all of them. A backlog cell's "latency" is its queue position, so it is not shown.
    shown: tuple[str, ...] | None = None
    #: worker_starved_share of each ok run: whatever the headline, a starved worker is said.
    starved: list[float] = field(default_factory=list)


def varying_dimensions(cells: list[Cell]) -> list[str]:
    """Dimensions whose value differs between cells (the others are the same everywhere)."""
    keys = sorted({k for c in cells for k in c.values})
    return [k for k in keys if len({repr(c.values.get(k)) for c in cells}) > 1]


def cell_headlines(workload, cells: list[Cell]) -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """(the table's metrics: every cell's headline, in order; each cell's own headline by cell_id)."""
    shown = {}
    for c in cells:
        params = workload.Params(
            **{k.removeprefix("params."): v for k, v in c.values.items() if k.startswith("params.")}
        )
        # A fault cell leads with what the fault did to delivery (lost is its own column); how the
        # work split over several hosts follows the headline: the smallest worker host's share, the slowest driver.
        faulted = c.values.get("fault", "none") != "none"
        split = tuple(m for m, dim in SPLIT_FACTS if c.values.get(dim, 1) > 1)
        shown[c.cell_id] = (metricdefs.FAULT_HEADLINE if faulted else ()) + tuple(workload.headline(params)) + split
    order = (*metricdefs.FAULT_HEADLINE, *workload.headline_metrics, *(m for m, _ in SPLIT_FACTS))
    # a metric in both the fault headline and the workload's (tasks_failed) is one column, at its first place
    union = tuple(m for m in dict.fromkeys(order) if any(m in h for h in shown.values()))
    return union or workload.headline_metrics, shown


def summarize(
    con,
    experiment: str,
    cells: list[Cell],
    headline: tuple[str, ...],
    revision: int | None = None,
    point: str | None = None,
) -> list[CellSummary]:
    """Per cell, over the runs of ``revision`` (every revision when None) of the sweep ``point`` and
    the sweeps that resumed it (a sweep's summary holds its own runs, not an earlier night's; every
    sweep's when None)."""
    by_id = {c.cell_id: CellSummary(c) for c in cells}
    values: dict[tuple[str, str], list[float]] = {}
    seen: set[tuple[str, int]] = set()
    rows = con.execute(sql("summary.sql"), {"experiment": experiment, "revision": revision, "point": point}).fetchall()
    for cell_id, repeat, status, name, value in rows:
        s = by_id.get(cell_id)
        if s is None:
            continue
        if (cell_id, repeat) not in seen:
            seen.add((cell_id, repeat))
            s.runs += 1
            s.ok += status == "ok"
        if name == M.TASKS_LOST and value:
            s.lost += value
        if name == M.TASKS_UNSEEN and value:
            s.unseen += value
        if name == M.TASKS_NOT_RUN and value:
            s.not_run += value
        if status == "ok" and name == M.WORKER_STARVED_SHARE and value is not None:
            s.starved.append(value)
        if status == "ok" and name in headline and value is not None:
            values.setdefault((cell_id, name), []).append(value)
        elif status == "ok" and name in headline:
            s.missing[name] = s.missing.get(name, 0) + 1
    for (cell_id, name), vals in values.items():
        by_id[cell_id].metrics[name] = stats.summarize(vals)
    return list(by_id.values())


def starved(summaries: list[CellSummary], label) -> list[tuple[Cell, str]]:
    """Each cell whose workers sat idle while its tasks waited in the broker for
    :data:`STARVED_SHARE` of a run or more (median over its ok runs), with its line;
    ``label(cell_id)`` names it."""
    found = []
    for s in summaries:
        if s.starved and (share := statistics.median(s.starved)) >= STARVED_SHARE:
            found.append(
                (
                    s.cell,
                    f"starved: {label(s.cell.cell_id)}: its workers held no task while its tasks waited in the "
                    f"broker for {share * 100:.0f} % of the run (median of {len(s.starved)} run(s), metric "
                    f"{M.WORKER_STARVED_SHARE}): its rates and latencies measure that wait more than its "
                    "pool's work",
                )
            )
    return found


def with_interval(name: str, s: stats.Summary | None, ok: int, missing: int = 0) -> Text:
    """The median, and under it (dimmed) its 95 % interval; n only when it is not the cell's ok runs,
    and how many of them were not sampled (memory from the sampler: a run without a reading), or
    never got there (a fault run's NULL recovery_s: metricdefs.NEVER_WHEN_NULL)."""
    unsampled = (
        "never"
        if name in metricdefs.NEVER_WHEN_NULL
        else "not sampled"
        if metricdefs.get(name).unit == "bytes"
        else "no value"
    )
    if s is None or s.median is None:
        return Text(unsampled if missing else "–")
    text = Text(fmt(name, s.median))
    extra = f"[{span(name, s.low, s.high)}]" if s.n > 1 and s.low != s.high else ""  # not 0 [0–0]
    if s.n != ok:
        extra += f" n={s.n}" + (f" ({missing} {unsampled})" if missing else "")
    if extra:
        text.append("\n" + extra.strip(), style="dim")
    return text


def caption(headline: tuple[str, ...]) -> str:
    """What the timing columns measure, from where to where: once per metric family (the
    registry's ``family`` and description)."""
    said, lines = set(), []
    for name in headline:
        m = metricdefs.get(name)
        if m.family and m.family not in said:
            said.add(m.family)
            lines.append(f"{m.family}: {m.description.split(' of ', 1)[-1]}")
    return "; ".join(lines)


def render(title: str, summaries: list[CellSummary], headline: tuple[str, ...]) -> Table:
    cells = [s.cell for s in summaries]
    dims = varying_dimensions(cells) or ["pool"]
    table = Table(title=Text(title), title_justify="left", caption_justify="left")
    # A narrow terminal folds a value onto more lines, never cuts it to "celer…": the dimensions
    # say which cell a row is, the intervals what its median rests on.
    for d in dims:
        table.add_column(d, overflow="fold")
    table.add_column("runs ok", justify="right")
    table.add_column("lost", justify="right", overflow="fold")
    for name in headline:
        table.add_column(metricdefs.get(name).label, justify="right", overflow="fold")
    for s in summaries:
        shown = s.shown if s.shown is not None else headline
        ok = f"{s.ok}/{s.runs}" if s.ok == s.runs else f"[red]{s.ok}/{s.runs}[/red]"
        lost = "0" if not s.lost else f"[bold red]{s.lost:,.0f}[/bold red]"
        if s.unseen:  # a host's records missing: these may have run there, or not
            lost += f" [yellow](+{s.unseen:,.0f} unseen)[/yellow]"
        if s.not_run:  # a run stopped before them (interrupted, failed): nobody lost them
            said = f"{s.not_run:,.0f} not run"
            lost = f"{lost} [yellow]({said})[/yellow]" if s.lost or s.unseen else f"[yellow]{said}[/yellow]"
        table.add_row(
            *[Text(value_text(s.cell.values[d]) if d in s.cell.values else "–") for d in dims],
            ok,
            lost,
            *[
                with_interval(n, s.metrics.get(n), s.ok, s.missing.get(n, 0)) if n in shown else Text("n/a")
                for n in headline
            ],
        )
    said = caption(headline)
    several = any(s.runs > 1 for s in summaries)
    table.caption = Text(
        "median over the cell's ok runs (n = runs ok); under it the 95 % bootstrap interval of "
        "the median"
        + ("; lost: every run of the cell together, not a median" if several else "")
        + (f". {said}" if said else "")
    )
    return table
