"""The warm driver (workloads/host/drivewarm.py): it imports ahead while the run's worker starts,
yields the CPU to that worker meanwhile where it can take its priority back, and runs the driver
at its own priority once told to go, every thread of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from cmx.workloads.host.drivewarm import YIELD_NICE, may_raise_priority
from tests.conftest import REPO
from tests.prereqs import require

#: A stand-in driver module: a thread started while it warms up (as an import might), then main
#: reports the nice value of every thread the process has.
FAKE_DRIVER = '''
import json, os, threading
started = threading.Event()
threading.Thread(target=lambda: (started.set(), threading.Event().wait(30)), daemon=True).start()
started.wait()
def warm():
    open(os.environ["WARMED"], "w").close()
def main(argv):
    print(json.dumps([os.getpriority(os.PRIO_PROCESS, t.native_id) for t in threading.enumerate()]))
    return 0
'''


def _nice(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])


def test_the_warm_up_yields_the_cpu_and_the_driver_runs_at_its_own_priority(tmp_path):
    require(
        None
        if may_raise_priority()
        else "CAP_SYS_NICE (root): the warm-up yields only where it can take its priority back"
    )
    (tmp_path / "fake_driver.py").write_text(FAKE_DRIVER)
    warmed = tmp_path / "warmed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "cmx.workloads.host.drivewarm", "fake_driver"],
        cwd=tmp_path,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}", "WARMED": str(warmed)},
    )
    try:
        deadline = time.monotonic() + 30
        while not warmed.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the warm-up never ran the module's warm()"
            time.sleep(0.02)
        own = os.getpriority(os.PRIO_PROCESS, 0)
        assert _nice(proc.pid) == min(own + YIELD_NICE, 19), "the warm-up did not yield the CPU"
        out, _ = proc.communicate("go\n", timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 0
    assert json.loads(out) == [own, own], "a thread of the driver kept the warm-up's lower priority"


def test_a_warm_up_never_told_to_go_runs_nothing(tmp_path):
    (tmp_path / "fake_driver.py").write_text(FAKE_DRIVER)
    proc = subprocess.run(
        [sys.executable, "-m", "cmx.workloads.host.drivewarm", "fake_driver"],
        cwd=tmp_path,
        input="",
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO}", "WARMED": str(tmp_path / "w")},
    )
    assert (proc.returncode, proc.stdout) == (0, "")
