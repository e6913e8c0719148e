"""`cmx validate` says what it found (issue 43): cells, runs, about how long the sweep takes (from
the experiment's stored runs, in the one ETA form) and whether its repeats can show a difference
between cells at all (the gate's rule: 2 / C(2n, n) is the smallest p of n runs against n)."""

from __future__ import annotations

from cmx.cli.sweepsize import summary
from cmx.engine.results import db
from tests.conftest import cmx, write
from tests.results_fixture import T0, add_run


def _exp(repeats, name: str = "e"):
    from cmx.engine.model.experiment import Experiment

    return Experiment(name=name, workload={"name": "throughput"}, repeats=repeats)


def test_three_runs_a_cell_cannot_show_a_difference_four_can(tmp_path):
    cells = [object()] * 4
    lines = summary("e.yaml", _exp(3), cells, tmp_path / "none.duckdb")
    assert lines[0] == "e.yaml: valid: 4 cells × 3 repeats = 12 runs"
    assert lines[1].startswith("time: no estimate (no stored run of e in")
    assert lines[2] == (
        "shows: no difference between cells can be shown at 3 runs a cell (the smallest "
        "Mann-Whitney p is 0.1); repeats: 4 would allow it"
    )
    assert summary("e.yaml", _exp(4), cells, tmp_path / "none.duckdb")[2] == (
        "shows: a difference between two cells can be shown at 4 runs a cell (the smallest Mann-Whitney p is "
        "0.029, within 0.05)"
    )
    assert len(summary("e.yaml", _exp(3), cells[:1], tmp_path / "none.duckdb")) == 2  # one cell: nothing to compare


def test_the_time_is_the_stored_runs_mean_in_the_one_eta_form(tmp_path):
    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        for r, took in ((1, 8.0), (2, 12.0)):
            add_run(con, "e", f"r{r}", {"pool": "threads"}, repeat=r, started_at=T0)
            con.execute("UPDATE run_ends SET finished_at = to_timestamp(?) WHERE run_id = ?", [T0 + took, f"r{r}"])
    lines = summary("e.yaml", _exp(5), [object()] * 4, path)
    assert lines[1] == (
        f"time: about 3 min 20 s (20 runs × 10.0 s, the mean of the 2 stored ok runs of e in {path}), plus provisioning"
    )


def test_cmx_validate_prints_its_summary(tmp_path):
    exp = write(
        tmp_path / "e.yaml", "name: e\nworkload: {name: throughput}\nrepeats: 3\nmatrix: {pool: [threads, gevent]}\n"
    )
    proc = cmx("validate", str(exp), cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == f"{exp}: valid: 2 cells × 3 repeats = 6 runs", proc.stdout
    assert "repeats: 4 would allow it" in proc.stdout
