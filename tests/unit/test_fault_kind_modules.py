"""Each fault kind's module (workloads/faults/) holds the facts the stages read and its own blow:
the facts reproduce the tables they replaced, and a worker kind injected through the host's steps
(workloads/host/faultinject.py) hits a real process of the run as before, with the same events and
faults.csv row. (The broker kinds' blows need their servers: tests/faults/.)"""

from __future__ import annotations

import csv
import signal
import subprocess
import sys
import time

import pytest

from cmx.workloads import faults
from cmx.workloads.faults import registry
from cmx.workloads.host import faultinject


def test_the_kinds_facts_are_the_tables_they_replaced():
    assert list(faults.KINDS) == [
        "kill_child",
        "kill_worker",
        "term_worker",
        "restart_broker",
        "partition_worker",
        "failover_broker",
        "kill_broker_node",
    ]
    assert {k: v[0] for k, v in faults.KINDS.items()} == {
        "kill_child": "worker",
        "kill_worker": "worker",
        "term_worker": "worker",
        "restart_broker": "broker",
        "partition_worker": "worker",
        "failover_broker": "driver",
        "kill_broker_node": "broker",
    }
    assert faults.ENDS_WORKER == ("kill_worker", "term_worker")
    assert faults.CUTS_OFF == ("restart_broker", "partition_worker", "failover_broker", "kill_broker_node")
    assert faults.DOWNS_WORKERS == ("kill_broker_node",)
    assert faults.WITH_DURATION == ("partition_worker",)
    assert [k for k, kind in registry.KINDS.items() if kind.needs_place] == ["restart_broker", "kill_broker_node"]
    assert all(kind.injected for kind in registry.KINDS.values())
    assert [k for k, kind in registry.KINDS.items() if kind.takes_target] == [
        "kill_child",
        "kill_worker",
        "term_worker",
        "partition_worker",
        "kill_broker_node",
    ]
    with pytest.raises(ValueError, match="unknown fault kind 'kill_kid'"):
        registry.get("kill_kid")


def test_a_planned_kind_without_a_blow_is_refused_at_validation_and_on_the_host(monkeypatch):
    from cmx.engine.model.faultcheck import cell_problem

    class Planned(faults.FaultKind):
        name = "planned_kind"

    monkeypatch.setitem(registry.KINDS, "planned_kind", Planned())
    assert cell_problem({"broker": "redis", "fault": "planned_kind@1"}) == (
        "fault planned_kind@1: planned_kind is not injected by this cmx yet (supported: kill_child, kill_worker, "
        "term_worker, restart_broker, partition_worker, failover_broker, kill_broker_node)"
    )
    with pytest.raises(faults.FaultFailed, match="planned_kind is not injected on the hosts by this cmx"):
        Planned().inject(faults.parse("planned_kind@1")[0], None)


def _inject(run_dir, text: str, started: list | None = None) -> tuple[dict, list]:
    events: list = []
    got = faultinject.inject(
        run_dir,
        "w1",
        {"index": 0, "fault": text, "delay_s": 0, "restart_s": 0.05, "shutdown_timeout": 10},
        lambda: False,
        events.append,
        lambda: (started.append(time.time()), 0)[1] if started is not None else 1,
    )
    return got, events


def _row(run_dir) -> dict:
    with open(run_dir / faultinject.FAULTS_CSV) as f:
        (row,) = list(csv.DictReader(f))
    return row


@pytest.mark.parametrize("text, sig", [("kill_worker@0", signal.SIGKILL), ("term_worker@0", signal.SIGTERM)])
def test_a_worker_ending_kind_signals_the_runs_worker_and_starts_its_replacement(tmp_path, text, sig):
    worker = subprocess.Popen(["sleep", "60"])
    try:
        (tmp_path / "worker.pid").write_text(str(worker.pid))
        started: list = []
        got, events = _inject(tmp_path, text, started)
        assert got["ok"] and got["pid"] == worker.pid, got
        assert worker.wait(timeout=5) == -sig
        assert len(started) == 1 and started[0] >= got["struck_at"] + 0.05  # after restart_s
        assert [(e.kind, e.pid, e.fault) for e in events] == [
            ("fault", worker.pid, text),
            ("fault_end", worker.pid, text),
        ]
        row = _row(tmp_path)
        assert (row["kind"], row["pid"], row["error"]) == (text.split("@")[0], str(worker.pid), "")
    finally:
        worker.kill()
        worker.wait()


def test_kill_child_kills_the_pool_child_running_a_task(tmp_path):
    code = (
        "import subprocess, sys, time; c = subprocess.Popen(['sleep', '60']); "
        "open(sys.argv[1] + '/busy.%d' % c.pid, 'w').write('task-7'); print(c.pid, flush=True); c.wait()"
    )
    worker = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        child = int(worker.stdout.readline())
        (tmp_path / "worker.pid").write_text(str(worker.pid))
        got, events = _inject(tmp_path, "kill_child@0")
        assert got["ok"] and (got["pid"], got["task_id"]) == (child, "task-7"), got
        assert worker.wait(timeout=5) == 0 and worker.poll() == 0  # its child died; the worker itself did not
        assert [(e.kind, e.pid, e.task_id) for e in events] == [
            ("fault", child, "task-7"),
            ("fault_end", child, "task-7"),
        ]
    finally:
        worker.kill()
        worker.wait()


def test_a_worker_kind_on_a_host_without_the_runs_worker_fails_saying_so(tmp_path):
    got, events = _inject(tmp_path, "partition_worker@0/1")
    assert not got["ok"] and got["error"] == "no worker of the run runs on this host"
    assert [e.kind for e in events] == ["fault_end"] and _row(tmp_path)["error"] == got["error"]


def test_undo_at_the_lease_end_is_every_kinds_and_a_no_op_without_a_partition(tmp_path):
    faultinject.undo(tmp_path)  # nothing held: nothing done, nothing raised
    assert list(tmp_path.iterdir()) == []
