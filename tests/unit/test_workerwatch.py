"""Pure parts of the driver's checks on workers: what the cell asks vs what the worker reports,
and how a worker's end is told (exit code or signal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from cmx.engine.results.ingest_workers import worker_causes
from cmx.workloads.runtime.spec import RunSpec
from cmx.workloads.host.supervisor import describe, exit_text
from cmx.workloads.drive.workerwatch import mismatches, wanted_config


def _spec(**kw) -> RunSpec:
    return RunSpec(run_id="r1", experiment="e", cell_id="c", repeat=1, workload="throughput", **kw)


def test_the_cells_intent_in_the_workers_terms():
    spec = _spec(
        pool="threads",
        concurrency=4,
        prefetch_multiplier=2,
        heartbeat=0,
        celery={"task_acks_late": True, "worker_max_tasks_per_child": 10},
    )
    assert wanted_config(spec) == {
        "pool": "threads",
        "concurrency": 4,
        "prefetch_multiplier": 2,
        "heartbeat": 0,
        "queue_type": "classic",
        "celery.task_acks_late": True,
        "celery.worker_max_tasks_per_child": 10,
    }


def test_a_mismatch_names_both_values():
    want = {"prefetch_multiplier": 4, "heartbeat": 0, "celery.worker_max_tasks_per_child": 10, "pool": "threads"}
    runs = {"prefetch_multiplier": 1, "heartbeat": 0.0, "celery.worker_max_tasks_per_child": None, "pool": "threads"}
    assert mismatches(want, runs) == [
        "cell asks prefetch_multiplier 4; worker runs 1",
        "cell asks celery.worker_max_tasks_per_child 10; worker runs None",
    ]


def test_numbers_compare_by_value_and_booleans_by_identity():
    assert mismatches({"heartbeat": 10, "x": [1, 2]}, {"heartbeat": 10.0, "x": [1, 2]}) == []
    assert mismatches({"celery.task_acks_late": True}, {"celery.task_acks_late": 1}) != []
    assert mismatches({"celery.task_acks_late": False}, {}) == [
        "cell asks celery.task_acks_late False; worker runs None"
    ]


def test_a_childs_end_is_described_by_code_or_signal(tmp_path):
    pid = os.fork()
    if pid == 0:
        os._exit(3)
    assert describe(os.waitpid(pid, 0)[1]) == {"exit_code": 3}
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    child.kill()
    _, status = os.waitpid(child.pid, 0)
    child.returncode = -9
    assert describe(status) == {"signal": "SIGKILL", "signal_number": signal.SIGKILL}


def test_the_cause_of_a_silent_worker(tmp_path):
    (tmp_path / "h3").mkdir()
    (tmp_path / "h3" / "worker.exit").write_text(json.dumps({"at": 100.0, "signal": "SIGKILL", "signal_number": 9}))
    (tmp_path / "h2").mkdir()
    (tmp_path / "h2" / "worker.exit").write_text(json.dumps({"at": 200.0, "exit_code": 0}))
    assert exit_text(tmp_path / "h3") == "exited, signal 9 (SIGKILL)"
    assert worker_causes(tmp_path, ["h3"], noticed_at=110.0) == "worker on h3 exited, signal 9 (SIGKILL)"
    assert "hung" in worker_causes(tmp_path, ["h2"], noticed_at=110.0)  # ended by the run's stop, later
    assert "no exit record" in worker_causes(tmp_path, ["h4"], noticed_at=110.0)


def test_a_workers_end_and_first_receipt_as_its_host_sees_them(tmp_path):
    from cmx.workloads.runtime import workerevents as we

    assert we.observe(tmp_path, "w2") == []
    (tmp_path / "recv-41.rows").write_bytes(b"")  # the recorder's file before its first flush
    assert we.observe(tmp_path, "w2") == []
    (tmp_path / "recv-41.rows").write_bytes(b"frame")
    (tmp_path / "worker.exit").write_text(json.dumps({"pid": 41, "at": 100.0, "signal": "SIGKILL", "signal_number": 9}))
    exited, consuming = we.observe(tmp_path, "w2")
    assert (consuming.kind, consuming.host) == (we.CONSUMING, "w2")
    assert exited == we.WorkerEvent(we.EXITED, "w2", 100.0, 41, None, "SIGKILL", 9)
    assert exited.text() == "worker on w2 exited, signal 9 (SIGKILL)"
    assert we.WorkerEvent(we.EXITED, "w3", 1.0, 7, exit_code=1).text() == "worker on w3 exited with code 1"


def test_events_passed_on_twice_are_recorded_once(tmp_path):
    from dataclasses import asdict

    from cmx.workloads.runtime import workerevents as we

    died = we.WorkerEvent(we.EXITED, "w2", 100.0, 41, None, "SIGKILL", 9)
    took = we.WorkerEvent(we.CONSUMING, "w2", 90.0)
    we.record(tmp_path, [asdict(took)])
    assert we.record(tmp_path, [asdict(took), asdict(died)]) == [took, died]
    assert we.read(tmp_path) == [took, died]
    # a replacement worker (another pid) on the same host is another end
    again = we.WorkerEvent(we.EXITED, "w2", 200.0, 42, 0)
    assert we.merge([took, died], [died, again]) == [took, died, again]


def test_a_dead_worker_of_the_run_fails_it_with_how_it_ended():
    import pytest

    from cmx.workloads.runtime import workerevents as we
    from cmx.workloads.drive.workerwatch import WorkerProblem, check_alive
    from cmx.workloads.runtime.spec import node_name

    spec = _spec(pool="solo", worker_nodes=[node_name("r1", "w1"), node_name("r1", "w2")])
    took = we.WorkerEvent(we.CONSUMING, "w2", 90.0)
    other_run = we.WorkerEvent(we.EXITED, "w9", 95.0, 5, None, "SIGKILL", 9)  # not a worker of this run
    check_alive(spec, [took, other_run])
    died = we.WorkerEvent(we.EXITED, "w2", 100.0, 41, None, "SIGKILL", 9)
    with pytest.raises(WorkerProblem) as caught:
        check_alive(spec, [took, died])
    assert str(caught.value) == "worker on w2 exited, signal 9 (SIGKILL) (pid 41)"
    assert caught.value.hosts == ["w2"] and not caught.value.silent


def test_a_worker_that_exits_after_a_broker_node_was_killed_is_the_faults_finding():
    """kill_broker_node (its kind downs_workers): a worker whose classic queue's home node died exits;
    after the strike that is what the fault did (its tasks counted lost), before it a failure."""
    import pytest

    from cmx.workloads.runtime import workerevents as we
    from cmx.workloads.drive.workerwatch import WorkerProblem, check_alive
    from cmx.workloads.runtime.spec import node_name

    spec = _spec(pool="threads", worker_nodes=[node_name("r1", "w1")])
    struck = we.WorkerEvent(we.FAULT, "b1", 100.0, index=0, fault="kill_broker_node@2")
    check_alive(spec, [struck, we.WorkerEvent(we.EXITED, "w1", 101.5, 41, exit_code=1)])
    with pytest.raises(WorkerProblem):
        check_alive(spec, [struck, we.WorkerEvent(we.EXITED, "w1", 99.0, 41, exit_code=1)])
    restarted = we.WorkerEvent(we.FAULT, "b1", 100.0, index=0, fault="restart_broker@2")
    with pytest.raises(WorkerProblem):  # other broker faults: an exit is still a failure
        check_alive(spec, [restarted, we.WorkerEvent(we.EXITED, "w1", 101.5, 41, exit_code=1)])
