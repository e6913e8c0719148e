"""`cmx workloads`: built-ins and user workload classes with each param's type, default, description."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cmx.cli.catalog import builtins, discover
from cmx.workloads.catalog import registry

REPO = Path(__file__).resolve().parents[2]

USER = '''
from pydantic import Field
from cmx.workloads.catalog.base import Workload, WorkloadParams


class P(WorkloadParams):
    size: int = Field(3, ge=1, description="how big")


class Mine(Workload):
    """Mine: a test workload."""
    Params = P

    def register_tasks(self, app):
        pass

    def drive(self, ctx, params):
        pass
'''


def test_every_builtin_is_listed_with_its_params():
    entries = {e.name: e for e in builtins()}
    assert sorted(entries) == registry.names()
    tasks = {p.name: p for p in entries["tasks"].params}
    assert tasks["task"].default == "(required)" and tasks["mode"].type == "backlog|stream"
    assert tasks["tasks"].type == "int" and tasks["tasks"].default == "100" and tasks["tasks"].description


def test_user_classes_are_found_and_broken_files_named(tmp_path):
    (tmp_path / "mine.py").write_text(USER)
    (tmp_path / "broken.py").write_text("from cmx.workloads.catalog.base import Workload\nraise RuntimeError('nope')\n")
    (tmp_path / "plain.py").write_text("x = 1\n")
    found, problems = discover(tmp_path)
    assert [(e.name, e.doc, [(p.name, p.type, p.default, p.description) for p in e.params]) for e in found] == [
        ("./mine.py:Mine", "Mine: a test workload.", [("size", "int", "3", "how big")])
    ]
    assert len(problems) == 1 and "broken.py" in problems[0] and "RuntimeError: nope" in problems[0]


def test_cmx_workloads_prints_them(tmp_path):
    (tmp_path / "mine.py").write_text(USER)
    proc = subprocess.run(
        [sys.executable, "-m", "cmx.cli.main", "workloads", "--dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 0, proc.stderr
    for name in [*registry.names(), "./mine.py:Mine", "payload_bytes", "how big"]:
        assert name in proc.stdout


def test_a_users_file_with_the_earlier_documented_import_still_works(tmp_path):
    """Earlier releases documented ``from cmx.workloads.base import Workload, WorkloadParams`` (the
    module moved into the catalog's folder): a user's file written so is still found and runs."""
    (tmp_path / "mine.py").write_text(USER.replace("cmx.workloads.catalog.base", "cmx.workloads.base"))
    assert "from cmx.workloads.base import" in (tmp_path / "mine.py").read_text()
    found, problems = discover(tmp_path)
    assert problems == [] and [e.name for e in found] == ["./mine.py:Mine"]
    import cmx.workloads.base as old
    import cmx.workloads.catalog.base as new

    assert old is new
