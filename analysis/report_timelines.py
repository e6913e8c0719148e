"""The report's charts over one run's time: tasks finished per second with the queue depth and the
faults where they struck, and memory per process role, each of the first ok run of a few cells (a
median hides warm-up and stalls; these show them)."""

from __future__ import annotations

from cmx.analysis import charts, legend
from cmx.analysis.chartspec import Chart

MEMORY_RUNS = 6  # memory- and rate-over-time panels: the first ok run of at most this many cells
MEMORY_POINTS = 150  # per panel and role: sampler ticks are bucketed down to about this many


def _first_ok_runs(con, experiment: str, revision: int, cells: list[dict], having: str) -> list[tuple]:
    """(run_id, cell_id, repeat) of the first ok run of at most MEMORY_RUNS cells (in the table's
    order) that has rows in table ``having`` (tasks, samples): the runs the over-time panels draw."""
    runs = con.execute(
        f"""
        SELECT run_id, cell_id, repeat FROM runs WHERE experiment = ? AND revision = ? AND status = 'ok'
          AND run_id IN (SELECT run_id FROM {having})
        QUALIFY row_number() OVER (PARTITION BY cell_id ORDER BY repeat, started_at) = 1""",
        [experiment, revision],
    ).fetchall()
    order = {c["cell_id"]: i for i, c in enumerate(cells)}
    return sorted(runs, key=lambda r: order.get(r[1], 0))[:MEMORY_RUNS]


def rate_over_time_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    runs = _first_ok_runs(con, experiment, revision, cells, "tasks")
    if not runs:
        return None
    name = {r: f"{labels.get(c, c)} #{k}" for r, c, k in runs}
    # The view sizes its buckets to the run (about 40 a run), so the inline data stays small.
    rows = con.execute(
        """
        SELECT run_id, second, width_s, completed, rate, queue_depth FROM rate_timeseries
        WHERE run_id IN (SELECT unnest(?::VARCHAR[])) ORDER BY run_id, second""",
        [list(name)],
    ).fetchall()
    data = [
        {"run": name[r], "second": s, "width_s": w, "completed": c, "rate": rate, "queue_depth": q}
        for r, s, w, c, rate, q in rows
    ]
    if not data:
        return None
    # Where each fault struck, on the same axis (the controller's clock, from the first task sent).
    struck = [
        {"run": name[r], "second": sec, "fault": f}
        for r, sec, f in con.execute(
            """
        SELECT f.run_id, f.struck_at - (SELECT min(sent_at) FROM task_times t WHERE t.run_id = f.run_id), f.fault
        FROM fault_times f WHERE f.run_id IN (SELECT unnest(?::VARCHAR[])) AND f.struck_at IS NOT NULL""",
            [list(name)],
        ).fetchall()
        if sec is not None
    ]
    return Chart(
        "rate_over_time",
        "Rate over time per run",
        f"Tasks finished per second (line) and queue depth (shaded, its own axis) over one run of "
        f"{len(runs)} cell(s), seconds from the first task sent, in buckets sized to the run (a "
        "partial last bucket divided by its own width): warm-up and stalls show here, medians hide "
        "them; a fault run's faults are red rules where they struck. " + caption,
        charts.rate_over_time(data, "rate over time", struck).to_dict(),
    )


def memory_chart(con, experiment: str, revision: int, cells: list[dict], caption: str) -> Chart | None:
    labels = {c["cell_id"]: c["label"] for c in cells}
    runs = [(r, c) for r, c, _ in _first_ok_runs(con, experiment, revision, cells, "samples")]
    if not runs:
        return None
    # Bucket ticks (max per host within a bucket, then summed over hosts: ticks of hosts are not aligned).
    rows = con.execute(
        f"""
        WITH m AS (SELECT * FROM memory_timeseries WHERE run_id IN (SELECT unnest(?::VARCHAR[]))),
        w AS (SELECT run_id, greatest(max(t_s) / {MEMORY_POINTS}, 0.2) AS step FROM m GROUP BY run_id),
        b AS (SELECT m.run_id, m.host, m.role, floor(m.t_s / w.step) * w.step AS t_s, max(m.rss_bytes) AS rss
              FROM m JOIN w USING (run_id) GROUP BY ALL)
        SELECT run_id, role, t_s, sum(rss) / 1048576 AS rss_mb FROM b GROUP BY ALL ORDER BY ALL""",
        [[r[0] for r in runs]],
    ).fetchall()
    cell_of = dict(runs)
    data = [{"cell": labels.get(cell_of[r], r), "role": role, "t_s": t, "rss_mb": mb} for r, role, t, mb in rows]
    spec = charts.memory_over_time(data, legend.assign(data, ["role"], dash=False), "memory over time").to_dict()
    return Chart(
        "memory",
        "Memory over time per role",
        f"RSS summed over each role's processes, first ok run of {len(runs)} cell(s). " + caption,
        spec,
    )
