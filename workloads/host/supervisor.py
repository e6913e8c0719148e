"""``python -m cmx.workloads.host.supervisor RUN_DIR -- CMD...``: the worker's parent, which records how
it ended.

A worker killed mid-run (OOM killer, a signal, a crash) leaves no word of its own. Its parent
can tell: it writes ``worker.pid`` when it starts the worker and ``worker.exit`` (exit code or
signal) when the worker ends, so the run's error can say *why* the worker stopped answering. As a
child subreaper it also inherits what the worker leaves behind (prefork children of a killed
worker) and ends them, so no process of the run outlives the worker. Kept tiny: it idles beside
the worker for the whole run.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cmx.workloads.runtime.files import write_atomic

PR_SET_CHILD_SUBREAPER = 36


def describe(status: int) -> dict:
    """{"exit_code": N} or {"signal": "SIGKILL", "signal_number": 9}, from a wait status."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        return {"signal": signal.Signals(sig).name if sig in signal.valid_signals() else str(sig), "signal_number": sig}
    return {"exit_code": os.WEXITSTATUS(status)}


def exit_text(run_dir: Path) -> str | None:
    """'exited, signal SIGKILL' / 'exited with code 1' from the run dir's worker.exit, if any."""
    from cmx.workloads.runtime.workerevents import how_it_ended  # not at the top: the supervisor itself never needs it

    try:
        return how_it_ended(json.loads((Path(run_dir) / "worker.exit").read_text()))
    except (OSError, ValueError, AttributeError):
        return None


def _subreaper() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: orphans go to init, `hostctl stop` still ends the tree
        pass


def _end_orphans(grace: float = 5.0) -> None:
    """TERM what the worker left behind (now our children), KILL it after ``grace``, reap it all."""
    import psutil

    kids = psutil.Process().children(recursive=True)
    for p in kids:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(kids, timeout=grace)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(alive, timeout=2)
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break


def main(argv: list[str]) -> int:
    run_dir, cmd = Path(argv[0]), argv[argv.index("--") + 1 :]
    _subreaper()
    worker = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)  # stdout/err: ours, i.e. worker.log
    write_atomic(run_dir / "worker.pid", str(worker.pid))
    # Whoever ends us ends the worker: we pass TERM/INT on and still record how it ended.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, _frame: worker.send_signal(signum))
    while True:
        try:
            pid, status = os.waitpid(worker.pid, 0)
            break
        except InterruptedError:
            continue
    worker.returncode = 0  # reaped above; keep Popen from waiting again
    for sig in (signal.SIGTERM, signal.SIGINT):  # finish the record and the clean-up first (bounded)
        signal.signal(sig, signal.SIG_IGN)
    write_atomic(run_dir / "worker.exit", json.dumps({"pid": pid, "at": time.time(), **describe(status)}))
    _end_orphans()
    return 0


if __name__ == "__main__":
    from cmx.workloads.runtime.quickexit import exit_now

    exit_now(main(sys.argv[1:]))  # without the interpreter's teardown: the run's stop waits for it
