"""`cmx schema`: every shipped experiment is valid against it, bad files are not, and the
committed copy the experiments point editors at is what `cmx schema` prints."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import jsonschema
import pytest
import yaml

from cmx.engine.errors import InputError
from cmx.engine.model.load import load_experiment
from cmx.engine.model.schema import COMMITTED, experiment_schema, schema_text

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "experiments").rglob("*.yaml"))


@pytest.fixture(scope="module")
def validator():
    schema = experiment_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_there_are_shipped_experiments():
    assert len(SHIPPED) >= 6


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO / "experiments")))
def test_every_shipped_experiment_is_valid_and_names_the_committed_schema(validator, path):
    errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
    assert errors == []
    up = "../" * len(path.relative_to(REPO / "experiments").parts)
    assert path.read_text().splitlines()[0] == f"# yaml-language-server: $schema={up}{COMMITTED}"


def test_the_committed_schema_is_what_cmx_schema_prints():
    printed = subprocess.run(
        [sys.executable, "-m", "cmx.cli.main", "schema"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    ).stdout
    assert printed == schema_text()
    assert (REPO / COMMITTED).read_text() == printed, "run `cmx schema --out docs/cmx.schema.json`"
    assert json.loads(printed)["$schema"] == "https://json-schema.org/draft/2020-12/schema"


GOOD_BASE = """
name: ok
workload: {name: throughput, params: {tasks: 10}}
"""

#: Files `cmx validate` rejects that the schema rejects too: (what is wrong, the file).
BAD = [
    ("unknown top-level key", "name: x\nworkload: {name: throughput}\nrepeat: 3\n"),
    ("missing workload", "name: x\n"),
    ("bad name", "name: '-x'\nworkload: {name: throughput}\n"),
    ("unknown workload", "name: x\nworkload: {name: thruput}\n"),
    ("unknown pool", "name: x\nworkload: {name: throughput}\nmatrix: {pool: [fork]}\n"),
    ("empty dimension", "name: x\nworkload: {name: throughput}\nmatrix: {pool: []}\n"),
    ("matrix value not a list", "name: x\nworkload: {name: throughput}\nmatrix: {pool: threads}\n"),
    ("unknown dimension", "name: x\nworkload: {name: throughput}\nfixed: {pools: threads}\n"),
    ("unknown param of this workload", "name: x\nworkload: {name: throughput}\nmatrix: {params.size_mb: [1]}\n"),
    ("unknown workload param", "name: x\nworkload: {name: throughput, params: {taks: 3}}\n"),
    ("param out of range", "name: x\nworkload: {name: throughput, params: {tasks: 0}}\n"),
    (
        "param of the wrong type in a dimension",
        "name: x\nworkload: {name: concurrent_sleep}\nmatrix: {params.tasks: [a]}\n",
    ),
    ("wrong choice in a workload param", "name: x\nworkload: {name: throughput}\nmatrix: {params.mode: [burst]}\n"),
    ("concurrency below 1", "name: x\nworkload: {name: throughput}\nfixed: {concurrency: 0}\n"),
    ("worker flag not boolean", "name: x\nworkload: {name: throughput}\nfixed: {worker.gossip: 1}\n"),
    ("unknown worker flag", "name: x\nworkload: {name: throughput}\nfixed: {worker.gosip: true}\n"),
    ("bad duration", "name: x\nworkload: {name: throughput}\nlimits: {run_timeout: soon}\n"),
    ("bad on_error", "name: x\nworkload: {name: throughput}\non_error: retry\n"),
    ("repeats below 1", "name: x\nworkload: {name: throughput}\nrepeats: 0\n"),
    ("empty include rule", "name: x\nworkload: {name: throughput}\ninclude: [{}]\n"),
    (
        "tasks workload without module or app: unknown param",
        "name: x\nworkload: {name: tasks, params: {task: a.b, modul: a.py}}\n",
    ),
]


@pytest.mark.parametrize("what,text", BAD, ids=[b[0] for b in BAD])
def test_a_bad_file_is_rejected_by_both_the_schema_and_validate(validator, tmp_path, what, text):
    assert list(validator.iter_errors(yaml.safe_load(text))), what
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError):
        load_experiment(path)


def test_a_good_file_with_every_section_is_accepted(validator):
    doc = yaml.safe_load(
        textwrap.dedent("""
        name: all-sections
        repeats: 2
        workload: {name: tasks, params: {module: m.py, args: [1], kwargs: {a: 1}}}
        fixed: {broker: redis, heartbeat: 0, celery.task_acks_late: true, worker.events: true}
        matrix: {pool: [prefork, threads], params.task: [m.a, m.b], params.args: [[1], [2, 3]]}
        zip: [{concurrency: [1, 4], prefetch_multiplier: [1, 4]}]
        exclude: [{pool: prefork, concurrency: [4]}]
        include: [{pool: gevent, concurrency: 100}]
        limits: {run_timeout: 1h30m, warmup: 250ms}
    """)
    )
    assert [e.message for e in validator.iter_errors(doc)] == []
    user_class = {
        "name": "x",
        "workload": {"name": "./my_workload.py:Chains", "params": {"chains": 3}},
        "matrix": {"params.length": [1, 2]},
    }
    assert [e.message for e in validator.iter_errors(user_class)] == []
