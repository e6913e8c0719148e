"""The dimension registry (workloads/vocab/dimensions.py) drives every consumer: validation, expansion,
the JSON Schema, the ``runs`` columns, the run spec, the worker's command line and config, and
the Celery settings a file may not set. And adding a dimension is one entry there."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cmx.engine.model.cells import expand
from cmx.engine.model.load import load_experiment
from cmx.engine.model.schema import experiment_schema
from cmx.engine.results import db
from cmx.workloads.vocab import dimensions
from cmx.workloads.vocab.dimensions import DIMENSIONS, ON_HOSTS, WORKER_FLAGS, worker_argv, worker_config
from cmx.workloads.host import hostctl
from cmx.workloads.runtime.spec import OWNED_SETTINGS, RunSpec
from tests.conftest import problems

REPO = Path(__file__).resolve().parents[2]
HEAD = "name: dims\nworkload: {name: throughput, params: {tasks: 10}}\n"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(HEAD + text)
    return path


def spec(**values) -> RunSpec:
    return RunSpec(run_id="r1", experiment="e", cell_id="c", repeat=1, workload="throughput", **values)


def test_the_pool_list_is_written_once():
    """The registry is the only place that lists the pools (or any dimension's choices)."""
    needle = '"prefork", "threads", "gevent", "eventlet", "solo"'
    hits = [
        p.relative_to(REPO)
        for folder in ("engine", "workloads", "analysis")
        for p in (REPO / folder).rglob("*.py")
        if needle in p.read_text()
    ]
    assert hits == [Path("workloads/vocab/pools.py")]  # the vocabulary; the dimension reads it there


def test_every_cell_has_every_dimension_at_its_default(tmp_path):
    (cell,) = expand(load_experiment(write(tmp_path, "")))
    assert {d.name: cell.values[d.name] for d in DIMENSIONS} == {d.name: d.default for d in DIMENSIONS}


@pytest.mark.parametrize("d", DIMENSIONS, ids=lambda d: d.name)
def test_validation_takes_what_the_entry_allows(tmp_path, d):
    good = {"choice": list(d.choices), "fault": ["none", "kill_worker@2"]}.get(
        d.type, [d.minimum, d.maximum or d.minimum + 30]
    )
    # RabbitMQ's queue types (and a quorum queue's delivery limit) need a broker that has them.
    context = {
        "queue_type": "fixed: {broker: rabbitmq}\n",
        "delivery_limit": "fixed: {broker: rabbitmq, queue_type: quorum}\n",
    }.get(d.name, "")
    exp = load_experiment(write(tmp_path, f"{context}matrix:\n  {d.name}: {json.dumps(good)}\n"))
    assert [c.values[d.name] for c in expand(exp)] == [d.python_type(v) for v in good]

    bad = "kafka" if d.type in ("choice", "fault") else d.minimum - 1
    path = write(tmp_path, f"fixed:\n  {d.name}: {json.dumps(bad)}\n")
    expected = {
        "choice": f"unknown {d.name} 'kafka' (choose from {', '.join(d.choices)})",
        "integer": f"{d.name} must be an integer >= {d.minimum:g}, got {bad}",
        "seconds": f"{d.name} must be a number of seconds >= {d.minimum:g} (0 = off), got {bad}",
        "fault": "unknown fault kind 'kafka' in 'kafka' (known: kill_child, kill_worker, term_worker, "
        "restart_broker, partition_worker, failover_broker, kill_broker_node)",
    }[d.type]
    column = len(f"  {d.name}: ") + 1
    assert problems(path) == [f"{path}:4:{column}: {expected}"]
    if d.maximum is not None:
        path = write(tmp_path, f"fixed:\n  {d.name}: {d.maximum + 1}\n")
        assert problems(path) == [f"{path}:4:{column}: {d.name} {d.maximum + 1:,} is over the limit of {d.maximum:,}"]


def test_the_schema_has_every_dimension_with_its_choices():
    defs = experiment_schema()["$defs"]
    for section in ("cmx_fixed", "cmx_include"):
        props = defs[section]["properties"]
        assert list(props) == [d.name for d in DIMENSIONS]
        for d in DIMENSIONS:
            assert props[d.name]["description"] == d.description
            if d.type == "choice":
                assert props[d.name]["enum"] == list(d.choices)
            elif d.type == "fault":
                assert props[d.name]["pattern"].startswith("^(none|")
            else:
                assert props[d.name]["minimum"] == d.minimum
    assert list(defs["cmx_matrix"]["properties"]) == [d.name for d in DIMENSIONS]


def test_every_dimension_is_a_runs_column_in_registry_order(tmp_path):
    values = {"params.tasks": 10, "celery.task_acks_late": True, **{d.name: d.default for d in reversed(DIMENSIONS)}}
    with db.connect(tmp_path / "r.duckdb") as con:
        db.record_run_start(
            con,
            experiment="e",
            sweep_id="s",
            run_id="r1",
            cell_id="c",
            repeat=1,
            workload="throughput",
            dims=values,
            params={},
            warmup_s=0.0,
        )
        columns = [
            r[0]
            for r in con.execute(
                "SELECT column_name FROM duckdb_columns() WHERE table_name = 'runs' ORDER BY column_index"
            ).fetchall()
        ]
        row = con.execute(f"SELECT {', '.join(d.name for d in DIMENSIONS)} FROM runs").fetchone()
    assert columns == [*db.RUN_COLUMNS, *(d.name for d in DIMENSIONS), "params.tasks", "celery.task_acks_late"]
    assert row == tuple(d.default for d in DIMENSIONS)


def test_the_run_spec_carries_every_dimension_the_hosts_need():
    assert {d.name for d in ON_HOSTS} == {d.name for d in DIMENSIONS if d.reaches != "hosts"}
    for d in ON_HOSTS:
        assert RunSpec.model_fields[d.name].default == d.default
    for d in DIMENSIONS:
        if d.type == "choice":
            with pytest.raises(ValueError):
                spec(**{d.name: "kafka"})


def test_argv_and_config_dimensions_reach_the_worker():
    s = spec(
        pool="gevent",
        concurrency=7,
        prefetch_multiplier=2,
        heartbeat=0.0,
        worker_flags={"events": True, "mingle": True},
    )
    assert worker_argv(s) == ["-P", "gevent", "-c", "7", "--without-gossip", "--without-heartbeat", "-E"]
    assert worker_config(s) == {
        "worker_prefetch_multiplier": 2,
        "broker_heartbeat": 0.0,
        "task_default_queue_type": "classic",
    }
    for d in DIMENSIONS:
        assert (d.argv in worker_argv(s)) == (d.reaches == "argv")
        assert (d.setting in worker_config(s)) == (d.reaches == "config")


def test_hostctl_starts_the_worker_with_the_registry_switches(tmp_path, monkeypatch):
    (tmp_path / "spec.json").write_text(spec(pool="threads", concurrency=3, worker_flags={"gossip": True}).dump())

    class Exited:  # the supervisor ends at once: start_worker reports it and returns 1
        returncode = 1

        def poll(self):
            return 1

    started = []
    monkeypatch.setattr(hostctl, "_spawn", lambda cmd, *a: started.append(cmd) or Exited())
    assert hostctl.start_worker(tmp_path, "h1", ready_timeout=1) == 1
    cmd = (tmp_path / "worker.cmd").read_text().split()
    assert cmd[cmd.index("-P") + 1] == "threads" and cmd[cmd.index("-c") + 1] == "3"
    assert "--without-gossip" not in cmd and "--without-mingle" in cmd and "-E" not in cmd
    assert started[0][started[0].index("--") + 1 :][1:] == cmd


def test_the_settings_a_dimension_owns_are_refused_as_celery_settings(tmp_path):
    owned = [d for d in DIMENSIONS if d.setting] + [f for f in WORKER_FLAGS if f.setting]
    assert owned and all(o.setting in OWNED_SETTINGS for o in owned)
    for d in (d for d in DIMENSIONS if d.setting):
        path = write(tmp_path, f"fixed:\n  celery.{d.setting}: 1\n")
        assert problems(path) == [f"{path}:4:3: celery.{d.setting}: {dimensions.owned_settings()[d.setting]}"]
        assert OWNED_SETTINGS[d.setting].startswith(f"use the {d.name} dimension")


# A dimension that does not exist, added as one entry: every consumer takes it up.
_NEW = (
    '    Dimension("lost_wait", "seconds", 7.5, "config", "seconds a worker waits for a lost child", '
    'setting="worker_lost_wait"),\n'
)
_PROBE = r'''
import importlib.util, json, sys, types
from pathlib import Path

origin = importlib.util.find_spec("cmx.workloads.vocab.dimensions").origin
source = Path(origin).read_text()
anchor = "\n)\n\n#: The dimensions by name"
assert source.count(anchor) == 1
module = types.ModuleType("cmx.workloads.vocab.dimensions")
module.__file__ = origin
sys.modules[module.__name__] = module
exec(compile(source.replace(anchor, "\n" + sys.argv[1].rstrip("\n") + anchor), origin, "exec"), module.__dict__)

import os
from cmx.engine import limits
from cmx.engine.errors import InputError
from cmx.engine.model.cells import expand
from cmx.engine.model.load import load_experiment
from cmx.engine.model.schema import experiment_schema
from cmx.engine.results import db
from cmx.workloads.vocab.dimensions import worker_argv
from cmx.workloads.drive.workerwatch import wanted_config
from cmx.workloads.runtime.spec import OWNED_SETTINGS, RunSpec

tmp = Path(sys.argv[2])  # the test's own tmp_path
head = "name: n\nworkload: {name: throughput, params: {tasks: 10}}\n"
(tmp / "ok.yaml").write_text(head + "matrix: {lost_wait: [1, 2.5]}\n")
(tmp / "bad.yaml").write_text(head + "fixed: {lost_wait: -1, celery.worker_lost_wait: 3}\n")
(tmp / "big.yaml").write_text(head + "fixed: {lost_wait: 1000000}\n")
out = {"cells": [dict(c.values)["lost_wait"] for c in expand(load_experiment(tmp / "ok.yaml"))]}
for name in ("bad", "big"):
    try:
        load_experiment(tmp / f"{name}.yaml")
    except InputError as exc:
        out[name] = [p.message for p in exc.problems]
out["schema"] = experiment_schema()["$defs"]["cmx_matrix"]["properties"]["lost_wait"]["items"]
out["order"] = list(db.BUILTIN_ORDER)
spec = RunSpec(run_id="r", experiment="e", cell_id="c", repeat=1, workload="throughput", lost_wait=4.0)
out["spec"] = json.loads(spec.dump())["lost_wait"]
out["wanted"] = wanted_config(spec).get("lost_wait")
out["argv"] = worker_argv(spec)
out["owned"] = OWNED_SETTINGS.get("worker_lost_wait")
os.environ["CMX_BROKER_URL"] = "memory://"
from cmx.workloads.app.factory import create_app
out["app"] = create_app(spec, tmp, "h").conf.worker_lost_wait
print(json.dumps(out))
'''


def test_a_new_dimension_is_one_entry(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, _NEW, str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["cells"] == [1.0, 2.5]
    assert out["bad"] == [
        "lost_wait must be a number of seconds >= 0 (0 = off), got -1",
        "celery.worker_lost_wait: use the lost_wait dimension",
    ]
    assert out["big"] == ["lost_wait 1,000,000 s is over the limit of 86,400 s"]
    assert out["schema"] == {"type": "number", "minimum": 0, "description": "seconds a worker waits for a lost child"}
    assert out["order"] == [*(d.name for d in DIMENSIONS), "lost_wait"]
    assert out["spec"] == out["wanted"] == out["app"] == 4.0
    assert "-P" in out["argv"] and "4.0" not in out["argv"]
    assert out["owned"] == "use the lost_wait dimension"
