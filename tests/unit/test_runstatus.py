"""Run statuses come from typed outcomes, never from the words of an error message."""

from __future__ import annotations

import os

from cmx.engine.hosts.ansible import PlaybookResult
from cmx.engine.hosts.outcome import Failure
from cmx.engine.run.runstatus import RunStatus, controller_alive, controller_identity, decide

OK = PlaybookResult("successful", 0, (), 1.0)


def _decide(started=OK, stopped=OK, driver=None, ingest_error=None, interrupted=False):
    return decide(
        interrupted=interrupted,
        started=started,
        stopped=stopped,
        driver={"status": "ok"} if driver is None else driver,
        ingest_error=ingest_error,
        run_timeout_s=60,
    )


def test_ok():
    assert _decide() == (RunStatus.OK, None)


def test_a_failure_that_mentions_a_timeout_is_still_failed():
    worker = Failure(
        "h2",
        "Start the Celery worker of the run and wait until it is ready.",
        "worker on h2 not ready after 60s: socket timeout; connection timed out",
    )
    assert _decide(PlaybookResult("failed", 2, (worker,), 1.0), driver={})[0] is RunStatus.FAILED
    drive = Failure(
        "h1",
        "Run the driver until the workload is done or the run times out.",
        "OperationalError: timeout expired",
        timed_out=False,
    )
    assert _decide(PlaybookResult("failed", 2, (drive,), 1.0), driver={})[0] is RunStatus.FAILED
    status, error = _decide(driver={"status": "failed", "error": "TimeoutError: broker timeout"})
    assert status is RunStatus.FAILED and "TimeoutError" in error


def test_the_drivers_deadline_is_a_timeout():
    status, error = _decide(driver={"status": "timeout", "error": "run_timeout of 60s passed while waiting"})
    assert status is RunStatus.TIMEOUT and error.startswith("run_timeout")


def test_the_drive_steps_ansible_timeout_is_a_timeout():
    drive = Failure(
        "h1",
        "Run the driver until the workload is done or the run times out.",
        "The command action failed to execute in the expected time frame",
        timed_out=True,
    )
    status, error = _decide(PlaybookResult("failed", 2, (drive,), 1.0), driver={})
    assert status is RunStatus.TIMEOUT and error == "run_timeout of 60s passed"
    assert _decide(PlaybookResult("timeout", 254, (), 1.0), driver={})[0] is RunStatus.TIMEOUT


def test_a_timed_out_task_other_than_the_drive_is_a_failure():
    other = Failure("h2", "Start the Celery worker of the run and wait until it is ready.", "x", timed_out=True)
    assert _decide(PlaybookResult("failed", 2, (other,), 1.0), driver={})[0] is RunStatus.FAILED


def test_interrupted_wins_over_everything():
    assert _decide(driver={"status": "timeout"}, interrupted=True)[0] is RunStatus.INTERRUPTED


def test_later_failures_in_order():
    assert _decide(ingest_error="ingest failed: x") == (RunStatus.FAILED, "ingest failed: x")
    bad_stop = PlaybookResult("failed", 2, (Failure("h1", "Fetch", "no space"),), 1.0)
    assert _decide(stopped=bad_stop)[0] is RunStatus.FAILED


def test_controller_liveness():
    host, pid, started = controller_identity()
    assert pid == os.getpid() and controller_alive(host, pid, started)
    assert not controller_alive(host, pid, started - 100)  # a reused pid is not our controller
    assert not controller_alive("another-machine", pid, started)
    assert not controller_alive(host, 2**22 + 7, started)


def test_status_tells_running_from_abandoned(tmp_path):
    """A run without an end is running while its sweep's controller lives, abandoned after."""
    import subprocess
    import sys

    from cmx.engine.results import db
    from tests.conftest import cmx

    path = tmp_path / "r.duckdb"
    record = f"""
import sys, time
from cmx.engine.results import db
from cmx.engine.run.runstatus import controller_identity
with db.connect({str(path)!r}) as con:
    db.record_sweep(con, sys.argv[1], "e", "e.yaml", "throughput", "", "inv", {{}})
    db.record_controller(con, sys.argv[1], *controller_identity())
    db.record_run_start(con, experiment="e", sweep_id=sys.argv[1], run_id=sys.argv[1] + "-run", cell_id="c",
                        repeat=1, workload="throughput", dims={{"pool": "solo"}}, params={{}}, warmup_s=0)
print("recorded", flush=True)
time.sleep(float(sys.argv[2]))
"""
    subprocess.run([sys.executable, "-c", record, "gone", "0"], check=True, capture_output=True)
    alive = subprocess.Popen([sys.executable, "-c", record, "alive", "60"], stdout=subprocess.PIPE, text=True)
    try:
        assert alive.stdout.readline().strip() == "recorded"
        with db.connect(path) as con:
            db.record_run_end(con, "gone-run-x", "ok", None, {})  # an end of another run changes nothing
        out = cmx("status", "--db", str(path)).stdout
    finally:
        alive.kill()
        alive.wait()
    lines = out.splitlines()
    header = next(ln for ln in lines if "abandoned" in ln)
    row = next(ln for ln in lines if ln.strip("│ ").startswith("e "))
    counts = dict(
        zip([c.strip() for c in header.strip("┃").split("┃")], [c.strip() for c in row.strip("│").split("│")])
    )
    assert (counts["runs"], counts["running"], counts["abandoned"], counts["failed"]) == ("2", "1", "1", "0"), out
