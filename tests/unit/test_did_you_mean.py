"""A misspelt name gets a "did you mean" (issue 43): pool, broker, backend, workload, experiment and
metric names, all through one helper (engine/errors.py's ``suggest``); still one line, exit 2."""

from __future__ import annotations

import pytest

from cmx.analysis import views
from cmx.analysis.recommend import RecommendError, parse_constraint
from cmx.engine.errors import suggest
from cmx.engine.results import db
from tests.conftest import cmx, problems, write
from tests.results_fixture import add_run


def test_suggest_names_the_closest_known_name_or_nothing():
    assert suggest("prefrok", ["prefork", "threads"]) == "; did you mean 'prefork'?"
    assert suggest("task_acks_lat", {"task_acks_late"}, "celery.") == "; did you mean 'celery.task_acks_late'?"
    assert suggest("zzz", ["prefork", "threads"]) == ""


@pytest.mark.parametrize(
    "line, said",
    [
        (
            "matrix: {pool: [prefrok, threads]}",
            "5:17: unknown pool 'prefrok' (choose from prefork, threads, gevent, "
            "eventlet, solo); did you mean 'prefork'?",
        ),
        ("fixed: {broker: rabit}", "unknown broker 'rabit'"),
        ("fixed: {backend: redsi}", "did you mean 'redis'?"),
        (
            "objective: {maximize: consume_rat}",
            "5:23: objective: unknown metric 'consume_rat'; did you mean 'consume_rate'?",
        ),
        # the objective's where constraints (issue 38) read as thresholds do
        (
            "objective: {maximize: consume_rate, where: {peak_pss_byte: '<= 200 MiB'}}",
            "5:45: objective.where: unknown metric 'peak_pss_byte'; did you mean 'peak_pss_bytes'?",
        ),
    ],
)
def test_dimension_values_and_metrics_in_the_file(tmp_path, line, said):
    exp = write(
        tmp_path / "e.yaml",
        f"""
        name: e
        workload: {{name: throughput}}
        # a comment
        # another
        {line}
    """,
    )
    proc = cmx("validate", str(exp), timeout=120)
    assert proc.returncode == 2, proc.stderr
    [one] = proc.stderr.strip().splitlines()
    assert one.startswith(f"{exp}:") and said in one and "did you mean" in one, one


def test_workload_name(tmp_path):
    exp = write(tmp_path / "e.yaml", "name: e\nworkload: {name: throughpt}\n")
    [one] = problems(str(exp))
    assert one.startswith(f"{exp}:2:") and one.endswith("did you mean 'throughput'?"), one


@pytest.fixture
def results(tmp_path):
    path = tmp_path / "r.duckdb"
    with db.connect(path) as con:
        db.record_sweep(con, "s1", "quickstart", "q.yaml", "throughput", "", "inv", {}, {"revision": 1}, planned=2)
        for r, pool in ((1, "threads"), (2, "gevent")):
            add_run(con, "quickstart", f"q{r}", {"pool": pool}, metrics={"consume_rate": 100.0 + r})
    return path


@pytest.mark.parametrize(
    "args",
    [
        ["report", "quickstrat"],
        ["trend", "quickstrat"],
        ["recommend", "quickstrat"],
        ["compare", "quickstrat:pool=threads", "quickstart:pool=gevent"],
        ["export", "quickstrat", "--out", "x"],
    ],
)
def test_experiment_names(results, tmp_path, args):
    proc = cmx(*args, "--db", str(results), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    [one] = proc.stderr.strip().splitlines()
    assert one.endswith("did you mean 'quickstart'?"), one


@pytest.mark.parametrize(
    "args",
    [
        ["trend", "quickstart", "--metric", "consume_rat"],
        ["recommend", "quickstart", "--maximize", "consume_rat"],
        ["compare", "quickstart:pool=threads", "quickstart:pool=gevent", "--metric", "consume_rat"],
    ],
)
def test_metric_names_on_the_command_line(results, tmp_path, args):
    proc = cmx(*args, "--db", str(results), cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    [one] = proc.stderr.strip().splitlines()
    assert "did you mean 'consume_rate'?" in one, one


def test_a_constraints_metric():
    with pytest.raises(RecommendError, match="did you mean 'peak_pss_bytes'"):
        parse_constraint("peak_pss_byte < 1GiB")


def test_experiment_hint_only_for_a_name_not_in_the_database(results):
    with views.connect(results, read_only=True) as con:
        assert views.experiment_hint(con, "quickstart") == ""
        assert views.experiment_hint(con, "quikstart") == "; did you mean 'quickstart'?"


def test_an_objective_with_where_constraints_is_valid_and_checked(tmp_path):
    exp = write(
        tmp_path / "e.yaml",
        """
        name: e
        workload: {name: throughput}
        objective: {maximize: consume_rate, where: {peak_pss_bytes: "<= 200 MiB", tasks_lost: "== 0"}}
    """,
    )
    proc = cmx("validate", str(exp), timeout=120)
    assert proc.returncode == 0, proc.stderr
    for where, said in (
        ('{peak_pss_bytes: "<= 2s"}', "objective.where.peak_pss_bytes: unit 's' does not fit"),
        ('{peak_pss_bytes: "small"}', "is not a threshold"),
        ('{}, minimize: latency_p99_s', "one of {maximize: METRIC} or {minimize: METRIC}"),
    ):
        exp.write_text(
            f"name: e\nworkload: {{name: throughput}}\nobjective: {{maximize: consume_rate, where: {where}}}\n"
        )
        proc = cmx("validate", str(exp), timeout=120)
        assert proc.returncode == 2 and said in proc.stderr and "Traceback" not in proc.stderr, (where, proc.stderr)
