"""Loading experiment files: every problem is reported as FILE:LINE:COL: message, all at once."""

import textwrap

import pytest

from cmx.engine.model.experiment import Experiment, Limits, parse_duration
from cmx.engine.model.load import load_experiment
from cmx.workloads.vocab.dimensions import BY_NAME, DIMENSIONS
from cmx.engine.model.yamlpos import load_yaml
from tests.conftest import problems

HEAD = "name: t\nworkload: {name: throughput}\n"  # lines 1-2 of most files below


def write(tmp_path, body: str, name: str = "exp.yaml") -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body).lstrip("\n"))
    return str(path)


# ---------------------------------------------------------------- valid files


def test_a_full_file_loads(tmp_path):
    path = write(
        tmp_path,
        """
        name: pools-vs-prefetch
        description: No-op throughput
        repeats: 3
        workload:
          name: throughput
          params: {tasks: 20000, payload_bytes: 64, mode: backlog}
        fixed: {backend: none, heartbeat: 0}
        matrix:
          broker: [redis, rabbitmq]
          params.payload_bytes: [64, 65536]
          celery.task_acks_late: [false, true]
        zip:
          - {pool: [threads, gevent], concurrency: [8, 100]}
        exclude:
          - {broker: rabbitmq, concurrency: [100]}
        include:
          - {broker: redis, pool: gevent, concurrency: 1000, prefetch_multiplier: 1}
        limits: {run_timeout: 10m, warmup: 5s}
        on_error: abort
    """,
    )
    exp = load_experiment(path)
    assert isinstance(exp, Experiment)
    assert exp.source == path
    assert exp.repeats == 3
    assert exp.limits == Limits(run_timeout=600.0, warmup=5.0)
    assert exp.zip == [{"pool": ["threads", "gevent"], "concurrency": [8, 100]}]
    assert exp.on_error == "abort"
    with pytest.raises(Exception):
        exp.repeats = 4  # frozen


def test_defaults(tmp_path):
    exp = load_experiment(write(tmp_path, HEAD))
    # none named: choose_inventory
    assert (exp.description, exp.inventory, exp.repeats, exp.on_error) == ("", None, 1, "continue")
    assert exp.limits == Limits(run_timeout=600.0, warmup=0.0)
    assert (exp.fixed, exp.matrix, exp.zip, exp.exclude, exp.include) == ({}, {}, [], [], [])


def test_builtin_dimension_defaults():
    assert {d.name: d.default for d in DIMENSIONS} == {
        "broker": "redis",
        "backend": "none",
        "pool": "prefork",
        "concurrency": 1,
        "prefetch_multiplier": 4,
        "heartbeat": 120.0,
        "machines": 1,
        "drivers": 1,
        "fault": "none",
        "queue_type": "classic",
        "delivery_limit": 0,
    }


@pytest.mark.parametrize(
    "text, seconds",
    [
        (10, 10.0),
        (2.5, 2.5),
        ("10m", 600.0),
        ("5s", 5.0),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        ("250ms", 0.25),
        ("1h30m", 5400.0),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["10 minutes", "", "5x", "m", "1.s", True, None, [5]])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError, match="expected a duration such as 30s"):
        parse_duration(text)


# ---------------------------------------------------------------- YAML level


def test_yaml_syntax_error_has_its_position(tmp_path):
    path = write(tmp_path, "name: t\nmatrix: {pool: [solo}\n")
    [message] = problems(path)
    assert message.startswith(f"{path}:2:")
    assert "invalid YAML" in message


@pytest.mark.parametrize(
    "body, what", [("", "empty"), ("# nothing\n", "empty"), ("- a\n- b\n", "mapping"), ("just text\n", "mapping")]
)
def test_empty_or_non_mapping_file_is_an_error_at_1_1(tmp_path, body, what):
    path = write(tmp_path, body)
    [message] = problems(path)
    assert message.startswith(f"{path}:1:1: ")
    assert what in message


def test_duplicate_keys(tmp_path):
    path = write(tmp_path, HEAD + "matrix:\n  pool: [solo]\n  pool: [threads]\n")
    assert problems(path) == [f"{path}:5:3: duplicate key 'pool' (first given on line 4): keep one"]


def test_unreadable_file(tmp_path):
    [message] = problems(str(tmp_path / "missing.yaml"))
    assert message.startswith(f"{tmp_path / 'missing.yaml'}: cannot read the file")


def test_positions_fall_back_to_the_nearest_known_ancestor(tmp_path):
    path = write(
        tmp_path,
        """
        name: t
        matrix:
          pool: [solo, threads]
    """,
    )
    data, pos = load_yaml(path)
    assert data == {"name": "t", "matrix": {"pool": ["solo", "threads"]}}
    assert pos.of(("matrix", "pool", 1)) == (3, 16)
    assert pos.of(("matrix", "pool")) == (3, 9)
    assert pos.key(("matrix", "pool")) == (3, 3)
    assert pos.of(("matrix", "pool", 7, "x")) == (3, 9)
    assert pos.of(("matrix", "concurrency")) == (3, 3)  # missing key: at its parent mapping
    assert pos.of(("nope",)) == (1, 1)


# ---------------------------------------------------------------- structure and types


def test_unknown_top_level_key_is_reported_at_the_key(tmp_path):
    path = write(tmp_path, HEAD + "colour: blue\n")
    assert problems(path) == [
        f"{path}:3:1: unknown key 'colour' (allowed: name, description, inventory, repeats, workload, "
        "fixed, matrix, zip, exclude, include, limits, on_error, thresholds, objective)"
    ]


def test_source_cannot_come_from_the_file(tmp_path):
    path = write(tmp_path, HEAD + "source: elsewhere.yaml\n")
    [message] = problems(path)
    assert message.startswith(f"{path}:3:1: unknown key 'source'")


def test_unknown_nested_key_suggests_the_right_one(tmp_path):
    path = write(tmp_path, HEAD + "limits: {run_timout: 5s}\n")
    assert problems(path) == [
        f"{path}:3:10: unknown key 'run_timout' in limits "
        "(allowed: run_timeout, warmup, settle, fault_restart, max_runs, max_time); "
        "did you mean 'run_timeout'?"
    ]


def test_wrong_types(tmp_path):
    path = write(
        tmp_path,
        """
        name: bad name
        repeats: "3"
        workload: {name: throughput}
        limits: {run_timeout: 10 minutes}
        on_error: explode
    """,
    )
    assert problems(path) == [
        f"{path}:1:7: name: use letters, digits, '_', '.' and '-', starting with a letter or digit",
        f"{path}:2:10: repeats: Input should be a valid integer",
        f"{path}:4:23: limits.run_timeout: expected a duration such as 30s, 10m, 1h or 250ms "
        "(or a number of seconds), got '10 minutes'",
        f"{path}:5:11: on_error: Input should be 'continue' or 'abort'",
    ]


def test_repeats_must_be_at_least_one(tmp_path):
    path = write(tmp_path, HEAD + "repeats: 0\n")
    assert problems(path) == [f"{path}:3:10: repeats: Input should be greater than or equal to 1"]


def test_missing_required_key_is_reported_at_its_parent(tmp_path):
    path = write(tmp_path, "# a comment\nname: t\nworkload: {params: {}}\n")
    assert problems(path) == [
        f"{path}:3:11: missing required key 'name' in workload",
    ]
    path = write(tmp_path, "# a comment\nname: t\n", name="b.yaml")
    assert problems(path) == [f"{path}:2:1: missing required key 'workload'"]


# ---------------------------------------------------------------- dimensions


def test_matrix_dimension_with_no_values(tmp_path):
    path = write(tmp_path, HEAD + "matrix:\n  pool: []\n")
    assert problems(path) == [f"{path}:4:9: dimension 'pool' has no values: give at least one or remove it"]


def test_matrix_value_that_is_not_a_list(tmp_path):
    path = write(tmp_path, HEAD + "matrix:\n  pool: solo\n")
    assert problems(path) == [f"{path}:4:9: dimension 'pool' in matrix must be a list of values, e.g. pool: [solo]"]


def test_matrix_value_listed_twice(tmp_path):
    path = write(tmp_path, HEAD + "matrix:\n  heartbeat: [0, 10, 0.0]\n")
    assert problems(path) == [f"{path}:4:22: dimension 'heartbeat' lists 0.0 twice (items 1 and 3)"]


def test_zip_lists_of_different_lengths(tmp_path):
    path = write(tmp_path, HEAD + "zip:\n  - {params.tasks: [1, 2, 3], params.rate: [5, 6]}\n")
    assert problems(path) == [
        f"{path}:4:5: zip #1 lists must have the same length: params.tasks has 3, params.rate has 2"
    ]


@pytest.mark.parametrize(
    "body, where, first, second",
    [
        ("fixed: {pool: solo}\nmatrix: {pool: [threads]}\n", "4:10", "fixed", "matrix"),
        ("matrix: {pool: [threads]}\nzip:\n  - {pool: [solo], concurrency: [1]}\n", "5:6", "matrix", "zip #1"),
        ("zip:\n  - {pool: [solo]}\n  - {pool: [threads]}\n", "5:6", "zip #1", "zip #2"),
    ],
)
def test_dimension_set_in_two_places(tmp_path, body, where, first, second):
    path = write(tmp_path, HEAD + body)
    assert problems(path) == [f"{path}:{where}: 'pool' is set in both {first} and {second}: keep one"]


def test_unknown_workload(tmp_path):
    path = write(tmp_path, "name: t\nworkload:\n  name: thruput\n")
    from cmx.workloads.catalog.registry import names

    assert problems(path) == [
        f"{path}:3:9: unknown workload 'thruput' (known: {', '.join(names())}); did you mean 'throughput'?"
    ]


@pytest.mark.parametrize(
    "dim, value, message",
    [
        (
            "pool",
            "sollo",
            "unknown pool 'sollo' (choose from prefork, threads, gevent, eventlet, solo); did you mean 'solo'?",
        ),
        (
            "broker",
            "kafka",
            "unknown broker 'kafka' (choose from redis, rabbitmq, rabbitmq-quorum, redis-sentinel, rabbitmq-cluster)",
        ),
        ("backend", "mongodb", "unknown backend 'mongodb' (choose from none, redis, rpc, postgres)"),
        ("concurrency", "yes", "concurrency must be an integer >= 1, got True"),
        ("concurrency", "0", "concurrency must be an integer >= 1, got 0"),
        ("prefetch_multiplier", "-1", "prefetch_multiplier must be an integer >= 0, got -1"),
        ("machines", "1.5", "machines must be an integer >= 1, got 1.5"),
        ("heartbeat", "-2", "heartbeat must be a number of seconds >= 0 (0 = off), got -2"),
    ],
)
def test_bad_builtin_value_is_reported_at_the_list_element(tmp_path, dim, value, message):
    path = write(tmp_path, HEAD + f"matrix:\n  {dim}:\n    - {BY_NAME[dim].default}\n    - {value}\n")
    assert problems(path) == [f"{path}:6:7: {message}"]


def test_unknown_dimension(tmp_path):
    path = write(tmp_path, HEAD + "fixed:\n  workers: 4\n")
    assert problems(path) == [
        f"{path}:4:3: unknown dimension 'workers' (built-ins: broker, backend, pool, concurrency, "
        "prefetch_multiplier, heartbeat, machines, drivers, queue_type, delivery_limit, fault; "
        "or params.NAME / celery.SETTING / worker.FLAG / package.NAME); did you mean 'broker'?"
    ]


def test_fixed_builtin_given_a_list(tmp_path):
    path = write(tmp_path, HEAD + "fixed:\n  pool: [solo, threads]\n")
    assert problems(path) == [f"{path}:4:9: fixed takes one value for 'pool'; to vary it, move it to matrix"]


def test_params_dimensions_are_checked_against_the_workload(tmp_path):
    path = write(
        tmp_path, HEAD + "matrix:\n  params.mode: [backlog, burst]\n  params.size: [1]\nfixed: {params.tasks: 0}\n"
    )
    assert problems(path) == [
        f"{path}:4:26: params.mode: Input should be 'backlog', 'stream' or 'ramp'",
        f"{path}:5:3: unknown workload param 'params.size' (known: mode, payload_bytes, publisher, ramp_factor, "
        "ramp_step_s, ramp_steps, rate, rate_fraction, raw_batch, stamping, tasks, via)",
        f"{path}:6:23: params.tasks: Input should be greater than or equal to 1",
    ]


def test_workload_params_are_checked_against_the_workload(tmp_path):
    path = write(tmp_path, "name: t\nworkload:\n  name: throughput\n  params:\n    payload: 5\n    rate: -1\n")
    assert problems(path) == [
        f"{path}:5:5: unknown param 'payload' for workload 'throughput' "
        "(known: mode, payload_bytes, publisher, ramp_factor, ramp_step_s, ramp_steps, rate, rate_fraction, raw_batch, "
        "stamping, tasks, via); did you mean 'payload_bytes'?",
        f"{path}:6:11: params.rate: Input should be greater than 0",
    ]


def test_celery_dimensions_must_be_real_settings_with_json_values(tmp_path):
    # Values are typed from Celery's table (tests/unit/test_celery_settings.py has every kind):
    # broker_transport_options is a mapping, so a list is refused and {a: 1} is fine.
    path = write(
        tmp_path,
        HEAD + "fixed:\n  celery.task_acks_lat: true\n  celery.broker_transport_options: [a]\n"
        "matrix:\n  celery.task_acks_late: [true, false]\n  celery.accept_content: [[json], [json, pickle]]\n",
    )
    assert problems(path) == [
        f"{path}:4:3: unknown Celery setting 'celery.task_acks_lat' (use a lowercase setting name such as "
        "celery.task_acks_late); did you mean 'celery.task_acks_late'?",
        f"{path}:5:36: celery.broker_transport_options: Celery takes a mapping, got [\"a\"]",
    ]


def test_exclude_and_include_must_name_known_dimensions(tmp_path):
    path = write(
        tmp_path,
        HEAD + "matrix: {pool: [solo, threads]}\n"
        "exclude:\n  - {poool: solo}\n  - {params.tasks: 5}\n"
        "include:\n  - {pool: gevent, workers: 2}\n",
    )
    assert problems(path) == [
        f"{path}:5:6: unknown dimension 'poool' (built-ins: broker, backend, pool, concurrency, "
        "prefetch_multiplier, heartbeat, machines, drivers, queue_type, delivery_limit, fault; "
        "or params.NAME / celery.SETTING / worker.FLAG / package.NAME); did you mean 'pool'?",
        f"{path}:6:6: exclude #2 names 'params.tasks', which no cell sets, so it can never match: "
        "set it in fixed/matrix/zip or drop it",
        f"{path}:8:20: unknown dimension 'workers' (built-ins: broker, backend, pool, concurrency, "
        "prefetch_multiplier, heartbeat, machines, drivers, queue_type, delivery_limit, fault; "
        "or params.NAME / celery.SETTING / worker.FLAG / package.NAME); did you mean 'broker'?",
    ]


def test_exclude_values_are_validated(tmp_path):
    path = write(tmp_path, HEAD + "matrix: {pool: [solo, threads]}\nexclude:\n  - {pool: [solo, sollo]}\n")
    assert problems(path) == [
        f"{path}:5:19: unknown pool 'sollo' (choose from prefork, threads, gevent, eventlet, solo); "
        "did you mean 'solo'?"
    ]


def test_include_that_repeats_a_matrix_cell(tmp_path):
    from cmx.engine.model.cells import expand

    ok = load_experiment(write(tmp_path, HEAD + "matrix: {pool: [solo, threads]}\n", name="ok.yaml"))
    solo_id = expand(ok)[0].cell_id
    path = write(tmp_path, HEAD + "matrix: {pool: [solo, threads]}\ninclude:\n  - {pool: gevent}\n  - {pool: solo}\n")
    assert problems(path) == [f"{path}:6:5: include #2 repeats cell {solo_id} already in the matrix: remove it"]


def test_include_after_exclude_is_not_a_repeat(tmp_path):
    path = write(tmp_path, HEAD + "matrix: {pool: [solo, threads]}\nexclude: [{pool: solo}]\ninclude: [{pool: solo}]\n")
    assert [c for c in load_experiment(path).include] == [{"pool": "solo"}]


def test_include_that_repeats_another_include(tmp_path):
    path = write(
        tmp_path,
        HEAD + "fixed: {heartbeat: 0}\ninclude:\n  - {pool: gevent}\n"
        "  - {pool: threads}\n  - {heartbeat: 0.0, pool: gevent}\n",
    )
    [message] = problems(path)
    assert message.startswith(f"{path}:7:5: include #3 repeats cell ")
    assert message.endswith(" already added by include #1: remove it")


def test_every_problem_is_reported_at_once_in_file_order(tmp_path):
    path = write(
        tmp_path,
        """
        name: t
        repeats: 0
        colour: blue
        workload:
          name: throughput
          params: {tasks: 0}
        fixed:
          pool: threads
        matrix:
          pool: [prefork, sollo]
          concurrency: []
          frobs: [1]
        zip:
          - {params.rate: [1, 2, 3], params.tasks: [10, 20]}
        exclude:
          - {poool: solo}
        on_error: explode
    """,
    )
    found = problems(path)
    assert [m.split(": ", 1)[0] for m in found] == [
        f"{path}:{where}"
        for where in ["2:10", "3:1", "6:19", "10:3", "10:19", "11:16", "12:3", "14:5", "16:6", "17:11"]
    ]
    assert "'pool' is set in both fixed and matrix" in found[3]
    assert "unknown pool 'sollo'" in found[4]
    assert "dimension 'concurrency' has no values" in found[5]
    assert "zip #1 lists must have the same length: params.rate has 3, params.tasks has 2" in found[7]


def test_include_repeats_are_found_even_when_other_parts_are_invalid(tmp_path):
    path = write(tmp_path, HEAD + "matrix: {pool: [solo]}\ninclude: [{pool: solo}]\nrepeats: 0\n")
    found = problems(path)
    assert [m.split(": ", 1)[0] for m in found] == [f"{path}:4:11", f"{path}:5:10"]
    assert "include #1 repeats cell" in found[0]


def test_anchors_and_merge_keys_work(tmp_path):
    path = write(
        tmp_path, HEAD + "fixed: &f {backend: redis}\ninclude:\n  - {<<: *f, pool: solo}\n  - <<: *f\n    pool: solo\n"
    )
    found = problems(path)
    assert len(found) == 1 and found[0].startswith(f"{path}:6:5: include #2 repeats cell ")
    assert found[0].endswith("already added by include #1: remove it")


def test_worker_flags_are_booleans_with_known_names(tmp_path):
    path = write(
        tmp_path, HEAD + "matrix:\n  worker.gossip: [true, false]\n  worker.mingel: [true]\n  worker.events: [1]\n"
    )
    got = problems(path)
    assert any("unknown worker flag 'worker.mingel'" in p and "did you mean 'worker.mingle'" in p for p in got), got
    assert any("worker.events must be true or false" in p for p in got), got
    assert len(got) == 2


# ---------------------------------------------------------------- checks of the expanded cells


def test_an_exclude_that_drops_every_cell_is_an_error(tmp_path):
    path = write(tmp_path, HEAD + "matrix: {pool: [solo, threads]}\nexclude:\n  - {pool: [solo, threads]}\n")
    assert problems(path) == [
        f"{path}:5:3: the exclude rules drop every cell: nothing would run; narrow a rule or remove it"
    ]


def test_a_zip_item_repeated_whole_is_an_error_but_a_repeated_value_is_not(tmp_path):
    path = write(tmp_path, HEAD + "zip:\n  - {pool: [solo, threads, solo], concurrency: [1, 1, 1]}\n")
    assert problems(path) == [
        f"{path}:4:5: zip #1 repeats item 1 at item 3 (same value for every "
        "dimension): it would run the same cells twice"
    ]
    ok = write(tmp_path, HEAD + "zip:\n  - {pool: [solo, threads, solo], concurrency: [1, 1, 2]}\n", name="ok.yaml")
    assert load_experiment(ok).zip[0]["pool"] == ["solo", "threads", "solo"]


def test_workload_rules_across_params_are_checked_per_cell_before_anything_runs(tmp_path):
    # Each value alone has the right type; the workload's own validators reject the combination.
    path = write(
        tmp_path,
        """
        name: t
        workload:
          name: io_chord
          params: {chords: [0, -3], sleep_min_s: 5}
        matrix:
          params.sleep_max_s: [6, 1, 2]
    """,
    )
    found = problems(path)
    assert len(found) == 2, found  # one line per broken rule, not one per cell
    assert found[0].startswith(f"{path}:4:20: workload 'io_chord': chords must be a non-empty list")
    assert "params.chords=[0, -3] in cell" in found[0]
    assert found[1].startswith(
        f"{path}:6:23: workload 'io_chord': sleep_max_s must be >= sleep_min_s (params.sleep_max_s=1.0 in cell "
    )


def test_an_exclude_may_name_a_param_set_in_workload_params(tmp_path):
    path = write(
        tmp_path,
        """
        name: t
        workload: {name: throughput, params: {tasks: 10}}
        matrix: {pool: [solo, threads]}
        exclude:
          - {params.tasks: 10, pool: solo}
    """,
    )
    assert load_experiment(path).exclude == [{"params.tasks": 10, "pool": "solo"}]


# ------------------------------------------------- a broker alias with a queue type of its own


def test_an_alias_with_its_own_queue_type_refuses_another_given_queue_type(tmp_path):
    """``rabbitmq-quorum`` is ``{broker: rabbitmq, queue_type: quorum}``: a cell of it that the file
    gives ``queue_type: classic`` ran quorum silently; now it is one line at the value that clashes."""
    clash = (
        "queue_type classic: broker rabbitmq-quorum is rabbitmq with quorum queues; "
        "for classic queues use broker rabbitmq"
    )
    fixed = write(tmp_path, HEAD + "fixed: {broker: rabbitmq-quorum, queue_type: classic}\n")
    assert problems(fixed) == [f"{fixed}:3:46: {clash}"]
    both = "matrix:\n  broker: [rabbitmq, rabbitmq-quorum]\n  queue_type: [classic, quorum]\n"
    crossed = write(tmp_path, HEAD + both, name="crossed.yaml")
    assert problems(crossed) == [f"{crossed}:5:16: {clash}"]
    # The alias alone, with the type it has, or its clash excluded: valid.
    for n, body in enumerate(
        [
            "fixed: {broker: rabbitmq-quorum}\n",
            "fixed: {broker: rabbitmq-quorum, queue_type: quorum}\n",
            "matrix:\n  broker: [rabbitmq, rabbitmq-quorum]\n  queue_type: [classic, quorum]\n"
            "exclude:\n  - {broker: rabbitmq-quorum}\ninclude:\n  - {broker: rabbitmq-quorum}\n",
        ]
    ):
        load_experiment(write(tmp_path, HEAD + body, name=f"ok{n}.yaml"))
