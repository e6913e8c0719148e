"""The drivers dimension: shares add up, and a workload whose driver cannot be split says so at
validation (one line naming the file, line and column)."""

import textwrap

import pytest
from hypothesis import given, strategies as st

from cmx.engine.model.cells import expand
from cmx.engine.model.load import load_experiment
from cmx.workloads.drive.drivers import share
from tests.conftest import problems


@given(st.integers(min_value=0, max_value=10**6), st.integers(min_value=1, max_value=100))
def test_the_shares_add_up_and_differ_by_at_most_one(total, drivers):
    parts = [share(total, i, drivers) for i in range(drivers)]
    assert sum(parts) == total
    assert max(parts) - min(parts) <= 1


def _write(tmp_path, body: str) -> str:
    path = tmp_path / "exp.yaml"
    path.write_text(textwrap.dedent(body))
    return str(path)


@pytest.mark.parametrize(
    "workload, params, line",
    [
        ("io_chord", "{}", 4),
        ("memory_fanout", "{subtasks: 2}", 4),
        ("throughput", "{via: raw}", 4),
        ("throughput", "{mode: ramp}", 4),
    ],
)
def test_a_driver_that_cannot_be_split_is_refused_where_drivers_is_set(tmp_path, workload, params, line):
    path = _write(
        tmp_path,
        f"""\
        name: d
        workload: {{name: {workload}, params: {params}}}
        matrix:
          drivers: [1, 2]
        """,
    )
    found = problems(path)
    assert len(found) == 1, found
    assert found[0].startswith(f"{path}:{line}:")
    assert "drivers: 2" in found[0] and "use drivers: 1" in found[0]


@pytest.mark.parametrize("params", ["{tasks: 10}", "{tasks: 10, mode: stream, rate: 50}"])
def test_throughput_through_celery_splits(tmp_path, params):
    path = _write(
        tmp_path,
        f"""\
        name: d
        workload: {{name: throughput, params: {params}}}
        matrix:
          drivers: [1, 2]
        """,
    )
    assert [c.values["drivers"] for c in expand(load_experiment(path))] == [1, 2]


def test_drivers_beyond_the_inventorys_group_are_refused_where_drivers_is_set(tmp_path):
    from cmx.cli.checks import check_against_inventory
    from cmx.engine.errors import InputError
    from cmx.engine.hosts.inventory import load_inventory
    from cmx.engine.paths import BUILTIN_INVENTORY

    path = _write(
        tmp_path,
        """\
        name: d
        workload: {name: throughput, params: {tasks: 10}}
        matrix:
          drivers: [1, 2]
        """,
    )
    exp = load_experiment(path)
    with pytest.raises(InputError) as info:
        check_against_inventory(exp, expand(exp), load_inventory(BUILTIN_INVENTORY, tmp_path))
    [problem] = [str(p) for p in info.value.problems]
    assert problem.startswith(f"{path}:4:") and "drivers: 2 asks for more hosts than group 'drivers'" in problem
