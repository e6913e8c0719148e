"""Thresholds (``thresholds:`` in the experiment) checked per cell when a sweep ends: the median
of the cell's ok runs in the sweep's point of history against each threshold. Rows for the
``threshold_checks`` table and the table ``cmx run`` prints after its summary."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from rich.table import Table
from rich.text import Text

from cmx.analysis.units import fmt
from cmx.engine.model.thresholds import Threshold


@dataclass(frozen=True)
class Check:
    cell_id: str
    metric: str
    written: str  # the threshold as the file gives it (">= 800")
    threshold: Threshold
    median: float | None  # None: no ok run of the cell has the metric (then it does not hold)
    n: int

    @property
    def held(self) -> bool:
        return self.threshold.holds(self.median)

    def row(self) -> tuple:
        """(cell_id, metric, op, value, median, n, held): a row of ``threshold_checks`` after its sweep_id."""
        return (self.cell_id, self.metric, self.threshold.op, self.threshold.value, self.median, self.n, self.held)


def check(
    con, sweeps: list[str], cell_ids: list[str], written: dict[str, str], thresholds: dict[str, Threshold]
) -> list[Check]:
    """Every threshold on every cell, over the ok runs of ``sweeps`` (one point of history)."""
    values: dict[tuple[str, str], list[float]] = {}
    for cell_id, name, value in con.execute(
        """
            SELECT s.cell_id, m.name, m.value FROM run_starts s JOIN run_ends e USING (run_id)
            JOIN metrics m USING (run_id)
            WHERE list_contains(?::VARCHAR[], s.sweep_id) AND e.status = 'ok' AND m.value IS NOT NULL
              AND list_contains(?::VARCHAR[], m.name)""",
        [sweeps, list(thresholds)],
    ).fetchall():
        values.setdefault((cell_id, name), []).append(value)
    checks = []
    for cell_id in cell_ids:
        for metric, rule in thresholds.items():
            got = values.get((cell_id, metric), [])
            checks.append(
                Check(cell_id, metric, written[metric], rule, float(np.median(got)) if got else None, len(got))
            )
    return checks


def render(checks: list[Check], labels: dict[str, str]) -> Table:
    """What held and what did not, crossed rows first, in red."""
    crossed = sum(not c.held for c in checks)
    title = f"thresholds: {crossed} of {len(checks)} crossed" if crossed else f"thresholds: all {len(checks)} held"
    table = Table(
        title=Text(title),
        title_justify="left",
        caption_justify="left",
        caption=Text("median of each cell's ok runs in this sweep"),
    )
    for column in ("cell", "metric", "threshold", "median (n)", ""):
        table.add_column(column)
    for c in sorted(checks, key=lambda c: c.held):
        median = "no ok run" if c.median is None else f"{fmt(c.metric, c.median)} ({c.n})"
        table.add_row(
            Text(labels.get(c.cell_id, c.cell_id)),
            c.metric,
            c.written,
            median,
            "held" if c.held else "CROSSED",
            style=None if c.held else "red",
        )
    return table
