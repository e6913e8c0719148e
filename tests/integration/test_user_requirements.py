"""`workload.requirements`: a package the user's tasks need, absent from the controller's venv,
downloaded into the wheelhouse, installed from it on the controller and unpacked into the hosts' venv by
the python_env role."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, cmx, query, write

pytestmark = pytest.mark.integration

MODULE = '''
import json
import os
import sys

import humanize  # only the hosts have it: workload.requirements
from celery import shared_task


@shared_task
def say(folder, n):
    with open(os.path.join(folder, "calls.jsonl"), "a") as out:
        out.write(json.dumps({"text": humanize.intcomma(n), "prefix": sys.prefix,
                              "version": humanize.__version__}) + "\\n")
'''


def test_requirements_reach_the_hosts_venv(tmp_path):
    with pytest.raises(ImportError):
        __import__("humanize")  # the point: the controller does not have it
    calls, host = tmp_path / "calls", tmp_path / "host"
    calls.mkdir()
    inventory = (
        (REPO / "inventory" / "local.yml").read_text().replace("  vars:\n", f"  vars:\n    cmx_workdir: {host}\n", 1)
    )  # a venv of this test's own
    inv = write(tmp_path / "inv.yml", inventory)
    write(tmp_path / "project" / "saytasks.py", MODULE)
    exp = write(
        tmp_path / "project" / "req.yaml",
        f"""
        name: requirements
        workload:
          name: tasks
          params: {{module: saytasks.py, task: saytasks.say, args: ["{calls}", 12345], tasks: 10}}
          requirements: [humanize==4.17.0]
        fixed: {{pool: threads, broker: redis}}
        limits: {{run_timeout: 1m}}
    """,
    )
    db = tmp_path / "results" / "cmx.duckdb"
    proc = cmx("run", str(exp), "--inventory", str(inv), "--db", str(db))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    lines = [json.loads(line) for line in (calls / "calls.jsonl").read_text().splitlines()]
    assert len(lines) == 10 and {(x["text"], x["version"]) for x in lines} == {("12,345", "4.17.0")}
    assert {x["prefix"] for x in lines} == {str(host / "venv")}
    assert query(db, "SELECT status FROM runs") == [("ok",)]
    assert list((host / "venv").glob("lib/python*/site-packages/humanize-4.17.0.dist-info"))  # shipped, installed
