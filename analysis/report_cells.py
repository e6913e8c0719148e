"""What the report's table and charts show of one revision of an experiment: its dimensions (which
vary, which are fixed), its cells with their medians and intervals, and the summary table's
metrics (the workloads' headline metrics, from the metric registry)."""

from __future__ import annotations


from cmx.analysis import headline, stats
from cmx.analysis.views import dimension_columns
from cmx.engine.model.cells import value_text
from cmx.engine.results import metricdefs
from cmx.workloads.vocab import metrics as M


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def dimensions(con, experiment: str, revision: int) -> tuple[list[str], dict[str, str]]:
    """(dimensions that vary between the experiment's runs, {dimension: value} of those that do not).

    ``runs`` has a column for every dimension of every experiment; the ones this experiment never
    set are NULL throughout and left out."""
    dims = list(dimension_columns(con))
    if not dims:
        return [], {}
    exprs = ", ".join(f"count(DISTINCT {_q(d)}), count({_q(d)}), min({_q(d)})::VARCHAR" for d in dims)
    row = con.execute(
        f"SELECT {exprs} FROM runs WHERE experiment = ? AND revision = ?", [experiment, revision]
    ).fetchone()
    varying, fixed = [], {}
    for i, d in enumerate(dims):
        distinct, present, value = row[3 * i : 3 * i + 3]
        if distinct > 1:
            varying.append(d)
        elif present:
            fixed[d] = value
    return varying, fixed


def cells_of(con, experiment: str, revision: int, varying: list[str], shown: tuple[str, ...] = ()) -> list[dict]:
    """One dict per cell: cell_id, label (its varying values), dimension values, run counts, and
    ``medians``: {metric: (median, n, low, high)}, low..high the 95 % interval of the median for
    the metrics in ``shown`` (None for the others)."""
    dim_sel = "".join(f", any_value({_q(d)}) AS {_q(d)}" for d in varying)
    order = ", ".join(_q(d) for d in varying) or "cell_id"
    cells = {}
    for row in con.execute(
        f"""
            SELECT cell_id, any_value(runs) AS runs, any_value(ok_runs) AS ok_runs,
                   any_value(failed_runs) AS failed_runs, any_value(timeout_runs) AS timeout_runs,
                   any_value(lost_tasks) AS lost_tasks, any_value(unseen_tasks) AS unseen_tasks,
                   any_value(not_run_tasks) AS not_run_tasks {dim_sel}
            FROM cell_summary WHERE experiment = ? AND revision = ? GROUP BY cell_id ORDER BY {order}""",
        [experiment, revision],
    ).fetchall():
        cell = dict(
            zip(
                [
                    "cell_id",
                    "runs",
                    "ok_runs",
                    "failed_runs",
                    "timeout_runs",
                    "lost_tasks",
                    "unseen_tasks",
                    "not_run_tasks",
                    *varying,
                ],
                row,
            )
        )
        cell["label"] = " / ".join("–" if cell[d] is None else value_text(cell[d]) for d in varying) or cell["cell_id"]
        cell["medians"] = {}
        cells[cell["cell_id"]] = cell
    for cell_id, metric, median, n in con.execute(
        "SELECT cell_id, metric, median, n FROM cell_summary WHERE experiment = ? AND revision = ? "
        "AND metric IS NOT NULL",
        [experiment, revision],
    ).fetchall():
        cells[cell_id]["medians"][metric] = (median, n, None, None)
    # The 95 % interval of the median (seeded bootstrap) for the metrics shown; the run values
    # are a few per cell, so this stays cheap however many tasks there were.
    found = con.execute(
        """
            SELECT r.cell_id, m.name, list(m.value ORDER BY r.run_id) FROM runs r JOIN metrics m USING (run_id)
            WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' AND m.value IS NOT NULL
              AND m.name IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""",
        [experiment, revision, list(shown)],
    ).fetchall()
    for (cell_id, metric, _), s in zip(found, stats.summarize_many([values for _, _, values in found])):
        cells[cell_id]["medians"][metric] = (s.median, s.n, s.low, s.high)
    # A fault run's recovery_s stored NULL: it never recovered (metricdefs.NEVER_WHEN_NULL).
    for cell_id, metric, never in con.execute(
        """
            SELECT r.cell_id, m.name, count(*) FROM runs r JOIN metrics m USING (run_id)
            WHERE r.experiment = ? AND r.revision = ? AND r.status = 'ok' AND m.value IS NULL
              AND m.name IN (SELECT unnest(?::VARCHAR[])) GROUP BY ALL""",
        [experiment, revision, list(metricdefs.NEVER_WHEN_NULL)],
    ).fetchall():
        if cell_id in cells:
            cells[cell_id].setdefault("never", {})[metric] = never
    for cell_id, own in _cell_headlines(con, experiment, table_metrics(con, experiment)).items():
        if cell_id in cells:
            cells[cell_id]["shown"] = own
    return list(cells.values())


def table_metrics(con, experiment: str) -> tuple[str, ...]:
    """The summary table's columns: the workload's headline metrics, else every judged metric present."""
    names = headline.of_experiment_runs(con, experiment)
    if (
        names
        and con.execute(
            "SELECT 1 FROM metrics JOIN runs USING (run_id) WHERE experiment = ? AND name = ? LIMIT 1",
            [experiment, M.FAULT_AT_S],
        ).fetchone()
    ):
        # Fault runs: what the fault did to delivery leads (as in the end-of-sweep summary).
        names = [*metricdefs.FAULT_HEADLINE, *(m for m in names if m not in metricdefs.FAULT_HEADLINE)]
    if names:
        # Facts every workload may carry (the registry's FACTS): shown when some run has them.
        have = {
            m
            for (m,) in con.execute(
                "SELECT DISTINCT name FROM metrics JOIN runs USING (run_id) WHERE experiment = ? AND value IS NOT NULL "
                "AND name IN (SELECT unnest(?::VARCHAR[]))",
                [experiment, list(metricdefs.FACTS)],
            ).fetchall()
        }
        return tuple(names) + tuple(m for m in metricdefs.FACTS if m in have and m not in names)
    present = {
        n
        for (n,) in con.execute(
            "SELECT DISTINCT name FROM metrics JOIN runs USING (run_id) WHERE experiment = ?", [experiment]
        ).fetchall()
    }
    return tuple(m for m, d in metricdefs.METRICS.items() if m in present and d.better is not metricdefs.Better.NEITHER)


def _cell_headlines(con, experiment: str, table: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """{cell_id: the table's metrics that mean something for it}: those its workload leaves out of
    its headline for its params are dropped (throughput backlog: latency, which is queue position
    there). A cell of a workload this version does not know keeps every column."""
    return {
        cell_id: tuple(m for m in table if m not in set(whole) - set(shown))
        for cell_id, (shown, whole) in headline.of_cells(con, experiment).items()
    }
