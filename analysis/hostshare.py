"""Work per worker host for runs with machines > 1 (table ``host_tasks``): ``cmx status`` and the
report show it, so a machines=2 figure that one host did alone does not go unseen."""

from __future__ import annotations

import html


def host_shares(con, experiment: str | None = None, revision: int | None = None) -> list[tuple]:
    """(experiment, cell_id, host, runs, tasks completed, median share, smallest share) over the
    stored runs that had more than one worker host; empty for a database from before host_tasks."""
    if not con.execute("SELECT 1 FROM duckdb_tables() WHERE table_name = 'host_tasks'").fetchone():
        return []
    return con.execute(
        """
        SELECT r.experiment, r.cell_id, h.host, count(*) AS runs, sum(h.tasks_completed) AS tasks,
               median(h.share) AS share, min(h.share) AS share_min
        FROM host_tasks h JOIN runs r USING (run_id)
        WHERE h.run_id IN (SELECT run_id FROM host_tasks GROUP BY run_id HAVING count(*) > 1)
          AND (r.experiment = $experiment OR $experiment IS NULL)
          AND (r.revision = $revision OR $revision IS NULL)
        GROUP BY ALL ORDER BY ALL""",
        {"experiment": experiment, "revision": revision},
    ).fetchall()


def pct(share: float | None) -> str:
    return "–" if share is None else f"{100 * share:.0f} %"


def shares_html(rows: list[tuple], labels: dict[str, str]) -> str:
    """The report's section: one row per cell and worker host."""
    if not rows:
        return ""
    body = "".join(
        f'<tr><td class="dim">{html.escape(labels.get(cell, cell))}</td><td class="dim">{html.escape(host)}</td>'
        f"<td>{runs}</td><td>{tasks:,}</td><td>{pct(share)}</td><td>{pct(low)}</td></tr>"
        for _, cell, host, runs, tasks, share, low in rows
    )
    return (
        "<section><h2>Work per worker host</h2><p class=\"caption\">Cells with machines &gt; 1: tasks each "
        "worker host completed and its share of the run's tasks (median and smallest over the cell's runs, "
        "all statuses). An even split is 1/machines.</p><table><thead><tr><th class=\"dim\">cell</th>"
        "<th class=\"dim\">host</th><th>runs</th><th>tasks</th><th>share</th><th>smallest share</th></tr>"
        f"</thead><tbody>{body}</tbody></table></section>"
    )
