"""Property-based tests (hypothesis) of the two kinds of user input: experiment files and
inventories (issue #14). Whatever the file holds, cmx answers in bounded time with either a valid
result or a clean input error (InputError, exit 2) whose every message locates the problem:
FILE:LINE:COL for experiment files, the file plus host and variable for inventory values.

Over 500 generated cases per run (validation driven in-process, for speed), plus a few through the
real CLI. Fixed seed-free but derandomized, so CI is reproducible and a failure replays."""

from __future__ import annotations

import json
import os
import random
import re
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cmx.engine import limits
from cmx.engine.errors import InputError
from cmx.engine.model.load import load_experiment
from cmx.engine.hosts.inventory import GROUPS, load_inventory
from cmx.engine.hosts.invvars import VARIABLES
from cmx.engine.model.cells import expand
from cmx.engine.plan.planner import plan_json
from tests.conftest import REPO, cmx

BOUND_S = 10.0  # per file, generous: the machine is shared and loaded; a hang would be far over
# CI draws the same cases every time (reproducible); CMX_HYPOTHESIS_EXPLORE=N draws N times as many
# fresh ones, to look for new failures.
EXPLORE = int(os.environ.get("CMX_HYPOTHESIS_EXPLORE", "0"))
SETTINGS = dict(
    deadline=None,
    database=None,
    derandomize=not EXPLORE,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
MORE_NOTE = "... and maybe more problems"

# ------------------------------------------------------------------ experiment files

DIMENSIONS = [
    "broker",
    "backend",
    "pool",
    "concurrency",
    "prefetch_multiplier",
    "heartbeat",
    "machines",
    "params.tasks",
    "params.payload_bytes",
    "params.mode",
    "params.rate",
    "params.nope",
    "celery.task_acks_late",
    "celery.worker_prefetch_multiplier",
    "celery.nope",
    "worker.gossip",
    "nonsense",
    "",
]
WORDS = [
    "redis",
    "rabbitmq",
    "rabbitmq-quorum",
    "none",
    "rpc",
    "postgres",
    "prefork",
    "threads",
    "gevent",
    "eventlet",
    "solo",
    "backlog",
    "stream",
    "celery",
    "raw",
    "throughput",
    "memory_fanout",
    "10m",
    "5s",
    "250ms",
    "1h30m",
    "-1",
    "yes",
    "off",
    "~",
    ".inf",
    "2001-12-14",
    "0x1F",
    "1_000",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-2, max_value=40),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(WORDS),
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
)
keys = st.one_of(st.sampled_from(DIMENSIONS), st.text(max_size=8), st.integers(-3, 3))
values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=3), max_leaves=12
)
dimension_values = st.lists(st.one_of(scalars, st.sampled_from(WORDS)), max_size=5)
dim_maps = st.dictionaries(st.sampled_from(DIMENSIONS), st.one_of(dimension_values, values), max_size=4)

documents = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.just("prop"), scalars),
        "description": scalars,
        "repeats": st.one_of(st.integers(-1, 5), st.integers(10**6, 10**15), scalars),
        "workload": st.one_of(
            st.fixed_dictionaries(
                {"name": st.sampled_from(["throughput", "concurrent_sleep", "memory_fanout", "nope"])},
                optional={
                    "params": st.one_of(
                        st.dictionaries(
                            st.sampled_from(
                                ["tasks", "payload_bytes", "mode", "rate", "sleep_s", "subtasks", "size_mb", "x"]
                            ),
                            values,
                            max_size=3,
                        ),
                        values,
                    )
                },
            ),
            values,
        ),
        "fixed": st.one_of(dim_maps, values),
        "matrix": st.one_of(dim_maps, values),
        "zip": st.one_of(st.lists(st.one_of(dim_maps, values), max_size=3), values),
        "exclude": st.one_of(st.lists(st.one_of(dim_maps, values), max_size=3), values),
        "include": st.one_of(st.lists(st.one_of(dim_maps, values), max_size=3), values),
        "limits": st.one_of(
            st.dictionaries(
                st.sampled_from(["run_timeout", "warmup", "x"]),
                st.one_of(scalars, st.sampled_from(["10m", "5s", ".inf"])),
                max_size=2,
            ),
            values,
        ),
        "on_error": st.one_of(st.sampled_from(["continue", "abort"]), scalars),
        "extra": values,
    },
)

# Characters that matter to YAML, plus control characters and non-ASCII.
YAML_CHARS = list("abcnt01:-[]{},&*!|>'\"#%@?.~ \n\n\n\t\\") + ["\x00", "\x07", "\x1b", "\u2028", "\ufeff", "é", "€"]
raw_texts = st.text(st.sampled_from(YAML_CHARS), max_size=300)
BASE = (REPO / "experiments" / "quickstart.yaml").read_text()


def _dump(doc: dict, flow: bool) -> str:
    return yaml.safe_dump(doc, allow_unicode=True, default_flow_style=flow, sort_keys=False)


def check_experiment(path: Path) -> None:
    """The property: a valid experiment that expands within the cap, or an InputError whose every
    problem is at FILE:LINE:COL of this file; either way in bounded time."""
    started = time.perf_counter()
    try:
        exp = load_experiment(path)
    except InputError as exc:
        assert exc.exit_code == 2 and exc.problems
        for index, problem in enumerate(exc.problems):
            assert "\n" not in str(problem), str(problem)
            if problem.message.startswith(MORE_NOTE):
                assert index == len(exc.problems) - 1
                continue
            assert problem.file == str(path), str(problem)
            assert isinstance(problem.line, int) and problem.line >= 1, str(problem)
            assert isinstance(problem.col, int) and problem.col >= 1, str(problem)
    else:
        cells = expand(exp)
        assert 1 <= len(cells) <= limits.DEFAULT_MAX_CELLS
        json.dumps(plan_json(exp, cells))
    assert time.perf_counter() - started < BOUND_S


@settings(max_examples=200 * max(1, EXPLORE), **SETTINGS)
@given(doc=documents, flow=st.booleans())
def test_structured_experiment_files(tmp_path, doc, flow):
    path = tmp_path / "exp.yaml"
    path.write_text(_dump(doc, flow), encoding="utf-8")
    check_experiment(path)


@settings(max_examples=120 * max(1, EXPLORE), **SETTINGS)
@given(text=raw_texts, head=st.booleans())
def test_arbitrary_text(tmp_path, text, head):
    path = tmp_path / "exp.yaml"
    path.write_text(("name: t\nworkload: {name: throughput}\n" if head else "") + text, encoding="utf-8")
    check_experiment(path)


@settings(max_examples=120 * max(1, EXPLORE), **SETTINGS)
@given(at=st.integers(0, len(BASE)), cut=st.integers(0, 12), insert=raw_texts.map(lambda t: t[:20]))
def test_edits_of_a_valid_file(tmp_path, at, cut, insert):
    path = tmp_path / "exp.yaml"
    path.write_text(BASE[:at] + insert + BASE[at + cut :], encoding="utf-8")
    check_experiment(path)


@settings(max_examples=30 * max(1, EXPLORE), **SETTINGS)
@given(data=st.binary(max_size=200))
def test_arbitrary_bytes(tmp_path, data):
    path = tmp_path / "exp.yaml"
    path.write_bytes(b"name: t\n" + data)
    check_experiment(path)


# ------------------------------------------------------------------ inventories

URL_PARTS = [
    "redis://",
    "rediss://",
    "amqp://",
    "postgresql://",
    "http://",
    ":pw@",
    "user:pa:ss@",
    "[::1",
    "[::1]",
    "127.0.0.1",
    "localhost",
    ":6379",
    ":99999",
    ":-1",
    ":abc",
    "/0",
    "//",
    "?x=1",
    "#f",
    " ",
    "%zz",
    "@",
    "[",
    "]",
]
urlish = st.lists(st.sampled_from(URL_PARTS), min_size=0, max_size=5).map("".join)
var_values = st.one_of(
    urlish,
    st.lists(urlish, max_size=3),
    scalars,
    st.dictionaries(st.text(max_size=4), scalars, max_size=2),
    st.integers(-5, 70000).map(str),
)
host_vars = st.dictionaries(st.sampled_from(sorted(VARIABLES)), var_values, max_size=3)


def check_inventory(path: Path) -> None:
    started = time.perf_counter()
    try:
        inv = load_inventory(path, secrets_dir=path.parent / "results")
    except InputError as exc:
        [problem] = exc.problems
        text = str(problem)
        assert "\n" not in text and problem.file is not None, text
        located = re.match(r"host '[^']*': (\S+) ", problem.message)
        if located:
            assert located.group(1) in VARIABLES, text
        else:  # a YAML problem: at its line and column
            assert problem.line and problem.col, text
    else:
        for variables in inv.hostvars.values():
            for name, value in variables.items():
                assert type(value) in (str, int, list), (name, type(value))
                assert all(type(v) is str for v in value) if isinstance(value, list) else True
    assert time.perf_counter() - started < BOUND_S


@settings(max_examples=150 * max(1, EXPLORE), **SETTINGS)
@given(broker=host_vars, worker=host_vars, group_vars=host_vars)
def test_inventories(tmp_path, broker, worker, group_vars):
    doc = {
        "all": {
            "vars": {"ansible_connection": "local"},
            "children": {
                "brokers": {"hosts": {"b1": broker}},
                "workers": {"hosts": {"w1": worker}},
                "drivers": {"hosts": {"w1": None}},
            },
        }
    }
    path = tmp_path / "inventory"
    (path / "group_vars").mkdir(parents=True, exist_ok=True)
    (path / "hosts.yml").write_text(_dump(doc, False), encoding="utf-8")
    (path / "group_vars" / "workers.yml").write_text(_dump(group_vars, False), encoding="utf-8")
    check_inventory(path)


def test_inventory_groups_are_the_known_ones():
    assert set(GROUPS) >= {"brokers", "workers", "drivers"}  # the generated inventories use these


# ------------------------------------------------------------------ through the real CLI


@pytest.mark.parametrize("seed", range(6))
def test_cli_answers_generated_files(tmp_path, seed):
    """A few generated files through `cmx validate` itself: exit 0 or 2, no traceback, every line located."""
    rng = random.Random(seed)  # plain seeded choices: hypothesis' draws do not mix with subprocesses well
    doc = {
        "name": "cli",
        "workload": {"name": rng.choice(["throughput", "nope", 7])},
        "matrix": {rng.choice(DIMENSIONS): [rng.choice(WORDS + [1, 10**12, None, True]) for _ in range(3)]},
        rng.choice(["zip", "include", "limits", "repeats"]): rng.choice(
            [[{}], {"run_timeout": ".inf"}, 10**13, [{"pool": "solo"}], "x"]
        ),
    }
    text = _dump(doc, rng.random() < 0.5)
    if seed % 3 == 2:
        text = (
            text[: rng.randrange(len(text))]
            + rng.choice(["\x00", "[", ": :", "&a *b"])
            + text[rng.randrange(len(text)) :]
        )
    path = tmp_path / "exp.yaml"
    path.write_text(text, encoding="utf-8")
    proc = cmx("validate", str(path), timeout=120)
    assert proc.returncode in (0, 2), proc.stderr
    assert "Traceback" not in proc.stderr
    for line in proc.stderr.strip().splitlines():
        assert line.startswith(f"{path}:") and (
            re.match(rf"^{re.escape(str(path))}:\d+:\d+: ", line) or MORE_NOTE in line or "host '" in line
        ), line
