"""Every CLI error is one line and exit 2, usage errors too (issue #14): no box, no traceback."""

import pytest

from tests.conftest import cmx


@pytest.mark.parametrize(
    "args, words",
    [
        (["sql"], "Missing argument 'query'"),
        (["validate", "experiments/quickstart.yaml", "--bogus"], "No such option: --bogus"),
        (["validate", "experiments/quickstart.yaml", "--max-cells", "0"], "--max-cells"),
        (["sql", "SELECT 1", "--format", "xml"], "'xml' is not one of"),
        (["no-such-command"], "No such command"),
    ],
)
def test_usage_errors_are_one_line(args, words):
    proc = cmx(*args, timeout=120)
    assert proc.returncode == 2, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert words in line and "--help" in line, line


def test_plain_cmx_still_shows_help():
    proc = cmx(timeout=120)
    assert proc.returncode == 2 and "Usage" in proc.stdout + proc.stderr


def test_max_cells_raises_the_cap(tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text(
        "name: e\nworkload: {name: throughput}\nmatrix: {params.tasks: [1, 2, 3, 4], concurrency: [1, 2, 3]}\n"
    )
    proc = cmx("plan", str(exp), "--max-cells", "11", timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().endswith("pass --max-cells 12 if you really mean it")
    assert cmx("plan", str(exp), "--max-cells", "12", "--json", timeout=120).returncode == 0
