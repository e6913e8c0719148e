"""Help and small tables that read as a new user expects (issue 51): no `<bool>` beside a flag, a
usage line in capitals, `cmx --help` not cut at "Example:", a profile's runtimes in units.
In process (typer's runner), under 1 s each but the profile (DuckDB reads its Parquet: about 1 s)."""

from __future__ import annotations

from typer.testing import CliRunner

from cmx.cli.main import app
from cmx.engine.replay import capture
from tests.unit.test_init_from_profile import rows


def _help(*args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], prog_name="cmx", env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    return result.output


def test_flags_show_no_type_and_the_sql_line_is_whole():
    top = _help()
    assert "<bool>" not in top
    sql = next(line for line in top.splitlines() if "│ sql " in line)
    assert "Run any SQL over the results database" in sql and "Example:" not in sql
    assert "<bool>" not in _help("compare") and "<bool>" not in _help("run")


def test_usage_names_arguments_in_capitals():
    assert "Usage: cmx profile show [OPTIONS] FILE" in _help("profile", "show")
    assert "Usage: cmx compare [OPTIONS] BASELINE CONTENDER" in _help("compare")


def test_profile_show_labels_its_runtimes(tmp_path):
    path = tmp_path / "p.parquet"
    capture.write_profile(rows(), path)
    result = CliRunner().invoke(app, ["profile", "show", str(path)], prog_name="cmx", env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    fast = next(line for line in result.output.splitlines() if "app.fast" in line)
    assert "100 ms" in fast and "40.00/s" in fast and "0.1000" not in fast
    assert "runtime p50" in result.output
