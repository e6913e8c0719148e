"""The pitfall rules (engine/model/pitfalls.py): which cells match, which do not, and the warning lines."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from cmx.engine.model import pitfalls
from cmx.engine.model.load import load_experiment
from cmx.engine.model.cells import expand

REPO = Path(__file__).resolve().parents[2]


def names(values: dict) -> list[str]:
    return [p.name for p, _ in pitfalls.matches(values)]


@pytest.mark.parametrize(
    "values, hit",
    [
        (
            {
                "broker": "redis",
                "params.countdown_s": 13.0,
                "celery.broker_transport_options": {"visibility_timeout": 2},
            },
            True,
        ),
        ({"broker": "redis", "params.countdown_s": 13.0}, False),  # default timeout: an hour
        ({"broker": "redis", "params.countdown_s": 7200.0}, True),
        (
            {
                "broker": "redis",
                "params.countdown_s": 2.0,
                "celery.broker_transport_options": {"visibility_timeout": 2},
            },
            False,
        ),  # not beyond
        (
            {
                "broker": "rabbitmq",
                "params.countdown_s": 13.0,
                "celery.broker_transport_options": {"visibility_timeout": 2},
            },
            False,
        ),  # RabbitMQ has none
        ({"broker": "redis", "params.eta_s": 5.0, "celery.broker_transport_options": {"visibility_timeout": 1}}, True),
    ],
)
def test_visibility_timeout_rule(values, hit):
    assert ("visibility-timeout" in names(values)) is hit


@pytest.mark.parametrize(
    "values, hit",
    [
        ({"pool": "gevent", "broker": "rabbitmq", "heartbeat": 10.0}, True),
        ({"pool": "eventlet", "broker": "rabbitmq-quorum", "heartbeat": 120.0}, True),
        ({"pool": "gevent", "broker": "rabbitmq", "heartbeat": 0.0}, False),
        ({"pool": "prefork", "broker": "rabbitmq", "heartbeat": 60.0}, False),
        ({"pool": "gevent", "broker": "redis", "heartbeat": 60.0}, False),  # Redis has no broker heartbeats
    ],
)
def test_gevent_heartbeat_rule(values, hit):
    assert ("gevent-heartbeat" in names(values)) is hit


def test_gevent_heartbeat_rule_defaults_and_the_starved_loop():
    # broker_heartbeat not given: Celery's default (120 s) is on
    assert names({"pool": "gevent", "broker": "rabbitmq"}) == ["gevent-heartbeat"]
    # 4 s or less: RabbitMQ's heartbeat frames (every heartbeat/2) keep the green loop's 2 s wait going
    (why,) = [w for _, w in pitfalls.matches({"pool": "gevent", "broker": "rabbitmq", "heartbeat": 2.0})]
    assert "never starts consuming" in why
    (why,) = [w for _, w in pitfalls.matches({"pool": "gevent", "broker": "rabbitmq", "heartbeat": 10.0})]
    assert "never starts consuming" not in why


@pytest.mark.parametrize(
    "values, hit",
    [
        ({"prefetch_multiplier": 16, "params.long_s": 2.0}, True),
        ({"prefetch_multiplier": 4, "params.long_s": 2.0, "celery.task_acks_late": False}, True),
        ({"prefetch_multiplier": 16, "params.long_s": 2.0, "celery.task_acks_late": True}, False),
        ({"prefetch_multiplier": 1, "params.long_s": 2.0}, False),
        ({"prefetch_multiplier": 16, "params.long_s": 0.1}, False),  # no long tasks
        ({"params.sleep_s": 10.0}, True),  # prefetch defaults to 4
    ],
)
def test_prefetch_rule(values, hit):
    assert ("prefetch-hol" in names(values)) is hit


@pytest.mark.parametrize(
    "values, hit",
    [
        ({"pool": "prefork", "celery.worker_max_tasks_per_child": 1}, True),
        ({"celery.worker_max_tasks_per_child": 1}, True),  # prefork is the default pool
        ({"pool": "prefork", "celery.worker_max_tasks_per_child": 10}, False),
        ({"pool": "prefork", "celery.worker_max_tasks_per_child": None}, False),
        ({"pool": "gevent", "celery.worker_max_tasks_per_child": 1}, False),  # no children to recycle
    ],
)
def test_max_tasks_per_child_rule(values, hit):
    assert ("max-tasks-per-child" in names(values)) is hit


@pytest.mark.parametrize(
    "values, hit",
    [
        ({"backend": "redis", "params.header": 1000, "params.chords": 3}, True),
        ({"backend": "redis", "params.header": 100}, True),
        ({"backend": "postgres", "params.header": 500}, True),  # the database backend collects them too
        ({"backend": "redis", "params.chords": [150, 3]}, True),  # io_chord: a list of header sizes
        ({"backend": "redis", "params.header": 10, "params.chords": 3}, False),  # chord_size's chords: a count
        ({"backend": "redis", "params.chords": [7, 3]}, False),
        ({"backend": "none", "params.header": 1000}, False),  # no chord without a backend
        ({"backend": "redis"}, False),
    ],
)
def test_chord_size_rule(values, hit):
    assert ("chord-size" in names(values)) is hit


@pytest.mark.parametrize(
    "values, hit",
    [
        ({"pool": "gevent", "broker": "redis", "concurrency": 1, "prefetch_multiplier": 1}, True),
        ({"pool": "eventlet", "broker": "redis", "concurrency": 1, "prefetch_multiplier": 1}, True),
        ({"pool": "gevent", "broker": "redis-sentinel", "concurrency": 1, "prefetch_multiplier": 1}, True),
        ({"pool": "gevent", "broker": "redis", "concurrency": 1, "prefetch_multiplier": 2}, False),
        ({"pool": "gevent", "broker": "redis", "concurrency": 2, "prefetch_multiplier": 1}, False),
        ({"pool": "gevent", "broker": "rabbitmq", "concurrency": 1, "prefetch_multiplier": 1}, False),
        ({"pool": "threads", "broker": "redis", "concurrency": 1, "prefetch_multiplier": 1}, False),  # a hub
        ({"pool": "gevent", "broker": "redis", "concurrency": 1, "prefetch_multiplier": 1, "params.tasks": 1}, False),
        ({"pool": "gevent", "broker": "redis", "concurrency": 4, "celery.task_acks_late": True}, True),
        ({"pool": "gevent", "broker": "redis", "concurrency": 4, "celery.task_acks_late": False}, False),
        ({"pool": "gevent", "broker": "rabbitmq", "concurrency": 4, "celery.task_acks_late": True}, False),
    ],
)
def test_green_redis_one_slot_rule(values, hit):
    assert ("green-one-slot" in names(values)) is hit


def test_only_the_starving_pitfall_is_named_under_a_starved_summary():
    assert [p.name for p in pitfalls.PITFALLS if p.starves] == ["green-one-slot"]


def test_warnings_count_cells_and_name_the_experiment():
    cells = [
        SimpleNamespace(cell_id=f"c{i}", values={"pool": "prefork", "celery.worker_max_tasks_per_child": n})
        for i, n in enumerate([None, 1, 10])
    ]
    (line,) = pitfalls.warnings(cells)
    assert line.startswith("1 of 3 cells walk into") and "c1" in line
    assert "experiments/pitfalls/max-tasks-per-child.yaml" in line
    assert pitfalls.warnings(cells[:1]) == []


SHIPPED = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "experiments" / "pitfalls").glob("*.yaml"))


def test_every_pitfall_names_a_shipped_experiment_that_walks_into_it():
    for p in pitfalls.PITFALLS:
        path = REPO / p.experiment
        assert path.is_file(), p.experiment
        cells = expand(load_experiment(path))
        assert any(p in [q for q, _ in pitfalls.matches(c.values)] for c in cells), p.name


@pytest.mark.parametrize("experiment", SHIPPED)
def test_every_shipped_pitfall_experiment_walks_into_its_own_rule_and_has_a_safe_cell(experiment):
    """The other direction: each file under experiments/pitfalls/ is some rule's experiment, and
    its cells match that rule (its traps) and not all of them (its baseline)."""
    (own,) = [p for p in pitfalls.PITFALLS if p.experiment == experiment]
    cells = expand(load_experiment(REPO / experiment))
    hit = [own in [q for q, _ in pitfalls.matches(c.values)] for c in cells]
    assert any(hit) and not all(hit), (experiment, hit)


def test_the_chord_size_experiment_warns_on_its_large_headers_only():
    cells = expand(load_experiment(REPO / "experiments/pitfalls/chord-size.yaml"))
    assert {c.values["params.header"]: names(c.values) for c in cells} == {
        10: [],
        100: ["chord-size"],
        1000: ["chord-size"],
    }


@pytest.mark.parametrize("experiment", SHIPPED)
def test_validate_and_the_report_warn_on_every_shipped_pitfall_experiment(experiment, tmp_path):
    """What a user sees: `cmx validate` prints the experiment's own warning, and the report of its
    runs (their stored dimension values) carries the same note."""
    import os
    import subprocess
    import sys

    from cmx.analysis import views
    from cmx.analysis.report import pitfall_notes
    from cmx.engine.results import db

    (own,) = [p for p in pitfalls.PITFALLS if p.experiment == experiment]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "cmx.cli.main", "validate", experiment],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"walk into '{own.title}'" in proc.stderr and f"{experiment} shows the effect" in proc.stderr, proc.stderr
    exp = load_experiment(REPO / experiment)
    with views.connect(tmp_path / "r.duckdb") as con:
        for i, cell in enumerate(expand(exp)):
            db.record_run_start(
                con,
                experiment=exp.name,
                sweep_id="s",
                run_id=f"r{i}",
                cell_id=cell.cell_id,
                repeat=1,
                workload=exp.workload.name,
                dims=dict(cell.values),
                params={},
                warmup_s=0.0,
            )
            db.record_run_end(con, f"r{i}", "ok", None, {})
        (revision,) = {r for (r,) in con.execute("SELECT revision FROM runs").fetchall()}
        notes = pitfall_notes(con, exp.name, revision)
    assert any(f"walk into '{own.title}'" in n and experiment in n for n in notes), notes


def test_validate_warns_on_a_trap_but_exits_0():
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, "-m", "cmx.cli.main", "validate", "experiments/pitfalls/max-tasks-per-child.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: 1 of 4 cells walk into 'worker_max_tasks_per_child" in proc.stderr
    assert "experiments/pitfalls/max-tasks-per-child.yaml shows the effect" in proc.stderr
    quiet = subprocess.run(
        [sys.executable, "-m", "cmx.cli.main", "validate", "experiments/io-chords.yaml"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr


def test_report_notes_come_from_the_stored_dimension_values():
    import duckdb

    from cmx.analysis.report import pitfall_notes

    con = duckdb.connect()
    con.execute(
        'CREATE TABLE runs (experiment VARCHAR, run_id VARCHAR, cell_id VARCHAR, revision INTEGER, '
        'broker VARCHAR, pool VARCHAR, "params.countdown_s" DOUBLE, '
        '"celery.broker_transport_options" VARCHAR)'
    )
    con.execute(
        "INSERT INTO runs VALUES ('e', 'r1', 'c1', 1, 'redis', 'prefork', 13.0, '{\"visibility_timeout\":2}'),"
        "('e', 'r2', 'c2', 1, 'redis', 'prefork', 13.0, '{\"visibility_timeout\":3600}'),"
        "('e', 'r3', 'c1', 2, 'redis', 'prefork', 1.0, NULL)"
    )
    (note,) = pitfall_notes(con, "e", 1)
    assert note.startswith("1 of 2 cells walk into 'Redis visibility timeout") and "c1" in note
    assert pitfall_notes(con, "e", 2) == []
    # a column of mixed types (null and 1) stores text: '1' is still the number 1
    con.execute(
        'CREATE OR REPLACE TABLE runs (experiment VARCHAR, run_id VARCHAR, cell_id VARCHAR, revision INTEGER, '
        'pool VARCHAR, "celery.worker_max_tasks_per_child" VARCHAR)'
    )
    con.execute("INSERT INTO runs VALUES ('e', 'r1', 'c1', 1, 'prefork', '1'), ('e', 'r2', 'c2', 1, 'prefork', NULL)")
    (note,) = pitfall_notes(con, "e", 1)
    assert "worker_max_tasks_per_child" in note and "c1" in note
