"""A chart of the report (analysis/report_charts.py, report_history.py, tradeoff.py): its name (the
PNG's), title, caption and Vega-Lite spec."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chart:
    name: str
    title: str
    caption: str
    spec: dict
