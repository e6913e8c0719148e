"""A process of the run leaves without the interpreter's teardown, but only after every exit
function ran, with the code it was given, its streams flushed (workloads/runtime/quickexit.py); and the
prefork pool's shutdown timer thread sleeps briefly in a worker of a run (workloads/app/workerstop.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=60)


def test_the_exit_functions_run_once_and_the_code_is_kept(tmp_path):
    marker = tmp_path / "ran"
    proc = _run(f"""
        import atexit, sys
        from cmx.workloads.runtime.quickexit import at_exit
        atexit.register(lambda: open({str(marker)!r}, "a").write("first\\n"))
        atexit.register(lambda: open({str(marker)!r}, "a").write("second\\n"))
        at_exit(lambda: 3)
        sys.stdout.write("buffered, never flushed by the script")
        sys.exit(0)
    """)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "buffered, never flushed by the script"
    assert marker.read_text().splitlines() == ["second", "first"]  # last registered first, as Python runs them


def test_an_exit_function_registered_later_leaves_the_exit_to_python(tmp_path):
    marker = tmp_path / "ran"
    proc = _run(f"""
        import atexit, sys
        from cmx.workloads.runtime.quickexit import at_exit
        atexit.register(lambda: open({str(marker)!r}, "a").write("before\\n"))
        at_exit(lambda: 3)
        atexit.register(lambda: open({str(marker)!r}, "a").write("after\\n"))
        sys.exit(0)
    """)
    assert proc.returncode == 0, proc.stderr
    assert marker.read_text().splitlines() == ["after", "before"]  # each once


def test_a_child_forked_later_leaves_as_it_would_have(tmp_path):
    script = textwrap.dedent("""
        import os, sys
        from cmx.workloads.runtime.quickexit import at_exit
        at_exit(lambda: 3)
        pid = os.fork()
        if pid == 0:
            sys.exit(5)  # the child's own exit, not the parent's quick one
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout.strip() == "5"


def test_the_prefork_timer_thread_sleeps_briefly_and_no_one_else_does():
    from celery.concurrency import prefork

    from cmx.workloads.app import workerstop

    real = prefork.time
    try:
        workerstop._short_timer_sleeps()

        def nap(name: str) -> float:
            took: list[float] = []

            def run() -> None:
                t0 = time.monotonic()
                prefork.time.sleep(0.5)
                took.append(time.monotonic() - t0)

            t = threading.Thread(target=run, name=name)
            t.start()
            t.join()
            return took[0]

        # Not told to stop by its run (a fault's TERM): Celery's own naps.
        assert nap(workerstop.TIMER_THREAD) >= 0.5
        workerstop._stopping[0] = 1  # the run's stop (runmarks.STOP_ASKED)
        assert nap(workerstop.TIMER_THREAD) < 0.4
        assert nap("another") >= 0.5
        assert prefork.time.monotonic is real.monotonic  # the rest of the module's time is time's
    finally:
        prefork.time = real
        workerstop._stopping[0] = 0
