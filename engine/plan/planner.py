"""The planner: cells become runs (one per cell and repeat), and the plan ``cmx plan --json`` prints."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable
from uuid import uuid4

from cmx.engine.model.experiment import Experiment
from cmx.engine.model.cells import Cell


@dataclass(frozen=True)
class Run:
    """One execution of a cell. ``run_id`` is unique per execution; ``repeat`` counts from 1."""

    run_id: str
    experiment: str
    cell: Cell
    repeat: int
    seq: int = 0  # position in the sweep's planned order, from 1 (stored, so the order can be audited)


def _short_uuid() -> str:
    return uuid4().hex[:8]


def plan(
    exp: Experiment, cells: list[Cell], new_id: Callable[[], str] = _short_uuid, shuffle: int | None = None
) -> list[Run]:
    """The runs of a sweep, repeat-major: repeat 1 of every cell, then repeat 2, ...

    Repeat-major spreads each cell's repeats over the sweep, so a slow spell on a noisy
    machine lands on one repeat of many cells instead of every repeat of one cell.
    ``shuffle`` (a seed) also randomises the order of the cells within each round, so a drift
    that follows the matrix order (a broker's growing state, a warming cache) does not land on
    the same cells every round; the same seed gives the same order.
    ``new_id`` makes the uuid part of ``run_id`` deterministic in tests.
    """
    rng = random.Random(shuffle) if shuffle is not None else None
    runs: list[Run] = []
    for repeat in range(1, exp.max_repeats + 1):  # a race runs only those of them it needs (cli/race.py)
        order = list(cells)
        if rng is not None:
            rng.shuffle(order)
        for cell in order:
            runs.append(
                Run(
                    run_id=f"{cell.cell_id}-{repeat}-{new_id()}",
                    experiment=exp.name,
                    cell=cell,
                    repeat=repeat,
                    seq=len(runs) + 1,
                )
            )
    return runs


def plan_json(exp: Experiment, cells: list[Cell]) -> dict[str, Any]:
    """What ``cmx plan --json`` prints: the experiment, its repeats and each cell's values."""
    return {
        "experiment": exp.name,
        "repeats": exp.racing.model_dump() if exp.racing else exp.repeats,
        "cells": [{"cell_id": cell.cell_id, "params": dict(cell.values)} for cell in cells],
    }
