"""`cmx run --smoke`: cells shrunk by each workload's own rule, once each, with a short timeout."""

from __future__ import annotations

import textwrap

from cmx.engine.model.load import load_experiment
from cmx.engine.model.cells import expand
from cmx.engine.plan.smoke import SMOKE_TIMEOUT_S, smoke


def load(tmp_path, body):
    path = tmp_path / "e.yaml"
    path.write_text(textwrap.dedent(body).lstrip())
    exp = load_experiment(path)
    return exp, expand(exp)


def test_sizes_are_capped_and_duplicates_merge(tmp_path):
    exp, cells = load(
        tmp_path,
        """
        name: big
        repeats: 5
        workload: {name: throughput, params: {mode: stream, rate: 500}}
        matrix: {pool: [prefork, threads], params.tasks: [10, 20000, 100000]}
        limits: {run_timeout: 1h}
    """,
    )
    small, tiny = smoke(exp, cells)
    assert small.repeats == 1 and small.limits.run_timeout == SMOKE_TIMEOUT_S and small.name == exp.name
    assert sorted((c.values["pool"], c.values["params.tasks"]) for c in tiny) == [
        ("prefork", 10),
        ("prefork", 20),
        ("threads", 10),
        ("threads", 20),
    ]
    assert all(c.values["params.rate"] == 500.0 and c.values["params.mode"] == "stream" for c in tiny)


def test_defaults_are_shrunk_too_and_non_numbers_replaced(tmp_path):
    exp, cells = load(
        tmp_path,
        """
        name: chords
        workload: {name: io_chord}
        fixed: {backend: redis}
    """,
    )
    _, tiny = smoke(exp, cells)
    (cell,) = tiny
    assert cell.values["params.chords"] == [2] and cell.values["params.sleep_max_s"] == 0.2
    assert cell.cell_id != cells[0].cell_id
