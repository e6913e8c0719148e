"""Matrix expansion, cell ids and --only, compared against literal expected cells (as asv does)."""

import json
import textwrap

import pytest

from cmx.engine.model.load import load_experiment
from cmx.engine.model.cells import Cell, cell_id, expand
from cmx.engine.model.dimensions import normalise_values
from cmx.engine.plan.matrix import cells_for_only

DEFAULTS = {
    "backend": "none",
    "broker": "redis",
    "concurrency": 1,
    "fault": "none",
    "heartbeat": 120.0,
    "machines": 1,
    "drivers": 1,
    "pool": "prefork",
    "prefetch_multiplier": 4,
    "queue_type": "classic",
    "delivery_limit": 0,
}


def load(tmp_path, body: str, name: str = "exp.yaml"):
    path = tmp_path / name
    path.write_text("name: t\nworkload: {name: throughput}\n" + textwrap.dedent(body))
    return load_experiment(path)


def values(cells: list[Cell]) -> list[dict]:
    return [dict(c.values) for c in cells]


def cell(**kw) -> dict:
    """Expected values: defaults, overridden by ``kw`` (``params_x`` spells ``params.x``)."""
    out = dict(DEFAULTS)
    out.update({k.replace("params_", "params.").replace("celery_", "celery."): v for k, v in kw.items()})
    return dict(sorted(out.items()))


def test_no_matrix_gives_one_cell_of_defaults_and_fixed(tmp_path):
    exp = load(tmp_path, "fixed: {heartbeat: 0, params.tasks: 10}\n")
    assert values(expand(exp)) == [cell(heartbeat=0.0, params_tasks=10)]


def test_matrix_is_a_product_in_key_order(tmp_path):
    exp = load(
        tmp_path,
        """
        fixed: {backend: redis}
        matrix:
          pool: [threads, gevent]
          concurrency: [1, 8]
    """,
    )
    assert values(expand(exp)) == [
        cell(backend="redis", pool="threads", concurrency=1),
        cell(backend="redis", pool="threads", concurrency=8),
        cell(backend="redis", pool="gevent", concurrency=1),
        cell(backend="redis", pool="gevent", concurrency=8),
    ]


def test_matrix_crossed_with_a_zip_group(tmp_path):
    exp = load(
        tmp_path,
        """
        matrix:
          broker: [redis, rabbitmq]
        zip:
          - {params.tasks: [10, 20], params.payload_bytes: [0, 64]}
    """,
    )
    assert values(expand(exp)) == [
        cell(broker="redis", params_tasks=10, params_payload_bytes=0),
        cell(broker="redis", params_tasks=20, params_payload_bytes=64),
        cell(broker="rabbitmq", params_tasks=10, params_payload_bytes=0),
        cell(broker="rabbitmq", params_tasks=20, params_payload_bytes=64),
    ]


def test_two_zip_groups_are_crossed(tmp_path):
    exp = load(
        tmp_path,
        """
        zip:
          - {pool: [threads, gevent], concurrency: [4, 100]}
          - {params.tasks: [10, 20], params.mode: [backlog, stream]}
    """,
    )
    assert values(expand(exp)) == [
        cell(pool="threads", concurrency=4, params_tasks=10, params_mode="backlog"),
        cell(pool="threads", concurrency=4, params_tasks=20, params_mode="stream"),
        cell(pool="gevent", concurrency=100, params_tasks=10, params_mode="backlog"),
        cell(pool="gevent", concurrency=100, params_tasks=20, params_mode="stream"),
    ]


def test_exclude_with_scalar_and_list_values(tmp_path):
    exp = load(
        tmp_path,
        """
        matrix:
          pool: [solo, threads]
          concurrency: [1, 8, 64]
          broker: [redis, rabbitmq]
        exclude:
          - {pool: solo, concurrency: [8, 64]}
          - {broker: rabbitmq, concurrency: 64}
    """,
    )
    assert values(expand(exp)) == [
        cell(pool="solo", concurrency=1, broker="redis"),
        cell(pool="solo", concurrency=1, broker="rabbitmq"),
        cell(pool="threads", concurrency=1, broker="redis"),
        cell(pool="threads", concurrency=1, broker="rabbitmq"),
        cell(pool="threads", concurrency=8, broker="redis"),
        cell(pool="threads", concurrency=8, broker="rabbitmq"),
        cell(pool="threads", concurrency=64, broker="redis"),
    ]


def test_exclude_compares_normalised_values(tmp_path):
    exp = load(
        tmp_path,
        """
        matrix:
          heartbeat: [0, 10]
          celery.task_acks_late: [false, true]
        exclude:
          - {heartbeat: 0.0, celery.task_acks_late: false}
    """,
    )
    # heartbeat 0 and 0.0 are the same value. (The setting False is not the number 0: a 0 for a
    # boolean setting is refused by validation, see test_celery_settings.py.)
    assert values(expand(exp)) == [
        cell(heartbeat=0.0, celery_task_acks_late=True),
        cell(heartbeat=10.0, celery_task_acks_late=False),
        cell(heartbeat=10.0, celery_task_acks_late=True),
    ]


def test_include_is_appended_with_fixed_and_defaults_filled(tmp_path):
    exp = load(
        tmp_path,
        """
        fixed: {backend: redis, params.tasks: 100}
        matrix:
          pool: [prefork, solo]
        exclude:
          - {pool: solo}
        include:
          - {pool: gevent, concurrency: 1000, prefetch_multiplier: 1}
          - {pool: solo, celery.task_acks_late: true}
    """,
    )
    assert values(expand(exp)) == [
        cell(backend="redis", params_tasks=100),
        cell(backend="redis", params_tasks=100, pool="gevent", concurrency=1000, prefetch_multiplier=1),
        cell(backend="redis", params_tasks=100, pool="solo", celery_task_acks_late=True),
    ]


def test_include_may_bring_back_an_excluded_cell(tmp_path):
    exp = load(
        tmp_path,
        """
        matrix: {pool: [prefork, solo]}
        exclude: [{pool: solo}]
        include: [{pool: solo}]
    """,
    )
    assert values(expand(exp)) == [cell(), cell(pool="solo")]


def test_cell_values_are_read_only_and_json_serialisable(tmp_path):
    [only] = expand(load(tmp_path, "fixed: {celery.accept_content: [json]}\n"))
    with pytest.raises(TypeError):
        only.values["pool"] = "solo"  # type: ignore[index]
    assert json.loads(json.dumps(dict(only.values))) == cell(celery_accept_content=["json"])
    assert list(only.values) == sorted(only.values)


# ---------------------------------------------------------------- ids


def test_id_is_12_hex_chars_of_sha256_over_canonical_json():
    import hashlib

    vals = cell(pool="solo", drivers=2)
    # fault at its default is left out: ids stay what they were before the dimension existed
    before = {k: v for k, v in vals.items() if k not in ("fault", "queue_type", "delivery_limit")}
    canonical = json.dumps({"workload": "throughput", "values": before}, sort_keys=True, separators=(",", ":"))
    assert cell_id("throughput", vals) == hashlib.sha256(canonical.encode()).hexdigest()[:12]


def test_a_dimension_added_later_keeps_old_ids_at_its_default():
    """drivers came after cells had ids: a cell at drivers 1 keeps the id an older cmx gave it
    (its runs resume), drivers 2 is another cell."""
    old = {k: v for k, v in cell(pool="solo").items() if k != "drivers"}
    assert cell_id("throughput", cell(pool="solo")) == cell_id("throughput", old)
    assert cell_id("throughput", cell(pool="solo", drivers=2)) != cell_id("throughput", old)


def test_same_values_same_id_whatever_the_key_order_or_file(tmp_path):
    a = load(
        tmp_path,
        """
        fixed: {heartbeat: 0, backend: redis}
        matrix:
          pool: [solo, threads]
          concurrency: [2]
    """,
        name="a.yaml",
    )
    b = load(
        tmp_path,
        """
        fixed: {backend: redis, concurrency: 2}
        matrix:
          heartbeat: [0.0]
          pool: [threads, solo]
    """,
        name="b.yaml",
    )
    ids_a = {c.cell_id: dict(c.values) for c in expand(a)}
    ids_b = {c.cell_id: dict(c.values) for c in expand(b)}
    assert ids_a == ids_b
    assert len(ids_a) == 2


def test_different_values_different_ids(tmp_path):
    exp = load(
        tmp_path,
        """
        matrix:
          pool: [prefork, threads, gevent]
          params.rate: [1, 2]
          celery.task_acks_late: [false, true]
    """,
    )
    cells = expand(exp)
    assert len({c.cell_id for c in cells}) == len(cells) == 12


def test_ids_normalise_values_before_hashing():
    base = dict(DEFAULTS)
    assert cell_id("throughput", {**base, "heartbeat": 0}) == cell_id("throughput", {**base, "heartbeat": 0.0})
    # params are normalised by the workload's model: rate is a float
    assert cell_id("throughput", {**base, "params.rate": 5}) == cell_id("throughput", {**base, "params.rate": 5.0})
    assert cell_id("throughput", base) != cell_id("other", base)
    assert cell_id("throughput", {**base, "celery.task_acks_late": True}) != cell_id(
        "throughput", {**base, "celery.task_acks_late": 1}
    )


# ---------------------------------------------------------------- --only


@pytest.fixture
def grid(tmp_path):
    return expand(
        load(
            tmp_path,
            """
        fixed: {heartbeat: 0}
        matrix:
          broker: [redis, rabbitmq]
          pool: [threads, gevent]
          concurrency: [4, 40]
    """,
        )
    )


def pick(cells, glob):
    return [(c.values["broker"], c.values["pool"], c.values["concurrency"]) for c in cells_for_only(cells, glob)]


def test_only_by_dimension_value(grid):
    assert pick(grid, "pool=gevent") == [
        ("redis", "gevent", 4),
        ("redis", "gevent", 40),
        ("rabbitmq", "gevent", 4),
        ("rabbitmq", "gevent", 40),
    ]


def test_only_with_several_globs_that_must_all_match(grid):
    assert pick(grid, "pool=gevent,concurrency=4") == [("redis", "gevent", 4), ("rabbitmq", "gevent", 4)]
    assert pick(grid, "broker=rabbit*, pool=threads, concurrency=4*") == [
        ("rabbitmq", "threads", 4),
        ("rabbitmq", "threads", 40),
    ]


def test_only_by_cell_id_glob(grid):
    target = grid[5]
    assert cells_for_only(grid, target.cell_id) == [target]
    assert cells_for_only(grid, target.cell_id[:6] + "*") == [target]


def test_only_accepts_integral_floats_written_as_ints(grid):
    assert len(cells_for_only(grid, "heartbeat=0")) == 8
    assert len(cells_for_only(grid, "heartbeat=0.0")) == 8


def test_only_matching_nothing(grid):
    assert cells_for_only(grid, "pool=solo") == []
    assert cells_for_only(grid, "pool=gevent,broker=kafka") == []


def test_workload_params_are_cell_values_and_change_the_id(tmp_path):
    def exp(tasks):
        path = tmp_path / f"e{tasks}.yaml"
        path.write_text(
            f"name: t\nworkload: {{name: throughput, params: {{tasks: {tasks}}}}}\n"
            "matrix: {pool: [solo], params.payload_bytes: [8]}\n"
        )
        return load_experiment(path)

    (a,), (b,) = expand(exp(10)), expand(exp(20))
    assert dict(a.values) == cell(pool="solo", params_tasks=10, params_payload_bytes=8)
    assert a.cell_id != b.cell_id  # a resumed sweep must not take tasks=10 runs for tasks=20 ones


def test_a_zip_list_may_repeat_a_value_when_the_tuples_differ(tmp_path):
    exp = load(
        tmp_path,
        """
        zip:
          - {broker: [redis, rabbitmq, rabbitmq], backend: [redis, none, postgres]}
    """,
    )
    assert [(c.values["broker"], c.values["backend"]) for c in expand(exp)] == [
        ("redis", "redis"),
        ("rabbitmq", "none"),
        ("rabbitmq", "postgres"),
    ]


def test_rabbitmq_quorum_is_rabbitmq_with_quorum_queues_and_keeps_its_cell_ids():
    """``rabbitmq-quorum`` became an alias of ``{broker: rabbitmq, queue_type: quorum}`` after its
    cells had ids: its cells keep them (their stored runs resume and compare), and read as quorum."""
    old = {k: v for k, v in cell(broker="rabbitmq-quorum").items() if k not in ("queue_type", "delivery_limit")}
    # The id cmx gave these values before the queue_type dimension (computed on main, f7dddc2).
    assert cell_id("throughput", old) == "a3ae6a035519"
    assert cell_id("throughput", cell(broker="rabbitmq-quorum")) == "a3ae6a035519"
    assert cell_id("throughput", cell(broker="rabbitmq-quorum", queue_type="quorum")) == "a3ae6a035519"
    # Its values say what ran; classic on plain rabbitmq keeps its id too, quorum there is a new cell.
    assert normalise_values("throughput", cell(broker="rabbitmq-quorum"))["queue_type"] == "quorum"
    plain = {k: v for k, v in cell(broker="rabbitmq").items() if k not in ("queue_type", "delivery_limit")}
    assert cell_id("throughput", cell(broker="rabbitmq")) == cell_id("throughput", plain)
    assert cell_id("throughput", cell(broker="rabbitmq", queue_type="quorum")) not in (
        cell_id("throughput", plain),
        "a3ae6a035519",
    )
    assert cell_id("throughput", cell(broker="rabbitmq", queue_type="quorum", delivery_limit=5)) != cell_id(
        "throughput", cell(broker="rabbitmq", queue_type="quorum")
    )
