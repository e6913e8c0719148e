"""Runs from cells: repeat-major order, run ids, and the plan JSON."""

import dataclasses
import itertools
import json
import textwrap

import pytest

from cmx.engine.model.load import load_experiment
from cmx.engine.model.cells import expand
from cmx.engine.plan.planner import Run, plan, plan_json


def load(tmp_path, body: str):
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent(body))
    return load_experiment(path)


def counter():
    numbers = itertools.count(1)
    return lambda: f"{next(numbers):08x}"


def test_plan_is_repeat_major_with_ids_per_execution(tmp_path):
    exp = load(
        tmp_path,
        """
        name: t
        repeats: 3
        workload: {name: throughput}
        matrix: {pool: [threads, gevent]}
    """,
    )
    cells = expand(exp)
    a, b = cells
    runs = plan(exp, cells, new_id=counter())
    assert [(r.cell, r.repeat) for r in runs] == [(a, 1), (b, 1), (a, 2), (b, 2), (a, 3), (b, 3)]
    assert [r.run_id for r in runs] == [
        f"{a.cell_id}-1-00000001",
        f"{b.cell_id}-1-00000002",
        f"{a.cell_id}-2-00000003",
        f"{b.cell_id}-2-00000004",
        f"{a.cell_id}-3-00000005",
        f"{b.cell_id}-3-00000006",
    ]
    assert {r.experiment for r in runs} == {"t"}


def test_default_run_ids_are_unique_between_plans(tmp_path):
    exp = load(tmp_path, "name: t\nrepeats: 2\nworkload: {name: throughput}\n")
    cells = expand(exp)
    ids = [r.run_id for r in plan(exp, cells) + plan(exp, cells)]
    assert len(set(ids)) == 4
    prefix = cells[0].cell_id
    assert all(i.startswith(prefix + "-") and len(i.rsplit("-", 1)[1]) == 8 for i in ids)


def test_run_is_frozen(tmp_path):
    exp = load(tmp_path, "name: t\nworkload: {name: throughput}\n")
    [run] = plan(exp, expand(exp))
    assert isinstance(run, Run)
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.repeat = 2  # type: ignore[misc]


def test_plan_json_shape(tmp_path):
    exp = load(
        tmp_path,
        """
        name: pools
        repeats: 2
        workload: {name: throughput, params: {tasks: 5}}
        fixed: {heartbeat: 0}
        matrix: {pool: [solo, threads]}
    """,
    )
    cells = expand(exp)
    doc = plan_json(exp, cells)
    common = {
        "backend": "none",
        "broker": "redis",
        "concurrency": 1,
        "fault": "none",
        "heartbeat": 0.0,
        "machines": 1,
        "drivers": 1,
        "prefetch_multiplier": 4,
        "params.tasks": 5,
        "queue_type": "classic",
        "delivery_limit": 0,
    }
    assert doc == {
        "experiment": "pools",
        "repeats": 2,
        "cells": [
            {"cell_id": cells[0].cell_id, "params": {**common, "pool": "solo"}},
            {"cell_id": cells[1].cell_id, "params": {**common, "pool": "threads"}},
        ],
    }
    assert json.loads(json.dumps(doc)) == doc


def test_shuffle_randomises_within_each_round_and_keeps_rounds(tmp_path):
    exp = load(
        tmp_path,
        """
        name: t
        repeats: 3
        workload: {name: throughput}
        matrix: {pool: [threads, gevent, solo, prefork], concurrency: [1, 2]}
    """,
    )
    cells = expand(exp)
    plain = plan(exp, cells)
    assert [r.seq for r in plain] == list(range(1, 25))
    a, b = plan(exp, cells, shuffle=7), plan(exp, cells, shuffle=7)
    assert [(r.cell, r.repeat, r.seq) for r in a] == [(r.cell, r.repeat, r.seq) for r in b]  # same seed, same order
    assert [r.seq for r in a] == list(range(1, 25))
    for repeat in (1, 2, 3):
        round_ = [r.cell for r in a if r.repeat == repeat]
        assert a[(repeat - 1) * 8].repeat == repeat and sorted(c.cell_id for c in round_) == sorted(
            c.cell_id for c in cells
        )  # rounds stay whole: every cell once per round
    orders = [[r.cell.cell_id for r in a if r.repeat == k] for k in (1, 2, 3)]
    assert orders[0] != [c.cell_id for c in cells] or orders[1] != orders[0]  # actually shuffled
    assert [r.cell for r in plan(exp, cells, shuffle=8)] != [r.cell for r in a]


def test_seq_and_shuffle_seed_are_stored(tmp_path):
    from cmx.engine.results import db

    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        db.record_sweep(con, "s", "t", "t.yaml", "throughput", "", "inv", {}, shuffle_seed=7)
        db.record_run_start(
            con,
            experiment="t",
            sweep_id="s",
            run_id="r1",
            cell_id="c",
            repeat=1,
            workload="throughput",
            dims={"pool": "solo"},
            params={},
            warmup_s=0,
            seq=3,
        )
        assert con.execute("SELECT seq FROM run_starts").fetchall() == [(3,)]
        assert con.execute("SELECT shuffle_seed FROM sweeps").fetchall() == [(7,)]
        assert dict(con.execute("SELECT * FROM cmx_schema").fetchall())["run_starts"] == 2
