"""Hostile and careless experiment files are refused fast, at their line and column (issue #14).

Each case of the issue has a test: the refusal is an InputError (exit 2) whose message points at
the offending place, and it comes in bounded time: CPU seconds of this process, not wall time, so
that a machine loaded by other work does not fail it (before these checks each case took 20 s or
more, or exhausted memory, or printed a traceback).
"""

import re
import time

import pytest

from cmx.engine import limits
from cmx.engine.errors import InputError
from cmx.engine.model.load import load_experiment

HEAD = "name: t\nworkload: {name: throughput}\n"
BOUND_S = 5.0


def refused(tmp_path, text: str | bytes, max_cells: int = limits.DEFAULT_MAX_CELLS) -> list[str]:
    path = tmp_path / "exp.yaml"
    if isinstance(text, str):
        text = text.encode()
    path.write_bytes(text)
    started = time.process_time()
    with pytest.raises(InputError) as info:
        load_experiment(path, max_cells=max_cells)
    elapsed = time.process_time() - started
    assert elapsed < BOUND_S, f"took {elapsed:.1f} CPU-s"
    assert info.value.exit_code == 2
    messages = [str(p) for p in info.value.problems]
    for message in messages:
        assert message.startswith(f"{path}:"), message
    return messages


def at(messages: list[str], line: int, col: int | None = None) -> str:
    """The one message, checked to be at LINE (and COL)."""
    [message] = messages
    where = re.match(r".*?:(\d+):(\d+): ", message)
    assert where, message
    assert int(where.group(1)) == line, message
    if col is not None:
        assert int(where.group(2)) == col, message
    return message


def test_alias_bomb(tmp_path):
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    message = at(refused(tmp_path, HEAD + "description: x\n" + "\n".join(lines) + "\n"), 8)
    assert "aliases" in message


def test_recursive_alias(tmp_path):
    assert "recursive" in at(refused(tmp_path, HEAD + "fixed: {celery.x: &a [*a]}\n"), 3)


def test_ten_to_the_eleven_cells(tmp_path):
    dims = [
        "concurrency",
        "prefetch_multiplier",
        "machines",
        "params.tasks",
        "params.payload_bytes",
        "celery.task_default_priority",
        "celery.task_soft_time_limit",
        "celery.result_expires",
        "celery.broker_pool_limit",
        "celery.worker_max_tasks_per_child",
        "celery.task_time_limit",
    ]
    body = "matrix:\n" + "".join(f"  {d}: [{', '.join(str(i) for i in range(1, 11))}]\n" for d in dims)
    message = at(refused(tmp_path, HEAD + body), 4, 3)
    assert "100,000,000,000 cells" in message and "--max-cells" in message


def test_cells_counted_with_zip_and_include(tmp_path):
    body = (
        "matrix: {concurrency: [1, 2, 3, 4, 5]}\n"
        "zip:\n  - {pool: [solo, threads, gevent], prefetch_multiplier: [1, 2, 3]}\n"
        "include:\n  - {concurrency: 7}\n"
    )
    assert "16 cells, over the limit of 15" in refused(tmp_path, HEAD + body, max_cells=15)[0]
    path = tmp_path / "exp.yaml"
    assert len(load_experiment(path, max_cells=16).matrix["concurrency"]) == 5  # raising the cap works


def test_nul_byte(tmp_path):
    assert "NUL" in at(refused(tmp_path, b"name: t\nworkload: {name: thr\0oughput}\n"), 2, 21)


@pytest.mark.parametrize("char", ["\x01", "\x07", "\x1b", "\x7f", "\x9b"])
def test_control_characters(tmp_path, char):
    message = at(refused(tmp_path, HEAD + f"description: a{char}b\n"), 3, 15)
    assert f"U+{ord(char):04X}" in message


def test_not_utf8(tmp_path):
    assert "not UTF-8" in at(refused(tmp_path, HEAD.encode() + b"description: \xff\n"), 3, 14)


@pytest.mark.parametrize("style", ["flow", "block"])
def test_deep_nesting(tmp_path, style):
    if style == "flow":
        body = "fixed: {celery.x: " + "[" * 100_000 + "]" * 100_000 + "}\n"
    else:
        body = "fixed:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 200))
    message = refused(tmp_path, HEAD + body)[0]
    # cmx's own depth bound, or PyYAML's (6.0.4 and later stop flow nesting in the scanner first)
    assert "levels deep" in message or "maximum nesting depth" in message, message
    assert message.startswith(str(tmp_path / "exp.yaml") + ":"), message


def test_zip_of_an_empty_mapping(tmp_path):
    assert "zip #1 must be a non-empty mapping" in at(refused(tmp_path, HEAD + "zip: [{}]\n"), 3, 7)


@pytest.mark.parametrize(
    "body, line, col, words",
    [
        ("zip: [[]]\n", 3, 7, "zip #1 must be"),
        ("zip: {a: 1}\n", 3, 6, "zip must be a list"),
        ("zip: [{pool: solo}]\n", 3, 14, "must be a list of values"),
        ("matrix: [1, 2]\n", 3, 9, "matrix must be a mapping"),
        ("include: [{}]\n", 3, 11, "include #1 must be a non-empty"),
        ("exclude: 3\n", 3, 10, "exclude must be a list"),
        ("fixed: {celery.worker_log_format: {a: 1}}\n", 3, 35, "celery.worker_log_format: Celery takes a string"),
        ("repeats: 2001-13-45\n", 3, 10, "not one"),
        ("repeats: " + "9" * 5000 + "\n", 3, 10, "5000 digits"),
    ],
)
def test_odd_shapes(tmp_path, body, line, col, words):
    messages = refused(tmp_path, HEAD + body)
    assert any(words in m for m in messages), messages
    assert any(f":{line}:{col}: " in m for m in messages), messages


def test_repeats_bound(tmp_path):
    message = at(refused(tmp_path, HEAD + "repeats: 1000000000000\n"), 3, 10)
    assert "repeats" in message and str(limits.MAX_REPEATS) in message.replace(",", "")


def test_concurrency_bound(tmp_path):
    message = at(refused(tmp_path, HEAD + "matrix: {concurrency: [4, 100000000000]}\n"), 3, 27)
    assert "concurrency 100,000,000,000 is over the limit of 10,000" in message


def test_tasks_bound(tmp_path):
    text = "name: t\nworkload: {name: throughput, params: {tasks: 1000000000000000}}\n"
    message = at(refused(tmp_path, text), 2, 46)
    assert "params.tasks 1,000,000,000,000,000 is over the limit" in message


@pytest.mark.parametrize(
    "body, words",
    [
        ("fixed: {params.payload_bytes: 1000000000000}\n", "params.payload_bytes"),
        ("matrix: {heartbeat: [10, 1000000]}\n", "heartbeat"),
        ("limits: {run_timeout: 1000h}\n", "run_timeout"),
        ("limits: {warmup: 3000000}\n", "warmup"),
    ],
)
def test_sizes_and_durations_bounded(tmp_path, body, words):
    assert words in at(refused(tmp_path, HEAD + body), 3)


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", ".NaN", "1.0e+400"])
def test_non_finite_numbers(tmp_path, value):
    message = at(refused(tmp_path, HEAD + f"limits: {{run_timeout: {value}}}\n"), 3, 23)
    assert "finite" in message


def test_non_finite_in_a_matrix(tmp_path):
    assert "finite" in at(refused(tmp_path, HEAD + "matrix: {heartbeat: [1, .inf]}\n"), 3, 25)


def test_twenty_megabyte_file(tmp_path):
    big = HEAD + "description: " + "x" * 20_000_000 + "\n"
    message = at(refused(tmp_path, big), 1, 1)
    assert "20,000,0" in message and "over the limit" in message


def test_many_problems_are_capped(tmp_path):
    body = "".join(f"key{i}: {i}\n" for i in range(10_000))
    messages = refused(tmp_path, HEAD + body)
    assert len(messages) == limits.MAX_PROBLEMS + 1 and "more problems" in messages[-1]


def test_values_within_bounds_still_load(tmp_path):
    path = tmp_path / "ok.yaml"
    path.write_text(HEAD + "repeats: 1000\nmatrix: {concurrency: [1, 10000]}\nlimits: {run_timeout: 24h}\n")
    exp = load_experiment(path)
    assert (exp.repeats, exp.matrix["concurrency"], exp.limits.run_timeout) == (1000, [1, 10000], 86400.0)
