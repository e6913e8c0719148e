"""A worker that a fault cut off from the broker may stay silent: that is the fault's finding, not a
lost worker. The run's watchdog (workloads/drive/workerwatch.py) on the machine's real Redis, with
worker nodes that never answer: without a fault their silence fails the run; after a fault that
strikes the broker (restart_broker, failover_broker) none does, and after partition_worker only
the worker host it struck is let be. In restart-broker-rabbitmq.yaml a threads worker that was
still reconnecting 11 s after the node came back failed 2 of 3 runs this way, so the sweep could
not say whether it ever consumed again."""

from __future__ import annotations

import threading
import time

import pytest
from celery import Celery

from cmx.workloads.runtime import workerevents as we
from cmx.workloads.drive.workerwatch import Watchdog, cut_off
from cmx.workloads.runtime.spec import RunSpec, node_name

pytestmark = pytest.mark.integration

NODES = [node_name("cut1", "w1"), node_name("cut1", "w2")]


def _spec() -> RunSpec:
    return RunSpec(
        run_id="cut1",
        experiment="e",
        cell_id="c",
        repeat=1,
        workload="concurrent_sleep",
        pool="threads",
        worker_nodes=NODES,
    )


def _silence_fails(events: list, watch_s: float = 4.0) -> str | None:
    """What the watchdog says of two silent workers within ``watch_s`` (None: nothing)."""
    app = Celery(broker="redis://127.0.0.1:6379/0")
    watchdog = Watchdog(app, _spec(), lambda: events, lost_after_s=1.0)
    # Entered off the main thread: it is not armed (no SIGUSR1 into pytest), its problem is read.
    entered = threading.Thread(target=watchdog.__enter__)
    entered.start()
    entered.join()
    watchdog.watch_silence()
    try:
        end = time.monotonic() + watch_s
        while watchdog.problem is None and time.monotonic() < end:
            time.sleep(0.1)
        return None if watchdog.problem is None else str(watchdog.problem)
    finally:
        watchdog.__exit__()


def _fault(kind: str, host: str) -> we.WorkerEvent:
    text = f"{kind}@1/5" if kind == "partition_worker" else f"{kind}@1"  # as the agent announces it
    return we.WorkerEvent(we.FAULT, host, time.time(), index=0, fault=text)


def test_silent_workers_fail_the_run_without_a_fault():
    said = _silence_fails([])
    assert said is not None and f"worker {NODES[0]} on host w1 stopped answering" in said, said


@pytest.mark.parametrize("kind,host", [("restart_broker", "b1"), ("failover_broker", "d1")])
def test_a_fault_that_strikes_the_broker_lets_every_worker_be_silent(kind, host):
    assert _silence_fails([_fault(kind, host)]) is None


def test_partition_worker_lets_only_the_struck_host_be_silent():
    said = _silence_fails(
        [
            _fault("partition_worker", "w1"),
            we.WorkerEvent(we.FAULT_END, "w1", time.time(), index=0, fault="partition_worker@1/5"),
        ]
    )
    assert said is not None and "on host w2 stopped answering" in said and "host w1" not in said, said
    assert cut_off(_spec(), [_fault("partition_worker", "w1")]) == {NODES[0]}


def test_a_worker_fault_cuts_nobody_off():
    assert cut_off(_spec(), [_fault("kill_worker", "w1"), _fault("term_worker", "w2")]) == set()
