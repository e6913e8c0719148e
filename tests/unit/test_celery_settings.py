"""celery.* dimensions are typed from Celery's own settings table, and settings a dimension or
the harness owns are refused: FILE:LINE:COL, exit 2, before any host is touched."""

import textwrap

import pytest

from cmx.engine.model.load import load_experiment
from cmx.engine.model.cells import expand
from cmx.workloads.runtime.spec import OWNED_SETTINGS, RunSpec
from tests.conftest import problems

HEAD = "name: t\nworkload: {name: throughput}\n"  # lines 1-2


def write(tmp_path, body: str) -> str:
    path = tmp_path / "exp.yaml"
    path.write_text(HEAD + textwrap.dedent(body).lstrip("\n"))
    return str(path)


def test_each_refused_kind_is_reported_where_it_is(tmp_path):
    path = write(
        tmp_path,
        """
        fixed:
          celery.task_acks_late: "no"
          celery.worker_max_tasks_per_child: ten
        matrix:
          celery.task_acks_on_failure_or_timeout: [true, no]
          celery.broker_pool_limit: [10, true]
          celery.worker_prefetch_multiplier: [1]
        include:
          - {celery.task_ackslate: true}
    """,
    )
    # A bare `no` is YAML 1.1's false: a boolean, so it is fine; the quoted "no" is a string.
    assert problems(path) == [
        f"{path}:4:26: celery.task_acks_late: Celery takes a boolean (true or false), got \"no\"",
        f"{path}:5:38: celery.worker_max_tasks_per_child: Celery takes an integer or null, got \"ten\"",
        f"{path}:8:34: celery.broker_pool_limit: Celery takes an integer, got true",
        f"{path}:9:3: celery.worker_prefetch_multiplier: use the prefetch_multiplier dimension",
        f"{path}:11:6: unknown Celery setting 'celery.task_ackslate' (use a lowercase setting name such as "
        "celery.task_acks_late); did you mean 'celery.task_acks_late'?",
    ]


def test_numbers_and_strings_for_a_boolean_are_refused(tmp_path):
    path = write(
        tmp_path,
        """
        matrix:
          celery.task_acks_late: [1, "true", 0]
    """,
    )
    assert problems(path) == [
        f"{path}:4:27: celery.task_acks_late: Celery takes a boolean (true or false), got 1",
        f"{path}:4:30: celery.task_acks_late: Celery takes a boolean (true or false), got \"true\"",
        f"{path}:4:38: celery.task_acks_late: Celery takes a boolean (true or false), got 0",
    ]


@pytest.mark.parametrize(
    "setting, dimension",
    [
        ("worker_prefetch_multiplier", "use the prefetch_multiplier dimension"),
        ("worker_concurrency", "use the concurrency dimension"),
        ("worker_pool", "use the pool dimension"),
        ("broker_heartbeat", "use the heartbeat dimension (seconds, 0 = off)"),
        ("worker_send_task_events", "use the worker.events dimension"),
        ("broker_url", "set by the harness from the broker dimension and the inventory"),
        ("result_backend", "set by the harness from the backend dimension and the inventory"),
        ("task_default_queue", "the harness gives every run its own queue"),
    ],
)
def test_a_setting_a_dimension_or_the_harness_owns_is_refused(tmp_path, setting, dimension):
    path = write(tmp_path, f"fixed:\n  celery.{setting}: 1\n")
    assert problems(path) == [f"{path}:4:3: celery.{setting}: {dimension}"]


def test_an_owned_setting_is_refused_in_exclude_too(tmp_path):
    path = write(tmp_path, "matrix: {pool: [solo, threads]}\nexclude:\n  - {celery.worker_pool: solo}\n")
    assert problems(path) == [f"{path}:5:6: celery.worker_pool: use the pool dimension"]


def test_values_of_the_types_celery_declares_are_accepted(tmp_path):
    path = write(
        tmp_path,
        """
        fixed:
          celery.worker_max_tasks_per_child: 100          # int
          celery.result_expires: 60                       # float: an int is a number too
          celery.broker_connection_timeout: 2.5           # float
          celery.task_serializer: json                    # string
          celery.broker_transport_options: {visibility_timeout: 3600, priority_steps: [0, 5, 9]}  # dict
          celery.accept_content: [json, pickle]           # list
          celery.task_annotations: {"*": {rate_limit: 10/s}}  # any
          celery.task_default_priority: 5                 # declared 'string' by Celery, really an int
          celery.task_time_limit: null                    # unset by default: null is fine
        matrix:
          celery.task_acks_late: [false, true]            # bool
          celery.worker_disable_rate_limits: [no, yes]    # YAML 1.1 booleans
    """,
    )
    cells = expand(load_experiment(path))
    assert len(cells) == 4
    values = dict(cells[0].values)
    assert values["celery.broker_transport_options"] == {"visibility_timeout": 3600, "priority_steps": [0, 5, 9]}
    assert values["celery.worker_disable_rate_limits"] is False


def test_null_is_refused_where_celery_has_a_default(tmp_path):
    path = write(tmp_path, "fixed:\n  celery.task_acks_late: null\n")
    assert problems(path) == [f"{path}:4:26: celery.task_acks_late: Celery takes a boolean (true or false), got null"]


def test_the_run_spec_refuses_an_owned_setting_so_the_app_cannot_overwrite_a_dimension():
    # What hosts load (spec.json): even a spec written by hand cannot carry an owned setting.
    with pytest.raises(ValueError, match="celery.worker_prefetch_multiplier: use the prefetch_multiplier dimension"):
        RunSpec(
            run_id="r",
            experiment="e",
            cell_id="c",
            repeat=1,
            workload="throughput",
            celery={"worker_prefetch_multiplier": 1, "task_acks_late": True},
        )
    assert RunSpec(
        run_id="r", experiment="e", cell_id="c", repeat=1, workload="throughput", celery={"task_acks_late": True}
    ).celery == {"task_acks_late": True}


def test_the_app_factory_configures_the_dimensions_and_the_users_settings(tmp_path, monkeypatch):
    from cmx.workloads.app.factory import create_app

    monkeypatch.setenv("CMX_BROKER_URL", "memory://")
    spec = RunSpec(
        run_id="r1",
        experiment="e",
        cell_id="c",
        repeat=1,
        workload="throughput",
        prefetch_multiplier=7,
        heartbeat=0.0,
        celery={"task_acks_late": True, "broker_transport_options": {"visibility_timeout": 99}},
    )
    app = create_app(spec, tmp_path, "h")
    assert app.conf.worker_prefetch_multiplier == 7 and app.conf.broker_heartbeat == 0.0
    assert app.conf.task_acks_late is True
    # The user's transport options reach the worker, plus the name the run's connections carry.
    assert app.conf.broker_transport_options == {"visibility_timeout": 99, "client_name": "cmx.r1.worker.broker"}
    assert app.conf.task_default_queue == "cmx.r1"


def test_every_owned_setting_is_a_real_celery_setting():
    from cmx.engine.model.celery_settings import known_settings

    assert set(OWNED_SETTINGS) <= known_settings()


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("celery.broker_connection_timeout", "fast", "Celery takes a number, got \"fast\""),
        ("celery.broker_connection_timeout", True, "Celery takes a number, got true"),
        ("celery.task_serializer", 5, "Celery takes a string, got 5"),
        ("celery.accept_content", "json", "Celery takes a list, got \"json\""),
        ("celery.broker_transport_options", [1], "Celery takes a mapping, got [1]"),
        ("celery.broker_transport_options", {1: "a"}, "Celery takes a mapping, got {1: 'a'}"),
    ],
)
def test_each_type_refuses_what_is_not_of_it(name, value, message):
    from cmx.engine.model.celery_settings import check_value

    with pytest.raises(ValueError) as info:
        check_value(name, value)
    assert str(info.value) == f"{name}: {message}"
    assert check_value("celery.broker_connection_timeout", 3) == 3  # an integer is a number


def test_the_name_the_runs_connections_carry_is_refused_not_overwritten(tmp_path):
    # The harness names every connection of a run (the sampler counts them by it); a user's
    # name used to be replaced silently. The rest of the mapping stays the user's.
    path = write(
        tmp_path,
        """
        fixed:
          celery.broker_transport_options: {visibility_timeout: 60, client_name: mine}
        matrix:
          celery.database_engine_options:
            - {echo: true}
            - {connect_args: {application_name: mine, connect_timeout: 5}}
    """,
    )
    why = (
        "set by the harness: every connection of a run carries the run's name, by which the "
        "sampler counts the run's own connections"
    )
    assert problems(path) == [
        f"{path}:4:36: celery.broker_transport_options.client_name: {why}",
        f"{path}:8:7: celery.database_engine_options.connect_args.application_name: {why}",
    ]
    with pytest.raises(ValueError, match="client_properties.connection_name: set by the harness"):
        RunSpec(
            run_id="r",
            experiment="e",
            cell_id="c",
            repeat=1,
            workload="throughput",
            celery={"broker_transport_options": {"client_properties": {"connection_name": "x"}}},
        )
