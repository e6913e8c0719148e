"""The planner: cells become runs (one per cell and repeat), and the plan ``cmx plan --json`` prints."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable
from uuid import uuid4

from engine.experiment import Experiment
from engine.matrix import Cell


@dataclass(frozen=True)
class Run:
    """One execution of a cell. ``run_id`` is unique per execution; ``repeat`` counts from 1."""

    run_id: str
    experiment: str
    cell: Cell
    repeat: int


def _short_uuid() -> str:
    return uuid4().hex[:8]


def plan(exp: Experiment, cells: list[Cell], new_id: Callable[[], str] = _short_uuid) -> list[Run]:
    """The runs of a sweep, repeat-major: repeat 1 of every cell, then repeat 2, ...

    Repeat-major spreads each cell's repeats over the sweep, so a slow spell on a noisy
    machine lands on one repeat of many cells instead of every repeat of one cell.
    ``new_id`` makes the uuid part of ``run_id`` deterministic in tests.
    """
    return [
        Run(run_id=f"{cell.cell_id}-{repeat}-{new_id()}", experiment=exp.name, cell=cell, repeat=repeat)
        for repeat in range(1, exp.repeats + 1)
        for cell in cells
    ]


def plan_json(exp: Experiment, cells: list[Cell]) -> dict[str, Any]:
    """What ``cmx plan --json`` prints: the experiment, its repeats and each cell's values."""
    return {
        "experiment": exp.name,
        "repeats": exp.repeats,
        "cells": [{"cell_id": cell.cell_id, "params": dict(cell.values)} for cell in cells],
    }
